"""Where a line of the rewritten text stands in the file as it is.

The engine reports what is left at its lines in the rewritten text (the fixed point: what a second run
reports). When the rewrite is not written (``--check``, ``--diff``, ``check --preview``, a file that could
not be written), the file on disk keeps its old lines, and editors, GitHub annotations and SARIF point at
those: so each result of a changed Python file carries this map, and the report moves the left findings
back through it (``FileResult.reported_findings``). Lines are counted as Python and LibCST count them: at
``\\r\\n``, ``\\r`` and ``\\n`` only (a form feed is not a line end)."""

from __future__ import annotations

import re
from typing import Optional, Union

_LINE_END = re.compile(r"\r\n|\r|\n")
_LINE_END_BYTES = re.compile(rb"\r\n|\r|\n")

# (first new line, past the last new line, first old line, equal): 0-based, one entry per diff block
LineMap = tuple[tuple[int, int, int, bool], ...]


# How far past a changed line the two texts are searched for the next pair of equal lines. A rewrite's
# edits are local (a line replaced, imports added or removed), so they resync within a few lines; a longer
# change ends in one changed block, whose lines all map to its first old line.
RESYNC_WINDOW = 64


def line_map(old: Union[str, bytes], new: Union[str, bytes]) -> LineMap:
    """The blocks of ``new``'s lines and where each stands in ``old``. Linear in the lines for local edits
    (difflib's matcher took 85 s on a 68,000-line file with 17,000 edits)."""
    split = _LINE_END_BYTES.split if isinstance(old, bytes) else _LINE_END.split
    a, b = split(old), split(new)
    n, m = len(a), len(b)
    blocks: list[tuple[int, int, int, bool]] = []
    i = j = 0
    while j < m:
        if i < n and a[i] == b[j]:
            j0, i0 = j, i
            while i < n and j < m and a[i] == b[j]:
                i += 1
                j += 1
            blocks.append((j0, j, i0, True))
            continue
        step = _resync(a, b, i, j)
        if step is None:  # no equal pair near: the rest of the new text is one changed block
            blocks.append((j, m, min(i, max(n - 1, 0)), False))
            break
        skip_old, skip_new = step
        if skip_new:
            blocks.append((j, j + skip_new, min(i, max(n - 1, 0)), False))
        i += skip_old
        j += skip_new
    return tuple(blocks)


def _resync(a: list, b: list, i: int, j: int) -> Optional[tuple[int, int]]:
    """The nearest (lines of old, lines of new) to skip to a pair of equal lines (a blank pair counts only
    when the next pair agrees too: a lone blank line is no anchor)."""
    n, m = len(a), len(b)
    for distance in range(1, 2 * RESYNC_WINDOW + 1):
        for skip_old in range(max(0, distance - RESYNC_WINDOW), min(distance, RESYNC_WINDOW) + 1):
            x, y = i + skip_old, j + distance - skip_old
            if x < n and y < m and a[x] == b[y] and (a[x].strip() or x + 1 >= n or y + 1 >= m
                                                     or a[x + 1] == b[y + 1]):
                return skip_old, distance - skip_old
    return None


def old_line(blocks: LineMap, line: int) -> int:
    """The 1-based line of the old text for the new text's 1-based ``line``: the same line where the block is
    unchanged, else the first line of the old text that the changed block replaced."""
    index = line - 1
    for first, past, old_first, equal in blocks:
        if first <= index < past:
            return old_first + (index - first if equal else 0) + 1
    return line
