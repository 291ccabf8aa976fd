"""A long module parsed piece by piece, so its memory stays bounded (issue 22).

LibCST's native parser holds its tokens and two intermediate trees of the whole text while it builds the
Python one: about 16 KB per source line at its peak (1 GB for a 60,000-line file), though the finished
tree is about 2 KB per line. CPython's ``ast.parse`` of such a file peaks near 250 MB. Both are run here
on runs of whole top-level statements of at most about CHUNK_CHARS characters instead, and the pieces are
joined into the one tree (or verdict) the whole text gives:

- a piece starts at a column-0 line that may begin a top-level statement (a ``def``, ``class``, decorator,
  or any simple or compound statement: a flat script is cut as a module of functions is; not ``else``,
  ``elif``, ``except`` or ``finally``, which continue the statement above and are the one case where the
  text above a wrong cut would still parse), together with the blank lines and column-0 comments just
  above it (the whole-text parse makes them that statement's ``leading_lines``; a piece's parse makes them
  its module header, so they are moved back). A place where an indented comment or a whitespace-only line
  stands in that gap is not a split point: LibCST gives such lines to the previous block's footer;
- a top-level statement start can only be told from a string's or a bracket's content by tokenizing: a
  candidate inside a multi-line string or bracket gives a piece that does not parse; it is joined with
  the next piece and parsed again (after MAX_MERGES such joins the whole text is parsed as before), so a
  wrong guess costs time, never a different tree or message;
- Python's tokenizer starts every piece as it would at that line of the whole text (no open bracket or
  string, indentation 0), so when every piece parses, the statements are those of the whole text. What
  the tree takes from the text as a whole (the default indentation and newline, the encoding cookie) is
  checked to agree between the pieces, else the whole text is parsed.

tests/rewrite/test_chunks.py compares the joined trees with whole-text parses (``deep_equals`` and the
rendered code) on the fixtures, the rule examples and texts made to fall on each edge above.
"""

from __future__ import annotations

import re
import zlib
from typing import Callable, Optional, TypeVar

import libcst as cst

# About one piece per 16 KB: small enough that a piece never needs the deep-nesting pre-check of
# syntax.py (SHALLOW_CHARS), large enough that the per-piece overhead is nothing.
CHUNK_CHARS = 16_000

# A piece that does not parse is joined with the next and parsed again, at most this many times per file
# (then the whole text is parsed): a wrong split point costs a re-parse of two pieces.
MAX_MERGES = 16

# CPython's verdict is taken per segment, and a rewritten text's unchanged segments are not parsed again:
# segments are cut at every definition, and between other statements where the line's hash says so (cuts
# chosen by content alone, so an edit moves no cut elsewhere), or at this size, whichever comes first.
SEGMENT_EVERY = 32
SEGMENT_CHARS = 4_000

_T = TypeVar("_T")

LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # Python's newlines only (not str.splitlines')
_DEFINITIONS = ("def ", "class ", "async def ", "@")
# what a line that begins a statement cannot start with (at column 0 here, at a body's indentation in
# block_pieces.py): indentation, a comment, a line end, a
# closing bracket (a continuation), or a clause of the compound statement above
NOT_A_START = re.compile(r"[ \t\f\r\n#)\]}\\]|(?:else|elif|except|finally)\b")


def _starts(code: str) -> list[tuple[int, bool, str]]:
    """(offset, whether a definition starts there, its first line) for every place a piece may start:
    the first line of the blank lines and column-0 comments above a column-0 line that may begin a
    statement (a guess: see the module docstring)."""
    lines = LINE.findall(code)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    points: list[tuple[int, bool, str]] = []
    for index, line in enumerate(lines):
        if index == 0 or NOT_A_START.match(line):
            continue
        gap = index
        while gap > 0:
            above = lines[gap - 1]
            if above in ("\n", "\r\n", "\r") or above.startswith("#"):
                gap -= 1
            else:
                break
        if gap == 0:
            continue  # the gap runs to the top of the file: the module header, not a piece's
        above = lines[gap - 1]
        if not above.strip() or above.lstrip().startswith(("#", "@")) or above.rstrip("\r\n").endswith("\\"):
            # a whitespace-only line or an indented comment (LibCST may give those to the block above as
            # its footer), a decorator (of this statement), or a backslash that joins the next line to it
            continue
        if points and points[-1][0] == offsets[gap]:
            continue
        points.append((offsets[gap], line.startswith(_DEFINITIONS), line))
    return points


def split_points(code: str) -> list[int]:
    """Offsets where a piece may start (see _starts)."""
    return [offset for offset, _definition, _line in _starts(code)]


def pieces(code: str, limit: int = CHUNK_CHARS) -> list[tuple[int, str]]:
    """``code`` cut at split points into (offset, text) pieces of about ``limit`` characters (a single
    statement longer than that is one piece); one piece when the text is short."""
    if limit and len(code) <= limit:
        return [(0, code)]
    out: list[tuple[int, str]] = []
    start = 0
    for point in split_points(code):
        if point - start >= limit:
            out.append((start, code[start:point]))
            start = point
    out.append((start, code[start:]))
    return out


def _has_no_block(module: cst.Module) -> bool:
    """True when the module certainly holds no indented block (so its detected indentation is unused)."""
    return all(isinstance(statement, cst.SimpleStatementLine) for statement in module.body)


def join_parsed(parts: list[cst.Module]) -> Optional[cst.Module]:
    """The module the whole text of ``parts`` (in order) parses to, or None when the pieces disagree on
    something the whole text decides once (then the caller parses the whole text)."""
    first, last = parts[0], parts[-1]
    if any(p.encoding != first.encoding or p.default_newline != first.default_newline for p in parts):
        return None
    if any(not p.has_trailing_newline for p in parts[:-1]):
        return None
    indents = {p.default_indent for p in parts if not _has_no_block(p)}
    if len(indents) > 1:
        return None
    body: list[cst.BaseStatement] = list(first.body)
    for part in parts[1:]:
        if not part.body:
            return None  # only comments and blank lines: the whole text gives them to a statement or footer
        statements = list(part.body)
        if part.header:
            statements[0] = statements[0].with_changes(
                leading_lines=[*part.header, *statements[0].leading_lines])
        body.extend(statements)
    return cst.Module(body=body, header=first.header, footer=last.footer, encoding=first.encoding,
                      default_indent=indents.pop() if indents else first.default_indent,
                      default_newline=first.default_newline, has_trailing_newline=last.has_trailing_newline)


def run_in_pieces(cut: list[tuple[int, str]], attempt: Callable[[str], Optional[_T]]) -> Optional[list[_T]]:
    """``attempt`` on each piece's text, in order. A piece it refuses (None: a split point inside a
    multi-line string, bracket or decorator) is joined with the next piece and tried again, at most
    MAX_MERGES times; None when that is not enough."""
    cut = list(cut)
    done: list[_T] = []
    index, merges = 0, 0
    while index < len(cut):
        text = cut[index][1]
        outcome = attempt(text)
        if outcome is not None:
            done.append(outcome)
            index += 1
            continue
        merges += 1
        if index + 1 == len(cut) or merges > MAX_MERGES:
            return None
        cut[index + 1] = (cut[index][0], text + cut[index + 1][1])
        index += 1
    return done


def parse_in_pieces(code: str, parse: Callable[[str], Optional[cst.Module]],
                    limit: int = CHUNK_CHARS) -> Optional[cst.Module]:
    """``parse`` (LibCST's parse of one text, None when it fails) run piece by piece and joined; None when
    the text is one piece, pieces do not parse or they disagree: the caller then parses the whole text."""
    if "barry_as_FLUFL" in code:  # a __future__ import that changes how the rest of the file tokenizes
        return None
    cut = pieces(code, limit)
    if len(cut) == 1:
        return None
    parts = run_in_pieces(cut, parse)
    return None if parts is None else join_parsed(parts)


def segments(code: str) -> list[tuple[int, str]]:
    """``code`` cut before every top-level definition, and between other top-level statements at about
    one split point in SEGMENT_EVERY (chosen by the line's content) or SEGMENT_CHARS characters."""
    out: list[tuple[int, str]] = []
    start = 0
    for point, definition, line in _starts(code):
        if definition or point - start >= SEGMENT_CHARS or zlib.crc32(line.encode()) % SEGMENT_EVERY == 0:
            out.append((start, code[start:point]))
            start = point
    out.append((start, code[start:]))
    return out
