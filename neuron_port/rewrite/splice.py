"""A fix pass's new text, syntax check and finding places from the edited statements alone (issue 38, item 3).

A fix replaces a few nodes; ``Module.code`` renders the whole new tree again, CPython's check parses the
whole new text again and the follow-up pass's positions render it a third time: on a 4,000-line file
each cost as much as a quarter of the rules' pass, for a one-line change. Here the new text is the old
text with each edited statement's render swapped in, the check parses those statements alone, and a
finding outside them keeps its old place, moved by the lines the edits above it added. Each step is
exact by construction or not taken (None: the engine does the whole-text work as before):

- LibCST renders a tree as the concatenation of its statements' renders, and a statement whose parent is
  the module or an indented block renders from the indentation alone (``CodegenState.indent_tokens``).
  The position render of the first pass records where each edited statement starts and its
  indentation; its old render must be the text found there (checked), then the new render replaces it.
- CPython's grammar is context-free at the statement level (``return``/``await``/``break`` outside
  their scopes are the compiler's errors, not the parser's): a statement that parses under an
  ``if 1:`` header at its indentation parses in its block. Only for texts CPython has already accepted
  whole (long ones: syntax.parse_module checks them before LibCST parses), without tabs or form feeds.
- A node outside every edited statement is the same object in both trees, rendered from the same text:
  its range moves by the lines the edits above it added or removed (line breaks are ``\\n`` only).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

_PARENTS = (cst.Module, cst.IndentedBlock)


@dataclass(frozen=True)
class Edit:
    """One edited statement: where its old render stood in the old text, and its new render."""

    start: int  # offset in the old text
    old_text: str
    new_text: str
    indent: tuple[str, ...]
    first_line: int  # 1-based line of ``start`` in the old text

    @property
    def old_end_line(self) -> int:
        """The first line after the old render (every statement render ends with a line break)."""
        return self.first_line + self.old_text.count("\n")

    @property
    def line_delta(self) -> int:
        return self.new_text.count("\n") - self.old_text.count("\n")


def _render(statement: cst.CSTNode, module: cst.Module, indent: tuple[str, ...]) -> str:
    state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    state.indent_tokens = list(indent)
    statement._codegen(state)
    return "".join(state.tokens)


def spliced(code: str, module: cst.Module, new_module: cst.Module, replaced: Iterable[cst.CSTNode],
            ancestors: dict, contexts: dict, updated: dict) -> Optional[tuple[str, list[Edit]]]:
    """``new_module``'s text and its edits, from ``code`` (``module``'s text) and the edited statements;
    None when a step cannot be shown to give exactly ``new_module.code``. ``ancestors``/``contexts``: each
    replaced node's ancestors and (their render start offsets, indentation) from positions.node_positions;
    ``updated``: each rebuilt node of ``module`` -> its node in ``new_module`` (replaced ones included)."""
    if "\r" in code:  # line counting below is by "\n"; PositionProvider breaks lines at "\r" too
        return None
    chosen: dict[int, tuple[cst.CSTNode, int, tuple[str, ...], tuple]] = {}  # id(statement) -> ...
    for node in replaced:
        path = ancestors.get(node)
        context = contexts.get(node)
        if path is None or context is None:
            return None
        starts, indent = context
        chain = (*path, node)
        # the innermost statement whose parent is the module or an indented block
        index = next((i for i in range(len(chain) - 1, 0, -1)
                      if isinstance(chain[i - 1], _PARENTS) and isinstance(chain[i], cst.BaseStatement)), None)
        if index is None:
            return None
        statement = chain[index]
        start = starts[index]
        chosen[id(statement)] = (statement, start, indent, chain[:index])
    # of two statements one inside the other, the outer one is rendered (it holds the inner one's edit)
    keep = sorted((v for v in chosen.values() if not any(id(a) in chosen for a in v[3])), key=lambda v: v[1])
    edits: list[Edit] = []
    pieces: list[str] = []
    position = 0
    for statement, start, indent, _ in keep:
        new_statement = updated.get(statement)
        if type(new_statement) is not type(statement) or start < position:
            return None  # removed or replaced by something else: its parent renders differently
        old_text = _render(statement, module, indent)
        if code[start:start + len(old_text)] != old_text:
            return None
        new_text = _render(new_statement, new_module, indent)
        edits.append(Edit(start, old_text, new_text, indent, code.count("\n", 0, start) + 1))
        pieces.append(code[position:start])
        pieces.append(new_text)
        position = start + len(old_text)
    pieces.append(code[position:])
    return "".join(pieces), edits


def statements_parse(edits: Sequence[Edit]) -> bool:
    """True when each edited statement's new text parses at its indentation (then the new text parses
    wherever the old one did); False when unsure (the whole text must be checked)."""
    for edit in edits:
        text = edit.new_text
        if "\t" in text or "\f" in text or "\x00" in text:
            return False
        try:
            ast.parse(f"if 1:\n{text}" if edit.indent else text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
    return True


def moved(ranges: dict, wanted: Iterable[cst.CSTNode], edits: Sequence[Edit]) -> tuple[dict, list]:
    """The new ranges of the ``wanted`` nodes whose old range (in ``ranges``) lies outside every edit, and
    the nodes left to locate in the new tree."""
    out: dict[cst.CSTNode, CodeRange] = {}
    missing: list[cst.CSTNode] = []
    for node in wanted:
        old = ranges.get(node)
        if old is None:
            missing.append(node)
            continue
        start, end = (old.start.line, old.start.column), (old.end.line, old.end.column)
        delta = 0
        for edit in edits:
            if start >= (edit.old_end_line, 0):
                delta += edit.line_delta
            elif end > (edit.first_line, 0):
                break  # it overlaps this edit
        else:
            out[node] = old if not delta else CodeRange(CodePosition(old.start.line + delta, old.start.column),
                                                        CodePosition(old.end.line + delta, old.end.column))
            continue
        missing.append(node)
    return out, missing
