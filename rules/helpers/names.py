"""Names and small literal tests on CST nodes: dotted names, the last segment of a name, the source
text of a node, True / False / None / integer literals, names bound by a loop target."""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Iterator, Optional

import libcst as cst

_EMPTY_MODULE = cst.Module(body=[])


# LibCST's concrete node classes have no subclasses (tests/rewrite/test_traversal.py checks the ones used
# here), so ``type(node) is cst.Name`` is ``isinstance(node, cst.Name)``, without ABCMeta's instance check:
# these helpers run for most nodes of every file, and that check was a fifth of the rules' time.
_NAME, _ATTRIBUTE = cst.Name, cst.Attribute


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    """``a.b.c`` for Name/Attribute chains, else None."""
    parts: list[str] = []
    while type(node) is _ATTRIBUTE:
        parts.append(node.attr.value)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is not _NAME:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def last_segment(node: cst.CSTNode) -> Optional[str]:
    """``c`` for ``a.b.c`` and for ``c``; None for anything else."""
    kind = type(node)
    if kind is _NAME:
        return node.value  # type: ignore[attr-defined]
    if kind is _ATTRIBUTE:
        return node.attr.value  # type: ignore[attr-defined]
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


# what a field's value is, per type: 1 a node, 2 a list or tuple (of nodes, or of anything), 0 neither
_KIND: dict[type, int] = {}


def value_kind(kind: type) -> int:
    """1 for a node class, 2 for a list or tuple class, 0 for anything else (as ``isinstance`` says)."""
    found = _KIND.get(kind)
    if found is None:
        found = _KIND[kind] = 1 if issubclass(kind, cst.CSTNode) else 2 if issubclass(kind, (list, tuple)) else 0
    return found
_LIBCST_CLASS = re.compile(r"libcst\.[\w.]+")


def _holds_only_whitespace(field: dataclasses.Field) -> bool:
    """The field's declared type is whitespace, comments or blank lines (or MaybeSentinel) only."""
    classes = _LIBCST_CLASS.findall(str(field.type))
    return bool(classes) and all(name.startswith("libcst._nodes.whitespace.")
                                 or name == "libcst._maybe_sentinel.MaybeSentinel" for name in classes)


def _code_fields(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(kind) if not _holds_only_whitespace(f))


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node`` (itself first) except whitespace, comments and blank lines, parents before
    children, in dataclass field order (source order except where LibCST declares a field late, e.g.
    decorators). Reads the fields directly and skips the whitespace fields (about half of all nodes):
    several times faster than ``CSTNode.children``, which the per-file analyses of whole modules (rank
    devices, capability checks, CUDA-only guards) would otherwise pay on every large file."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(code_children(current))


def code_children(current: cst.CSTNode) -> list[cst.CSTNode]:
    """The children ``walk`` enters from ``current`` (no whitespace, comments or blank lines), last first
    (the order a stack pops them in document order)."""
    children: list[cst.CSTNode] = []
    push_code_children(current, children.append)
    return children


def push_code_children(current: cst.CSTNode, push: Callable[[cst.CSTNode], object]) -> int:
    """``push`` each child ``walk`` enters from ``current``, last first (a stack then pops them in document
    order); how many. For walks that keep their own stack (walk_all, scopes.py)."""
    names = _FIELDS_LAST_FIRST.get(type(current))
    if names is None:
        names = fields_last_first(type(current))
    kinds = _KIND
    pushed = 0
    for name in names:
        value = getattr(current, name)
        kind = kinds.get(type(value))
        if kind is None:
            kind = value_kind(type(value))
        if kind == 1:
            push(value)
            pushed += 1
        elif kind == 2:
            for item in reversed(value):
                kind = kinds.get(type(item))
                if (kind if kind is not None else value_kind(type(item))) == 1:
                    push(item)
                    pushed += 1
    return pushed


def walk_all(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``list(walk(node))``, built without a generator and without a list of children per node: each
    node's code children are pushed last first, so the stack pops them in the order ``walk`` yields them
    (the per-file analyses take the walk of a whole module once per pass)."""
    out: list[cst.CSTNode] = []
    stack = [node]
    pop, push, append = stack.pop, stack.append, out.append
    while stack:
        current = pop()
        append(current)
        push_code_children(current, push)
    return out


_FIELDS_LAST_FIRST: dict[type, tuple[str, ...]] = {}
def fields_last_first(kind: type) -> tuple[str, ...]:
    """The code fields of a node class, last first (kept in FIELDS_LAST_FIRST)."""
    names = _FIELDS_LAST_FIRST.get(kind)
    if names is None:
        names = _FIELDS_LAST_FIRST[kind] = tuple(reversed(_code_fields(kind)))
    return names
