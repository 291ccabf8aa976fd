"""The base of rules that report a qualified name found in a table (``torch.cuda.<api>``, ``torch.float64``,
``triton.jit`` ...).

A reference is a Name or an Attribute chain; the import tracker resolves it to a qualified name
(``import torch as th`` / ``from torch import cuda`` are followed). The rule sees the *outermost*
reference of a chain once: for ``torch.cuda.FloatTensor`` it is asked about that whole name, never again
about ``torch.cuda`` or ``torch`` inside it.
"""

from __future__ import annotations

from typing import Generic, Iterable, Optional, TypeVar

import libcst as cst

from neuron_port.rules.spec import PythonRule

Key = TypeVar("Key")


def covering_key(qualname: str, keys: Iterable[str]) -> Optional[str]:
    """The longest key that covers ``qualname``: a key covers itself and its dotted children
    (``torch.sparse`` covers ``torch.sparse.mm``); a key ending in ``_`` covers every name it starts
    (``torch.sparse_`` covers ``torch.sparse_coo_tensor``)."""
    best = None
    for key in keys:
        covers = qualname.startswith(key) if key.endswith("_") else (qualname == key or qualname.startswith(key + "."))
        if covers and (best is None or len(key) > len(best)):
            best = key
    return best


class QualifiedNameRule(PythonRule, Generic[Key]):
    """Calls ``on_reference(node, qualname, key)`` for the outermost reference of each Name/Attribute
    chain whose qualified name ``lookup`` maps to a key. Subclasses add nodes to ``not_uses`` for
    references that must not be reported (an assignment target, a test against None)."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self.not_uses: set[cst.CSTNode] = set()

    def lookup(self, qualname: str) -> Optional[Key]:
        """The table key for a qualified name, or None when the table does not cover it."""
        raise NotImplementedError(f"{type(self).__name__} must define lookup()")

    def on_reference(self, node: cst.BaseExpression, qualname: str, key: Key) -> None:
        """Report (or not) one reference the table covers."""
        raise NotImplementedError(f"{type(self).__name__} must define on_reference()")

    def reference_key(self, node: cst.BaseExpression) -> Optional[tuple[str, Key]]:
        """(qualified name, key) when ``node`` is a use that the table covers, else None."""
        qualname = self.context.qualname(node)  # None for most names: asked before the set (a hash each)
        if qualname is None or node in self.not_uses:
            return None
        key = self.lookup(qualname)
        return None if key is None else (qualname, key)

    def _reference(self, node: cst.BaseExpression) -> None:
        found = self.reference_key(node)
        if found is None:
            return
        inner = node
        while isinstance(inner, cst.Attribute):  # the chain's inner names are not asked again
            inner = inner.value
            self.not_uses.add(inner)
        self.on_reference(node, *found)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)
