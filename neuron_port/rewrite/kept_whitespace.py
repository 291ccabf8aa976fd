"""Whitespace that LibCST's round trip drops, kept apart and put back, so the bytes of a line no fix touched
never change (issue 33): the whitespace-only lines that end a text (split_tail), and form feeds in a
statement line's indentation (keep_indentation).

LibCST drops blank and comment lines from the end of a module when some of them are indented:
``"x = 1\n\n \n"`` renders as ``"x = 1\n \n"``, ``"if t:\n    u = 1\n\n  # c\n\n # d\n"`` loses the comment
``# c``. The engine parses the text with those lines' leading whitespace taken off (the same lines, so the
same line numbers and comments: column-0 blank and comment lines round-trip) and puts the original
lines back in place of them in its output. It also drops a lone CR ending a text (``"x\r\r"`` renders as
``"x\r"``): the parse is given the text without its last CRs.

LibCST renders a statement line's indentation from its block (``IndentedBlock.indent``), not from the
text: where Python's tokenizer accepts a form feed there (``\\f`` resets the column: ``"\\fx = 1"`` at the top
level, ``"\\f    y = 2"`` or ``"    \\fy = 2"`` in a block, as GNU-style page breaks put them), the round trip
drops it with whatever precedes it. The other whitespace, of blank lines, comments, line ends and
continuation lines, the tree keeps.

So, for a text that may have such a line, one render of the parsed tree is compared with the text line by
line: a line that differs only before its first token is attributed to the node whose render begins that
line (the statement, clause or decorator that emits the block's indentation there), and its original
prefix is kept by that node. The engine's transformers carry it to the node that replaces it in the next
tree (same type only) and the engine renders through ``render``, which emits the kept prefix instead of
the block's indentation, only while that indentation is still what it was (a fix that moves a statement
into another block gets the block's own indentation). Nodes are keyed by ``id`` with the node itself
held, so an id is never reused while its entry lives.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst
from libcst._nodes.internal import CodegenState

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # Python's line ends only (not str.splitlines')
# a form feed in a line's leading whitespace before something other than a line end: the only prefix
# the round trip may drop (a cheap test: most texts have no form feed at all)
_MAY_DROP = re.compile(r"(?:^|[\r\n])[ \t\f]*\f[ \t\f]*[^ \t\f\r\n]")
_WHITESPACE = re.compile(r"[ \t\f]*")


def _is_blank_or_comment(line: str) -> bool:
    stripped = line.lstrip(" \t\f")
    return not stripped.strip("\r\n") or stripped.startswith("#")


def _split_tail(source: str) -> tuple[str, str, str]:
    lines = _LINE.findall(source)
    first = len(lines)
    while first > 0 and _is_blank_or_comment(lines[first - 1]):
        first -= 1
    if first == 0 or first == len(lines) or lines[first - 1].rstrip("\r\n").endswith("\\"):
        return source, "", ""
    tail_lines = lines[first:]
    if not any(line[:1] in (" ", "\t", "\f") for line in tail_lines):
        return source, "", ""
    last = lines[first - 1]
    body_end = sum(map(len, lines[:first])) - (len(last) - len(last.rstrip("\r\n")))
    normal = last[len(last.rstrip("\r\n")):] + "".join(line.lstrip(" \t\f") for line in tail_lines)
    return source[:body_end] + normal, source[body_end:], normal


def split_tail(source: str) -> tuple[str, str, str]:
    """(the text to parse, the original tail, its form in that text). The tail is what follows the line
    end of the last line that holds code: blank and comment lines, which the parse is given without
    their leading whitespace, and the lone CRs ending the text (LibCST drops them), which it is not given."""
    text, tail, normal = _split_tail(source)
    crs = len(text) - len(text.rstrip("\r"))  # "x\r\r" renders as "x\r", and that as "x"
    if crs:
        return text[:-crs], tail or source[-crs:], normal[:len(normal) - crs]
    return text, tail, normal


def restore_tail(code: str, tail: str, normal: str) -> str:
    """``code`` with the tail split_tail took apart put back."""
    if tail and code.endswith(normal):
        return code[:len(code) - len(normal)] + tail
    return code


def _line_breaks(token: str) -> int:
    return token.count("\n") + token.count("\r") - token.count("\r\n")


class _Recorder(CodegenState):
    """A plain render that notes, for each line, the node that emitted the indentation at its start."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.open: list[cst.CSTNode] = []  # the nodes being rendered, outermost first
        self.line = 0  # line breaks in tokens[:counted]
        self.counted = 0
        self.starts: dict[int, tuple[cst.CSTNode, str]] = {}  # line -> (node, the indentation it emitted)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.open.append(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        self.open.pop()

    def add_indent_tokens(self) -> None:
        tokens = self.tokens
        for index in range(self.counted, len(tokens)):
            self.line += _line_breaks(tokens[index])
        self.counted = len(tokens)
        last = next((token for token in reversed(tokens) if token), "\n")
        if last[-1] in "\r\n" and self.line not in self.starts:
            self.starts[self.line] = (self.open[-1], "".join(self.indent_tokens))
        super().add_indent_tokens()


class KeptIndentation:
    """The original leading whitespace of the lines whose tree node cannot hold it."""

    def __init__(self, entries: dict[int, tuple[cst.CSTNode, str, str]]) -> None:
        self.entries = entries  # id(node) -> (node, original prefix, the indentation LibCST renders there)

    def carry(self, original: cst.CSTNode, updated: object) -> None:
        """Called by a transformer's on_leave: ``updated`` replaces ``original`` in the new tree."""
        entry = self.entries.get(id(original))
        if entry is not None and entry[0] is original and updated is not original and type(updated) is type(original):
            self.entries[id(updated)] = (updated, entry[1], entry[2])  # type: ignore[assignment]

    def render(self, module: cst.Module) -> str:
        """``module.code`` with each kept prefix in place of its line's indentation; entries of nodes that
        are no longer in the tree are dropped."""
        state = _Restorer(module, self.entries)
        module._codegen(state)
        self.entries = state.used
        return "".join(state.tokens)


class _Restorer(CodegenState):
    def __init__(self, module: cst.Module, entries: dict[int, tuple[cst.CSTNode, str, str]]) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.entries = entries
        self.used: dict[int, tuple[cst.CSTNode, str, str]] = {}
        self.open: list[cst.CSTNode] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.open.append(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        self.open.pop()

    def add_indent_tokens(self) -> None:
        node = self.open[-1]
        key = id(node)
        entry = self.entries.get(key)
        if (entry is not None and entry[0] is node and key not in self.used
                and "".join(self.indent_tokens) == entry[2]):
            self.used[key] = entry
            self.tokens.append(entry[1])
            return
        super().add_indent_tokens()


def keep_indentation(module: cst.Module, source: str) -> Optional[KeptIndentation]:
    """What ``module`` (parsed from ``source``) renders differently from ``source`` before a line's first
    token, kept by the node that renders it; None when the render drops nothing there."""
    if "\f" not in source or not _MAY_DROP.search(source):
        return None
    recorder = _Recorder(module)
    module._codegen(recorder)
    rendered = _LINE.findall("".join(recorder.tokens))
    original = _LINE.findall(source)
    if len(rendered) != len(original):
        return None
    entries: dict[int, tuple[cst.CSTNode, str, str]] = {}
    for index, (was, now) in enumerate(zip(original, rendered)):
        if was == now or index not in recorder.starts:
            continue
        node, indent = recorder.starts[index]
        rest = now[len(indent):]
        prefix = was[:len(was) - len(rest)]
        if rest and now.startswith(indent) and was.endswith(rest) and _WHITESPACE.fullmatch(prefix):
            entries[id(node)] = (node, prefix, indent)
    return KeptIndentation(entries) if entries else None


def carrying(transformer_class: type, kept: KeptIndentation) -> type:
    """A subclass of ``transformer_class`` whose on_leave hands kept prefixes to the new nodes."""

    class Carrying(transformer_class):  # type: ignore[misc, valid-type]
        def on_leave(self, original_node, updated_node):  # type: ignore[no-untyped-def]
            result = super().on_leave(original_node, updated_node)
            kept.carry(original_node, result)
            return result

    return Carrying
