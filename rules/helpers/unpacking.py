"""Assignments that unpack: which name gets which item (``a, b = x.is_cuda, 1``), for the analyses that
follow a value through the names it is assigned to (escaping_tests.py, decision_groups.py)."""

from __future__ import annotations

from typing import Iterator

import libcst as cst


SEQUENCES = (cst.Tuple, cst.List)


def unpacked(target: cst.BaseExpression, value: cst.BaseExpression) -> Iterator[tuple]:
    """(target, value) pairs of one assignment: a tuple or list target unpacks a tuple or list value item by
    item (``_, heads, is_cuda, device = *q.shape, q.is_cuda, q.device``: the items after the last starred
    value are matched from the right, those before the first from the left); an item that lands in a starred
    target or beside a starred value has no name of its own (None: the file loses sight of it)."""
    if type(target) not in SEQUENCES or type(value) not in SEQUENCES:
        yield target, value
        return
    names, items = target.elements, value.elements
    star = next((k for k, e in enumerate(names) if isinstance(e, cst.StarredElement)), None)
    stars = [k for k, e in enumerate(items) if isinstance(e, cst.StarredElement)]
    for i, item in enumerate(items):
        k = None
        if not isinstance(item, cst.StarredElement):
            if (not stars or i < stars[0]) and (star is None or i < star) and i < len(names):
                k = i
            elif not stars or i > stars[-1]:
                k = len(names) - (len(items) - i)
                k = k if k >= 0 and (star is None or k > star) else None
        if k is None or isinstance(names[k], cst.StarredElement):
            yield None, item.value
        else:
            yield from unpacked(names[k].value, item.value)
