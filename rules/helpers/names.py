"""Names and small literal tests on CST nodes: dotted names, the last segment of a name, the source
text of a node, True / False / None / integer literals, names bound by a loop target."""

from __future__ import annotations

from typing import Optional

import libcst as cst

_EMPTY_MODULE = cst.Module(body=[])


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    """``a.b.c`` for Name/Attribute chains, else None."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def last_segment(node: cst.CSTNode) -> Optional[str]:
    """``c`` for ``a.b.c`` and for ``c``; None for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def source_of(node: cst.CSTNode) -> str:
    """The code a node stands for, as written."""
    return _EMPTY_MODULE.code_for_node(node)


def is_true(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def is_false(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def is_none(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def int_value(node: cst.CSTNode) -> Optional[int]:
    """The value of an integer literal (``3``, ``-1``), else None."""
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(
        node.expression, cst.Integer
    ):
        return -int(node.expression.value)
    return None


def loop_target_names(target: cst.BaseExpression) -> set[str]:
    """The plain names a ``for`` target binds (``i``, ``(i, gpu)``)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for element in target.elements:
            out |= loop_target_names(element.value)
        return out
    return set()


def walk(node: cst.CSTNode):
    """Every node under ``node`` (itself first), without a visitor."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)
