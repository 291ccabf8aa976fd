"""A long class or function parsed statement by statement of its body, so the language server re-parses
only what an edit changed.

chunks.py cuts a module at its top-level statements; a file that is mostly one class (accelerate's
``Accelerator``: 4,000 of ``accelerator.py``'s 4,400 lines) or one long ``def main():`` is then one piece,
re-parsed whole on every keystroke (~0.2 s of the ~0.3 s the editor may wait). Here such a piece is cut
again inside the definition's body, before each statement of the body (a ``def``, a decorator, an
assignment), and each segment after the first is parsed inside a one-line class header (``class _:``),
which puts Python's tokenizer at that line as the whole text does (no open bracket or string, indentation
stack [0, body indentation]); LibCST's parse of a statement does not depend on what encloses it (``return``
or ``await`` parse in a class body too).

Why the joined tree is the whole text's (tests/rewrite/test_block_pieces.py compares them on the fixtures,
the rule examples and texts made for each edge; bench/rewrite/bench_parse_reuse.py on real files):

- a cut is made only at a line indented exactly as the body's first statement, that may begin a statement
  (not a clause such as ``else:``, a closing bracket or a comment), below a line that does not end in a
  backslash or a decorator; the gap above it (the lines LibCST makes that statement's ``leading_lines``)
  is taken with it, and may hold only empty lines and comments at the body's indentation (LibCST gives a
  deeper comment to the block above as its footer, a whitespace-only line likewise);
- a cut inside a multi-line string or bracket leaves the segment above it unparseable: it is joined with
  the next one and tried again (chunks.run_in_pieces), as for top-level pieces;
- the header (decorators, the ``class`` or ``def`` line and its continuation lines, up to the ``:`` that
  closes its brackets) is never cut;
- each segment must parse to exactly one class or function with an indented body, no text around it, the same
  default indentation and newline as the first, and only the last may have a body footer: anything else
  and the piece is parsed whole (``None``).
"""

from __future__ import annotations

import re
from typing import Callable, Optional, TypeVar

import libcst as cst

from neuron_port.rewrite.chunks import LINE, NOT_A_START, run_in_pieces

_T = TypeVar("_T")

# Only pieces longer than this are cut (a short definition costs less to parse than to cut).
MIN_BLOCK_CHARS = 4_000

_DEFINITION = re.compile(r"(?:@|class\s|def\s|async\s+def\s)")
# the indentation of a line that holds code (not blank, not only a comment)
_INDENTED_CODE = re.compile(r"([ \t]+)[^ \t\f\r\n#]")


def _first_code_line(text: str) -> str:
    for line in LINE.findall(text):
        stripped = line.lstrip(" \t\f")
        if stripped and stripped[0] not in "#\r\n":
            return line
    return ""


def body_segments(text: str) -> Optional[list[str]]:
    """``text`` (one top-level piece) cut before the statements of its definition's body, or None when it does
    not look like a long class or function (then it is parsed whole)."""
    if len(text) < MIN_BLOCK_CHARS or not _DEFINITION.match(_first_code_line(text)):
        return None
    lines = LINE.findall(text)
    body_indent = None
    offset = 0
    cuts: list[int] = []
    quote = None  # the triple quote a multi-line string opened on an earlier line (a guess, see below)
    depth, in_header = 0, True  # the header's open brackets (a guess too: a bracket in a string misleads it)
    for index, line in enumerate(lines):
        start, offset = offset, offset + len(line)
        opened = quote
        quote = _quote_after(line, quote)
        if opened is not None:
            continue  # inside a docstring: its lines at the body's indentation are no statements
        if in_header:
            code = line.split("#", 1)[0]
            depth += sum(map(code.count, "([{")) - sum(map(code.count, ")]}"))
            in_header = depth > 0 or not code.rstrip().endswith(":")
            continue
        if body_indent is None:
            found = _INDENTED_CODE.match(line)
            if found is not None:
                body_indent = found.group(1)  # a wrong guess costs merges or a whole parse, never a tree
            continue
        if not line.startswith(body_indent) or NOT_A_START.match(line, len(body_indent)):
            continue
        gap = index
        while gap > 0 and _in_gap(lines[gap - 1], body_indent):
            gap -= 1
        above = lines[gap - 1]
        if not above.strip() or above.lstrip().startswith("@") or above.rstrip("\r\n").endswith("\\"):
            continue  # a whitespace-only line above the gap, a decorator of this statement, a continuation
        cut = start - sum(len(lines[i]) for i in range(gap, index))
        if cut > 0 and (not cuts or cut > cuts[-1]):
            cuts.append(cut)
    if not cuts:
        return None
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def _quote_after(line: str, quote: Optional[str]) -> Optional[str]:
    """The triple quote still open after ``line``. A guess (a quote in a comment or a one-quote string
    misleads it): it only skips candidate cuts, and a wrong cut is caught by the parse anyway."""
    if '"""' not in line and "'''" not in line:
        return quote
    at = 0
    while True:
        if quote is None:
            found = [(line.find(q, at), q) for q in ('"""', "'''")]
            found = [(i, q) for i, q in found if i >= 0]
            if not found:
                return None
            at, quote = min(found)
            at += 3
        else:
            end = line.find(quote, at)
            if end < 0:
                return quote
            at, quote = end + 3, None


def _in_gap(line: str, body_indent: str) -> bool:
    """An empty line, or a comment at exactly the body's indentation."""
    if line in ("\n", "\r\n", "\r"):
        return True
    return line.startswith(body_indent + "#")


# the header a body segment after the first is parsed under (the module docstring says why)
WRAPPER = "class _:"


def each_segment(cut: list[str], attempt: Callable[[str], Optional[_T]]) -> Optional[list[_T]]:
    """``attempt`` on the segments of ``cut`` (body_segments'), the first as it is (the definition's header and
    its first statements) and each later one under WRAPPER; a refused segment is joined with the next
    (chunks.run_in_pieces). None when that is not enough."""
    newline = "\r\n" if "\r\n" in cut[0] else "\r" if "\r" in cut[0] and "\n" not in cut[0] else "\n"
    done: list[bool] = []

    def each(segment: str) -> Optional[_T]:
        found = attempt(segment if not done else WRAPPER + newline + segment)
        if found is not None and not done:
            done.append(True)
        return found

    return run_in_pieces([(0, segment) for segment in cut], each)


def unwrapped(text: str) -> Optional[str]:
    """A later segment's own text, from the text each_segment gave ``attempt`` (None: not such a text)."""
    if not text.startswith(WRAPPER):
        return None
    return text[len(WRAPPER) + (2 if text.startswith("\r\n", len(WRAPPER)) else 1):]


def parse_definition(text: str, parse: Callable[[str], Optional[cst.Module]]) -> Optional[cst.Module]:
    """The module ``text`` parses to, built from its definition's segments (``parse``: LibCST's parse of one text,
    None when it fails; the caller may answer from a cache); None when ``text`` is not cut or the segments
    do not join exactly."""
    cut = body_segments(text)
    if cut is None:
        return None
    parts = each_segment(cut, parse)
    if parts is None or len(parts) < 2:
        return None
    return _join(parts)


def _block(module: cst.Module, kinds: tuple = (cst.ClassDef,)) -> Optional[cst.IndentedBlock]:
    if len(module.body) != 1 or not isinstance(module.body[0], kinds):
        return None
    body = module.body[0].body
    return body if isinstance(body, cst.IndentedBlock) else None


def _join(parts: list[cst.Module]) -> Optional[cst.Module]:
    first, last = parts[0], parts[-1]
    blocks = [_block(first, (cst.ClassDef, cst.FunctionDef)), *(_block(p) for p in parts[1:])]
    if any(b is None for b in blocks):
        return None
    for part, block in zip(parts[1:], blocks[1:]):
        if (part.header or part.default_indent != first.default_indent
                or part.default_newline != first.default_newline or part.encoding != first.encoding
                or block.indent != blocks[0].indent or not block.body):
            return None
    for part, block in zip(parts[:-1], blocks[:-1]):
        if part.footer or block.footer or not part.has_trailing_newline:
            return None  # lines the whole text may give elsewhere: parse it whole
    statements: list[cst.BaseStatement] = [s for b in blocks for s in b.body]
    body = blocks[0].with_changes(body=statements, footer=blocks[-1].footer)
    return first.with_changes(body=[first.body[0].with_changes(body=body)], footer=last.footer,
                              has_trailing_newline=last.has_trailing_newline)
