"""Per-file state shared by the rules of one batched pass: target, import aliases, collected violations.

Name resolution is deliberately cheap: an import tracker (the first visitor of the batch) records what
each imported name stands for, in traversal order, so ``import torch as th``, ``from torch import cuda``
and ``from torch.cuda import amp`` resolve without LibCST's full scope analysis (which costs 5-10x a
parse: timed over the pytorch/examples tree, ``QualifiedNameProvider`` alone took 5-8x a
``libcst.parse_module``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.names import dotted_name
from neuron_port.rules.vocabulary import Effort, FixSafety, Import, Severity

# exact types: LibCST's concrete node classes have no subclasses (tests/rewrite/test_traversal.py)
_NAME, _ATTRIBUTE = cst.Name, cst.Attribute


@dataclass
class Violation:
    """What a Python rule hands the engine for one node. Never seen outside the engine."""

    rule: type  # the PythonRule class that reported it
    node: cst.CSTNode
    message: str
    replacement: Optional[cst.CSTNode] = None
    safety: Optional[FixSafety] = None  # None when there is no replacement
    effort: Optional[Effort] = None
    imports: tuple[Import, ...] = ()
    severity: Optional[Severity] = None
    related: tuple = ()  # (rule code, node) of each report folded into this one (a kept scope's finding)


class FileContext:
    """What the rules of one file share. Created by the engine per file and pass."""

    def __init__(self, target: str = "neuron", path: str = "<string>", code: Optional[str] = None) -> None:
        self.target = target
        self.path = path
        # the text the module renders to, when the engine has it (rendering a long module again costs as
        # much as a rule pass); None otherwise: ask the module (``module.code``)
        self.code = code
        self.violations: list[Violation] = []
        # local name -> fully qualified name it is bound to by an import
        self.aliases: dict[str, str] = {}
        # names bound to the torch module itself (import torch / import torch as th)
        self.torch_names: set[str] = set()
        # Name/Attribute nodes that are not uses of a binding (import statements, attribute names,
        # keywords, definitions): qualname() is None for them
        self.non_references: set[cst.CSTNode] = set()
        # answers several rules of the pass compute about the same node at the same point of the walk
        # (each under its own key): computed by the first rule that asks, reused by the others
        self.shared: dict[str, dict] = {}

    def is_reference(self, node: cst.CSTNode) -> bool:
        """False for names that are part of an import, an attribute name, a keyword or a definition."""
        return node not in self.non_references

    # -- name resolution -------------------------------------------------------------------------
    def qualname(self, node: cst.CSTNode) -> Optional[str]:
        """The fully qualified name an expression refers to, following imports; None if unknown."""
        # only a Name/Attribute chain has one (a Call among them: none); its head is found before the
        # dotted name is built, since most heads are not imported (every rule asks about every name)
        kind = type(node)
        if kind is _NAME:
            head = node.value  # type: ignore[attr-defined]
        elif kind is _ATTRIBUTE:
            inner = node.value  # type: ignore[attr-defined]
            while type(inner) is _ATTRIBUTE:
                inner = inner.value
            if type(inner) is not _NAME:
                return None
            head = inner.value
        else:
            return None
        if head in self.aliases:
            base = self.aliases[head]
        elif head == "torch":  # e.g. a notebook cell whose import lives in an earlier cell
            base = "torch"
        else:
            return None
        # asked last: most names are not imported, and a node's hash is a Python call (LibCST's __hash__)
        if node in self.non_references:
            return None
        if kind is _NAME:
            return base
        rest = dotted_name(node).partition(".")[2]  # type: ignore[union-attr]
        return f"{base}.{rest}" if rest else base

    def torch_module_name(self) -> tuple[str, tuple[tuple[str, Optional[str], Optional[str]], ...]]:
        """How to spell the torch module here, and the import needed if it is not imported yet."""
        if "torch" in self.torch_names:
            return "torch", ()
        if self.torch_names:
            return sorted(self.torch_names)[0], ()
        return "torch", (("torch", None, None),)

    def bind_import(self, local: str, qualified: str) -> None:
        self.aliases[local] = qualified
        if qualified == "torch":
            self.torch_names.add(local)
        elif local in self.torch_names:
            self.torch_names.discard(local)


class ImportTracker(cst.BatchableCSTVisitor):
    """Records import aliases into the FileContext; always the first visitor of a batch."""

    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        self._mark(node.name)
        if node.asname is not None:
            self._mark(node.asname.name)

    def visit_ImportFrom_module(self, node: cst.ImportFrom) -> None:
        if node.module is not None:
            self._mark(node.module)

    # Names that are not references to a binding: attribute names, keywords, definitions, parameters.
    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.context.non_references.add(node.attr)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.context.non_references.add(node.keyword)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.context.non_references.add(node.name)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.context.non_references.add(node.name)

    def visit_Param(self, node: cst.Param) -> None:
        self.context.non_references.add(node.name)

    def _mark(self, node: cst.CSTNode) -> None:
        while isinstance(node, cst.Attribute):
            self.context.non_references.add(node)
            self.context.non_references.add(node.attr)
            node = node.value
        self.context.non_references.add(node)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.context.bind_import(alias.asname.name.value, full)
            else:
                head = full.split(".")[0]
                self.context.bind_import(head, head)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module)
        if module is None:
            return
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            local = alias.name.value
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.context.bind_import(local, f"{module}.{alias.name.value}")
