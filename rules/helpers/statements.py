"""Removing a small statement from its line without losing the rest of the line or a comment."""

from __future__ import annotations

from typing import Union

import libcst as cst

Removal = Union[cst.SimpleStatementLine, cst.SimpleStatementSuite, cst.RemovalSentinel]


def statement_without(owner: Union[cst.SimpleStatementLine, cst.SimpleStatementSuite],
             small: cst.BaseSmallStatement) -> Removal:
    """``owner`` with one small statement removed; the whole line goes when it was the only one."""
    body = [s for s in owner.body if s is not small]
    if not body:
        if isinstance(owner, cst.SimpleStatementLine):
            return cst.RemovalSentinel.REMOVE
        return owner.with_changes(body=[cst.Pass()])
    if owner.body[-1] is small:  # `a = 1; flag = x` -> `a = 1` (no dangling semicolon)
        body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
    return owner.with_changes(body=body)


def has_comment_above(line: cst.SimpleStatementLine) -> bool:
    """A comment line directly above the statement (removing the statement would lose it)."""
    return any(empty.comment is not None for empty in line.leading_lines)
