"""The batched traversal that runs every rule of a pass over one module.

LibCST's own ``visit_batched`` rebuilds (and re-validates) every node even for read-only visitors, which
cost more than the parse itself. ``FastBatchedWalk`` makes the same calls in the same order without the
rebuild. It reads two LibCST internals: the order in which ``_visit_and_replace_children`` visits a node
type's fields (learned once per type) and the node classes of ``libcst._nodes.op`` / ``whitespace``
(leaves it need not enter). Both are private, so the fast walk is used only with the LibCST versions it
was tested with (TESTED_LIBCST; tests/rewrite/test_traversal.py checks the calls are identical) and when
those internals are present; otherwise ``walk_batched`` falls back to LibCST's public
``MetadataWrapper.visit_batched``, which gives the same results more slowly.
"""

from __future__ import annotations

import dataclasses
from typing import Container, Optional, Sequence

import libcst as cst

# (major, minor) of the LibCST releases the fast walk is tested with, inclusive; pyproject.toml pins this
# range too, so only an install that ignores the pin can meet another version (and then falls back).
TESTED_LIBCST = ((1, 1), (1, 9))


def _libcst_version() -> Optional[tuple[int, int]]:
    # LibCST's own version string first: importlib.metadata (and the email package it loads) was ~15 ms of
    # every start that imports the engine
    text = getattr(cst, "LIBCST_VERSION", "unknown")
    if text == "unknown":
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version("libcst")
        except PackageNotFoundError:
            return None
    try:
        parts = text.split(".")
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return None


_METHOD_NAMES: dict[type, tuple[str, ...]] = {}


def _method_names(cls: type) -> tuple[str, ...]:
    """The visit_*/leave_* methods a visitor class really defines (not LibCST's no-op stubs), per class.

    LibCST's own visit_batched finds them with inspect.getmembers on every instance, every pass: with
    ~35 visitors that is ~1,500 getattr calls each, about a third of the whole rule pass. Only the names
    the classes of the MRO define themselves are looked at, those of LibCST's visitor bases once per base
    (their ~700 typed stubs, looked up for every rule class, were 50 ms of a pre-commit hook's start)."""
    names = _METHOD_NAMES.get(cls)
    if names is None:
        candidates: set[str] = set()
        for klass in cls.__mro__:
            candidates.update(_own_method_names(klass) if _is_libcst(klass) else
                              (n for n in vars(klass) if n.startswith(("visit_", "leave_"))))
        names = _METHOD_NAMES[cls] = tuple(
            n for n in sorted(candidates)
            if callable(getattr(cls, n)) and not getattr(getattr(cls, n), "_is_no_op", False))
    return names


def _is_libcst(klass: type) -> bool:
    return klass.__module__ == "libcst" or klass.__module__.startswith("libcst.")


def _own_method_names(klass: type) -> tuple[str, ...]:
    """The visit_*/leave_* names a LibCST class defines that are not its no-op stubs (kept per class)."""
    names = _METHOD_NAMES.get(klass)
    if names is None:
        names = _METHOD_NAMES[klass] = tuple(
            n for n in vars(klass) if n.startswith(("visit_", "leave_"))
            and not getattr(vars(klass)[n], "_is_no_op", False))
    return names


def _leaf_types() -> Optional[frozenset]:
    """Whitespace, comment and operator-token node classes (None if LibCST no longer has those modules)."""
    try:
        import libcst._nodes.op as ops
        import libcst._nodes.whitespace as whitespace
    except ImportError:
        return None
    return frozenset(
        kind for module in (ops, whitespace) for kind in vars(module).values()
        if isinstance(kind, type) and issubclass(kind, cst.CSTNode) and kind.__module__ == module.__name__
    )


_LEAF_TYPES = _leaf_types()
# the same, for helpers that skip what cannot hold an expression (empty when LibCST lacks those modules)
LEAF_TYPES: frozenset = _LEAF_TYPES or frozenset()


def fast_walk_supported() -> bool:
    """True when the installed LibCST is a tested release and has the internals the fast walk reads."""
    installed = _libcst_version()
    return (installed is not None and TESTED_LIBCST[0] <= installed <= TESTED_LIBCST[1]
            and _LEAF_TYPES is not None and hasattr(cst.CSTNode, "_visit_and_replace_children"))


FAST_WALK = fast_walk_supported()


class _FieldRecorder(cst.CSTVisitor):
    """Learns the order in which LibCST visits a node type's fields (without descending)."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.fields.append(attribute)


# type -> (fields a first recording did not visit, {which of those are None: visited fields in order})
_CHILD_FIELDS: dict[type, tuple[tuple[str, ...], dict[tuple[bool, ...], tuple[str, ...]]]] = {}


def _may_be_none(field: dataclasses.Field) -> bool:
    annotation = str(field.type)
    return "Optional" in annotation or "None" in annotation


def _record(node: cst.CSTNode) -> tuple[str, ...]:
    recorder = _FieldRecorder()
    node._visit_and_replace_children(recorder)
    return tuple(recorder.fields)


def child_fields(node: cst.CSTNode) -> tuple[str, ...]:
    """The fields LibCST's visit descends into for this node, in its order. A few node types skip a
    field when it is None (FormattedStringExpression.format_spec), so the order is kept per None-pattern
    of the fields declared as possibly None (whichever node of the type came first; a field declared
    otherwise is never None, so its part of the pattern would never change). Only where FAST_WALK holds
    (it reads LibCST's ``_visit_and_replace_children``)."""
    kind = type(node)
    entry = _CHILD_FIELDS.get(kind)
    if entry is None:
        fields = _record(node)
        others = tuple(f.name for f in dataclasses.fields(kind) if _may_be_none(f))
        entry = _CHILD_FIELDS[kind] = (others, {tuple(getattr(node, n) is None for n in others): fields})
    others, variants = entry
    pattern = tuple([getattr(node, n) is None for n in others]) if others else ()
    fields = variants.get(pattern)
    if fields is None:
        fields = variants[pattern] = _record(node)
    return fields


# what a field's value is, per type: 1 a node, 2 a list or tuple, 0 neither (``isinstance`` on LibCST's
# classes goes through ABCMeta's instance check, a Python call per field of every node)
_VALUE_KINDS: dict[type, int] = {}


def _value_kind(kind: type) -> int:
    found = _VALUE_KINDS[kind] = 1 if issubclass(kind, cst.CSTNode) else 2 if issubclass(kind, (tuple, list)) else 0
    return found


class _EveryType:
    def __contains__(self, name: object) -> bool:
        return True


_EVERY_TYPE = _EveryType()


class FastBatchedWalk(cst.CSTVisitor):
    """libcst's batched traversal (same order, same calls), with the method table built once per class
    and looked up per node type instead of per formatted name. ``walk`` traverses without LibCST's
    ``visit``, which rebuilds (and re-validates) every node even for read-only visitors: that rebuild
    cost more than the parse itself. The field order is LibCST's own, learned once per node type."""

    def __init__(self, visitors: Sequence[cst.BatchableCSTVisitor], *, every_node: bool = False) -> None:
        """``every_node``: enter leaves and call the attribute hooks for every node type (what LibCST's
        own traversal does; the equivalence test compares the two that way)."""
        super().__init__()
        table: dict[str, list] = {}
        for visitor in visitors:
            for name in _method_names(type(visitor)):
                table.setdefault(name, []).append(getattr(visitor, name))
        self._table = table
        self._visit: dict[type, tuple] = {}
        self._leave: dict[type, tuple] = {}
        # node type names have no underscore: visit_<Type>_<attribute> methods are those with two
        self._attribute_types: Container[str] = (
            _EVERY_TYPE if every_node else {name.split("_")[1] for name in table if name.count("_") > 1})
        # whitespace, comments and operator tokens (about half of all nodes) contain nothing but more of
        # the same: the walk does not enter them unless some visitor has a method for such a type
        wanted = {name.split("_")[1] for name in table}
        self._skip = set() if every_node else {kind for kind in _LEAF_TYPES or () if kind.__name__ not in wanted}

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        methods = self._visit.get(kind)
        if methods is None:
            methods = self._visit[kind] = tuple(self._table.get(f"visit_{kind.__name__}", ()))
        for method in methods:
            method(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        kind = type(original_node)
        methods = self._leave.get(kind)
        if methods is None:
            methods = self._leave[kind] = tuple(self._table.get(f"leave_{kind.__name__}", ()))
        for method in methods:
            method(original_node)

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if type(node).__name__ in self._attribute_types:
            for method in self._table.get(f"visit_{type(node).__name__}_{attribute}", ()):
                method(node)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        if type(original_node).__name__ in self._attribute_types:
            for method in self._table.get(f"leave_{type(original_node).__name__}_{attribute}", ()):
                method(original_node)

    def _calls(self, kind: type) -> tuple[tuple, tuple, bool]:
        """What ``walk`` calls for a node of this type: on_visit's methods, on_leave's, and whether the
        attribute hooks run (the same tables those methods keep). A subclass's own on_visit / on_leave
        (tests/rewrite/test_traversal.py records every call so) is called instead."""
        if type(self).on_visit is not FastBatchedWalk.on_visit or type(self).on_leave is not FastBatchedWalk.on_leave:
            return (self.on_visit,), (self.on_leave,), kind.__name__ in self._attribute_types
        visits = self._visit.get(kind)
        if visits is None:
            visits = self._visit[kind] = tuple(self._table.get(f"visit_{kind.__name__}", ()))
        leaves = self._leave.get(kind)
        if leaves is None:
            leaves = self._leave[kind] = tuple(self._table.get(f"leave_{kind.__name__}", ()))
        return visits, leaves, kind.__name__ in self._attribute_types

    def walk(self, node: cst.CSTNode) -> None:
        # on_visit and on_leave inlined (a call less per node), with each type's methods looked up once
        calls: dict[type, tuple[tuple, tuple, bool]] = {}
        calls_for, fields_of, recorded = self._calls, child_fields, _CHILD_FIELDS
        skip, kinds = self._skip, _VALUE_KINDS

        def walk(node: cst.CSTNode) -> None:
            kind = type(node)
            found = calls.get(kind)
            if found is None:
                found = calls[kind] = calls_for(kind)
            visits, leaves, with_attributes = found
            for method in visits:
                method(node)
            entry = recorded.get(kind)  # child_fields' table, read here for the common case
            fields = None
            if entry is not None:
                others, variants = entry
                fields = variants.get(tuple([getattr(node, n) is None for n in others]) if others else ())
            if fields is None:
                fields = fields_of(node)
            for name in fields:
                if with_attributes:
                    self.on_visit_attribute(node, name)
                value = getattr(node, name)
                held = kinds.get(type(value))
                if held is None:
                    held = _value_kind(type(value))
                if held == 1:
                    if type(value) not in skip:
                        walk(value)
                elif held == 2:
                    for child in value:
                        if type(child) not in skip:
                            walk(child)
                if with_attributes:
                    self.on_leave_attribute(node, name)
            for method in leaves:
                method(node)

        try:
            walk(node)
        finally:
            # the nested function refers to itself through its closure: a reference cycle that would keep
            # this walker, every visitor, their file context and the tree until the next cycle collection
            del walk


def walk_batched(wrapper: cst.MetadataWrapper, visitors: Sequence[cst.BatchableCSTVisitor]) -> None:
    """Run ``visitors`` over ``wrapper.module`` in one pass, calling each visitor's methods in LibCST's order."""
    if FAST_WALK and not any(v.get_inherited_dependencies() for v in visitors):
        FastBatchedWalk(visitors).walk(wrapper.module)
    else:  # a visitor that needs metadata (LibCST resolves it), or a LibCST the fast walk does not know
        wrapper.visit_batched(visitors)


def ancestors_of(module: cst.Module, targets: Container[cst.CSTNode]) -> Optional[set[cst.CSTNode]]:
    """Every node on the path from ``module`` down to one of ``targets`` (a target itself only when it
    contains another), found in LibCST's field order and stopping once all targets are found; None when
    the fast walk is not supported (the caller then rebuilds the whole tree, as LibCST would)."""
    if not FAST_WALK:
        return None
    remaining = set(targets)
    found: set[cst.CSTNode] = set()
    path: list[cst.CSTNode] = []

    def walk(node: cst.CSTNode) -> bool:
        """False once every target has been found (nothing left to look for)."""
        if node in remaining:
            remaining.discard(node)
            found.update(path)
        if not remaining:
            return False
        path.append(node)
        for name in child_fields(node):
            value = getattr(node, name)
            kind = _VALUE_KINDS.get(type(value))
            if kind is None:
                kind = _value_kind(type(value))
            children = (value,) if kind == 1 else value if kind == 2 else ()
            for child in children:
                if not walk(child):
                    return False
        path.pop()
        return True

    try:
        walk(module)
    finally:
        del walk  # its closure refers to itself (and to the targets): break the cycle now
    return found
