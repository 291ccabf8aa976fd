"""NP717's scope: the kernel code of a module that imports a GPU kernel library at top level, decided by
dependence, not by names.

Kernel code is

- a function that uses the library (``@triton.jit`` / ``@triton.autotune`` kernels, ``@cuda.jit``, a helper
  calling ``triton.cdiv`` or ``cp.asarray``): it cannot run where the library does not exist;
- a launcher: a function that launches or calls a kernel of the file (``kernel[grid](...)``, ``kernel(...)``);
- a top-level statement that uses the library (``CONFIGS = [triton.Config(...) ...]``) and the imports of it;
- what only kernel code needs: a function, class or assignment of the module read by kernel code and by nothing
  else (``prune_configs`` named only in an ``@triton.autotune`` decorator);
- a class whose methods are all kernel code (an ``autograd.Function`` that only wraps a kernel or a CUDA
  extension).

The callers of a launcher are not kernel code: they are the module's portable code (a model's ``forward`` that
calls ``add(x, y)``), ported and reported as usual; where they test for CUDA before the call, NP720 keeps that
test (``cuda_only_guards.py`` follows the call).
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

import libcst as cst

from neuron_port.rules.helpers.names import walk
from neuron_port.rules.helpers.scopes import Scopes
from neuron_port.rules.no_port.common import covers
from neuron_port.rules.no_port.tables import KERNEL_LIBRARIES


class KernelCode:
    """The kernel code of ``module`` (``nodes``: top-level statements, functions and methods, in source order;
    ``names``: the functions and classes among them, for the message)."""

    def __init__(self, context, module: cst.Module, uses: Optional[Callable[[cst.Name], bool]] = None) -> None:
        """``uses``: whether a module-level name read is the library (default: a kernel library's name)."""
        self.context = context
        self._is_library = uses or (lambda name: covers(self.context.qualname(name) or "", KERNEL_LIBRARIES))
        self.module = module
        self._scopes = Scopes(module)
        units = list(_units(module))  # (node, its class or None)
        self._uses_library = {node: any(self._uses(p) for p in _own_parts(node)) for node, _ in units}
        decorated = {node for node, _ in units if isinstance(node, cst.FunctionDef) and any(
            self._uses(d) for d in node.decorators)}
        self._module_reads = {node: set().union(*(self._reads(p) for p in _own_parts(node))) for node, _ in units}
        kernels = {n.name.value for n in decorated}
        code: set[cst.CSTNode] = set()
        for node, _klass in units:
            if self._uses_library[node] or (isinstance(node, cst.FunctionDef) and self._module_reads[node] & kernels):
                code.add(node)
        # what only kernel code needs, to a fixed point
        bound = _module_bindings(module)
        readers: dict[str, set[cst.CSTNode]] = {}
        for node, _klass in units:
            for name in self._module_reads[node]:
                readers.setdefault(name, set()).add(node)
        changed = True
        while changed:
            changed = False
            for name, definitions in bound.items():
                if all(d in code for d in definitions):
                    continue
                outside = {r for r in readers.get(name, ()) if r not in definitions}
                if outside and all(r in code or self._inside_code(r, code) for r in outside):
                    code.update(definitions)
                    changed = True
        # a class whose methods are all kernel code is kernel code as a whole
        methods: dict[cst.ClassDef, list[cst.FunctionDef]] = {}
        for node, klass in units:
            if klass is not None and isinstance(node, cst.FunctionDef):
                methods.setdefault(klass, []).append(node)
        for klass, defs in methods.items():
            if klass not in code and all(d in code for d in defs):
                code.add(klass)
        top = set(module.body)
        self.nodes: list[cst.CSTNode] = [n for n, klass in units if n in code and (
            n in top or (klass is not None and klass not in code))]
        self.names = [n.name.value for n in self.nodes if isinstance(n, (cst.FunctionDef, cst.ClassDef))]
        self.whole_module = all(s in code or _is_import(s) or _is_docstring(s) for s in module.body)

    def _inside_code(self, node: cst.CSTNode, code: set) -> bool:
        return isinstance(node, cst.FunctionDef) and any(node in _method_set(c) for c in code
                                                         if isinstance(c, cst.ClassDef))

    def _uses(self, root: cst.CSTNode) -> bool:
        for node in walk(root):
            if type(node) is cst.Name and self.context.is_reference(node):
                if self._is_library(node) and self._scopes.binder(node) is self.module:
                    return True
        return False

    def _reads(self, root: cst.CSTNode) -> set[str]:
        """Module-level names read in ``root`` (a name bound in a function of ``root`` is that function's)."""
        out: set[str] = set()
        for node in walk(root):
            if type(node) is cst.Name and self.context.is_reference(node) and self._scopes.binder(node) is self.module:
                out.add(node.value)
        return out


def _method_set(klass: cst.ClassDef) -> set[cst.CSTNode]:
    return {s for s in klass.body.body if isinstance(s, cst.FunctionDef)}


def _own_parts(node: cst.CSTNode) -> list[cst.CSTNode]:
    """What a unit holds of its own: a class without its methods (they are units of their own)."""
    if not isinstance(node, cst.ClassDef):
        return [node]
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    return [*node.decorators, *node.bases, *node.keywords, *(s for s in body if not isinstance(s, cst.FunctionDef))]


def _units(module: cst.Module) -> Iterable[tuple[cst.CSTNode, Optional[cst.ClassDef]]]:
    """The top-level statements, and the methods of the top-level classes (with their class), in order."""
    for statement in module.body:
        yield statement, None
        if isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
            for inner in statement.body.body:
                if isinstance(inner, cst.FunctionDef):
                    yield inner, statement


def _module_bindings(module: cst.Module) -> dict[str, list[cst.CSTNode]]:
    """Top-level functions, classes and single-name assignments: name -> the statements that bind it."""
    out: dict[str, list[cst.CSTNode]] = {}
    for statement in module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            out.setdefault(statement.name.value, []).append(statement)
        elif isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
            small = statement.body[0]
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
                [small.target] if isinstance(small, cst.AnnAssign) and small.value is not None else [])
            for target in targets:
                if isinstance(target, cst.Name):
                    out.setdefault(target.value, []).append(statement)
    return out


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body)


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))
