"""A rewrite as small text edits: what a code action sends, so the editor keeps the cursor, the undo
history and the lines no fix touched. Positions are 0-based lines and code-point columns, lines counted
as Python counts them (``\\r\\n``, ``\\r``, ``\\n``; a form feed is not a line end)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@dataclass(frozen=True)
class Edit:
    line: int
    column: int
    end_line: int
    end_column: int
    text: str
    first: int  # the old lines the edit replaces: first .. past (exclusive); an insertion has first == past
    past: int


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` with their line ends."""
    return _LINE.findall(text)


def hunks(old: str, new: str) -> list[Edit]:
    """The edits that turn ``old`` into ``new``: a changed block of as many lines as it had becomes one
    edit per line, trimmed to the changed columns (``.cuda()`` -> ``.to("neuron")``); other blocks
    replace whole lines."""
    a, b = split_lines(old), split_lines(new)
    # the lines before the first change and after the last are equal: the matcher sees only the middle
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    middle = difflib.SequenceMatcher(None, a[head:len(a) - tail], b[head:len(b) - tail], autojunk=False)
    edits = []
    for tag, i1, i2, j1, j2 in middle.get_opcodes():
        if tag == "equal":
            continue
        i1, i2, j1, j2 = i1 + head, i2 + head, j1 + head, j2 + head
        if tag == "replace" and i2 - i1 == j2 - j1:
            edits.extend(_in_line(i1 + k, a[i1 + k], b[j1 + k], a) for k in range(i2 - i1))
        else:
            edits.append(_whole_lines(i1, i2, "".join(b[j1:j2]), a))
    return edits


def overlapping(edit: Edit, line: int, end_line: int) -> bool:
    """Whether ``edit`` touches the lines ``line`` .. ``end_line`` (0-based, inclusive)."""
    return edit.first <= end_line and max(edit.past, edit.first + 1) > line


def apply(text: str, edits: list[Edit]) -> str:
    """``edits`` (not overlapping) applied to ``text``, as an editor applies them."""
    lines = split_lines(text)
    starts = [0]
    for piece in lines:
        starts.append(starts[-1] + len(piece))

    def offset(line: int, column: int) -> int:
        return starts[line] + column if line < len(lines) else len(text)

    for edit in sorted(edits, key=lambda e: (e.line, e.column), reverse=True):
        text = text[:offset(edit.line, edit.column)] + edit.text + text[offset(edit.end_line, edit.end_column):]
    return text


def _body(line: str) -> str:
    return line.rstrip("\r\n")


def _in_line(index: int, old: str, new: str, old_lines: list[str]) -> Edit:
    old_body, new_body = _body(old), _body(new)
    if old[len(old_body):] != new[len(new_body):]:  # the line end changed: replace the whole line
        return _whole_lines(index, index + 1, new, old_lines)
    prefix = 0
    while prefix < min(len(old_body), len(new_body)) and old_body[prefix] == new_body[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(old_body), len(new_body)) - prefix and old_body[-1 - suffix] == new_body[-1 - suffix]:
        suffix += 1
    return Edit(index, prefix, index, len(old_body) - suffix, new_body[prefix:len(new_body) - suffix],
                index, index + 1)


def _whole_lines(first: int, past: int, text: str, old_lines: list[str]) -> Edit:
    """Old lines ``first`` .. ``past`` (exclusive) replaced by ``text``: from the start of the first to the
    start of the line after the last, or to the end of a last line that has no line end."""
    if past == len(old_lines) and old_lines and old_lines[-1] == _body(old_lines[-1]):
        last = old_lines[-1]
        return Edit(first, 0, past - 1, len(last), text, first, past)
    return Edit(first, 0, past, 0, text, first, past)
