"""Where a line of the rewritten text stands in the file as it is.

The engine reports what is left at its lines in the rewritten text (the fixed point: what a second run
reports). When the rewrite is not written (``--check``, ``--diff``, ``check --preview``, a file that could
not be written), the file on disk keeps its old lines, and editors, GitHub annotations and SARIF point at
those: so each result of a changed Python file carries this map, and the report moves the left findings
back through it (``FileResult.reported_findings``). Lines are counted as Python and LibCST count them: at
``\\r\\n``, ``\\r`` and ``\\n`` only (a form feed is not a line end)."""

from __future__ import annotations

import difflib
import re
from typing import Union

_LINE_END = re.compile(r"\r\n|\r|\n")
_LINE_END_BYTES = re.compile(rb"\r\n|\r|\n")

# (first new line, past the last new line, first old line, equal): 0-based, one entry per diff block
LineMap = tuple[tuple[int, int, int, bool], ...]


def line_map(old: Union[str, bytes], new: Union[str, bytes]) -> LineMap:
    """The blocks of ``new``'s lines and where each stands in ``old``."""
    split = _LINE_END_BYTES.split if isinstance(old, bytes) else _LINE_END.split
    matcher = difflib.SequenceMatcher(None, split(old), split(new), autojunk=True)
    return tuple((j1, j2, i1, tag == "equal") for tag, i1, _, j1, j2 in matcher.get_opcodes() if j2 > j1)


def old_line(blocks: LineMap, line: int) -> int:
    """The 1-based line of the old text for the new text's 1-based ``line``: the same line where the block is
    unchanged, else the first line of the old text that the changed block replaced."""
    index = line - 1
    for first, past, old_first, equal in blocks:
        if first <= index < past:
            return old_first + (index - first if equal else 0) + 1
    return line
