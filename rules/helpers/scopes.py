"""Which binding a name read refers to: Python's scopes (module, function, lambda, comprehension), so that
an attribute read belongs to the value it is read from (``p.total_memory`` of ``p =
torch.cuda.get_device_properties(i)`` in one function, not ``p.numel()`` of ``for p in
model.parameters()`` in another).

One walk of the tree given (a module, or only the part an analysis needs). The answer is Python's rule
made cheap: a name read resolves to the innermost enclosing scope that binds the name (an assignment,
``for`` / comprehension / ``with`` / ``except`` target, parameter, import, ``def`` / ``class``), else to the
module; class bodies are not scopes for the functions in them (as in Python). ``global`` and ``nonlocal``
declarations send the name to the module (``global``) or leave it to the enclosing binder (``nonlocal``).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.names import push_code_children

_FUNCTION_SCOPES = (cst.FunctionDef, cst.Lambda)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def _target_names(target: cst.CSTNode, out: set[str]) -> None:
    kind = type(target)
    if kind is cst.Name:
        out.add(target.value)  # type: ignore[attr-defined]
    elif kind is cst.Tuple or kind is cst.List:
        for element in target.elements:  # type: ignore[attr-defined]
            _target_names(element.value, out)
    elif kind is cst.StarredElement:
        _target_names(target.value, out)  # type: ignore[attr-defined]


class Scopes:
    """The scopes of ``root`` and what each binds; ``binder(name_node)`` answers a read."""

    def __init__(self, root: cst.CSTNode) -> None:
        self.root = root
        self.bindings: dict[cst.CSTNode, set[str]] = {root: set()}
        self.parent: dict[cst.CSTNode, Optional[cst.CSTNode]] = {root: None}
        self.scope_of: dict[cst.CSTNode, cst.CSTNode] = {}  # Name node -> the scope it stands in
        self.class_of: dict[cst.CSTNode, Optional[cst.ClassDef]] = {}  # `self` / `cls` Name -> its class
        self._global: dict[cst.CSTNode, set[str]] = {}
        self._nonlocal: dict[cst.CSTNode, set[str]] = {}
        # each function -> the return statements with a value in its body, nested functions' included, in
        # document order (what a walk of its body finds)
        self.returns: dict[cst.FunctionDef, list[cst.Return]] = {}
        self._walk(root)

    def binder(self, name: cst.Name) -> cst.CSTNode:
        """The scope whose binding of ``name.value`` the read ``name`` refers to (the root when none does)."""
        scope = self.scope_of.get(name, self.root)
        while scope is not None:
            if name.value in self._global.get(scope, ()):
                return self.root
            if name.value in self.bindings[scope] and name.value not in self._nonlocal.get(scope, ()):
                return scope
            scope = self.parent[scope]
        return self.root

    def _bind(self, scope: cst.CSTNode, target: cst.CSTNode) -> None:
        _target_names(target, self.bindings[scope])

    def _open(self, node: cst.CSTNode, outer: cst.CSTNode) -> cst.CSTNode:
        self.bindings[node] = set()
        self.parent[node] = outer
        return node

    def _walk(self, root: cst.CSTNode) -> None:
        # (node, its scope, its class): the stack pops in document order (code_children is last first)
        stack: list[cst.CSTNode] = [root]
        contexts: list[tuple[cst.CSTNode, Optional[cst.ClassDef]]] = [(root, None)]  # each node's scope, class
        pop, push, pop_context = stack.pop, stack.append, contexts.pop
        while stack:
            node = pop()
            scope, klass = pop_context()
            kind = type(node)
            inner, inner_class = scope, klass
            if kind is cst.Name:
                self.scope_of[node] = scope
                if node.value in ("self", "cls"):  # type: ignore[attr-defined]
                    self.class_of[node] = klass
            elif kind is cst.FunctionDef or kind is cst.ClassDef:
                self.bindings[scope].add(node.name.value)  # type: ignore[attr-defined]
                if kind is cst.FunctionDef:
                    inner = self._open(node, scope)
                    params = node.params  # type: ignore[attr-defined]
                    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                        self.bindings[inner].add(param.name.value)
                    for star in (params.star_arg, params.star_kwarg):
                        if isinstance(star, cst.Param):
                            self.bindings[inner].add(star.name.value)
                else:
                    inner_class = node  # type: ignore[assignment]
            elif kind is cst.Lambda:
                inner = self._open(node, scope)
                for param in node.params.params:  # type: ignore[attr-defined]
                    self.bindings[inner].add(param.name.value)
            elif kind in _COMPREHENSIONS:
                inner = self._open(node, scope)
            elif kind is cst.CompFor:
                self._bind(scope, node.target)  # type: ignore[attr-defined]
            elif kind is cst.Assign:
                for target in node.targets:  # type: ignore[attr-defined]
                    self._bind(scope, target.target)
            elif kind is cst.AnnAssign or kind is cst.AugAssign or kind is cst.For:
                self._bind(scope, node.target)  # type: ignore[attr-defined]
            elif kind is cst.NamedExpr:
                self._bind(self._function_scope(scope), node.target)  # type: ignore[attr-defined]
            elif kind is cst.AsName:
                self._bind(scope, node.name)  # type: ignore[attr-defined]
            elif kind is cst.ImportAlias and node.asname is None:  # type: ignore[attr-defined]
                dotted = node.name  # type: ignore[attr-defined]
                while type(dotted) is cst.Attribute:
                    dotted = dotted.value
                self._bind(scope, dotted)
            elif kind is cst.Global:
                self._global.setdefault(scope, set()).update(n.name.value for n in node.names)  # type: ignore[attr-defined]
            elif kind is cst.Nonlocal:
                self._nonlocal.setdefault(scope, set()).update(n.name.value for n in node.names)  # type: ignore[attr-defined]
            elif kind is cst.Return and node.value is not None:  # type: ignore[attr-defined]
                self._returned(node, scope)  # type: ignore[arg-type]
            # the children, pushed last first so that the stack pops them in document order (names.walk's),
            # each with the scope and class it stands in
            count = push_code_children(node, push)
            if count:
                contexts.extend([(inner, inner_class)] * count)

    def _returned(self, node: cst.Return, scope: cst.CSTNode) -> None:
        # a return statement stands in a function's body and in the bodies of the functions around it
        while scope is not None:
            if type(scope) is cst.FunctionDef:
                self.returns.setdefault(scope, []).append(node)
            scope = self.parent[scope]

    def _function_scope(self, scope: cst.CSTNode) -> cst.CSTNode:
        """A walrus in a comprehension binds in the enclosing function (PEP 572)."""
        while type(scope) in _COMPREHENSIONS and self.parent[scope] is not None:
            scope = self.parent[scope]  # type: ignore[assignment]
        return scope
