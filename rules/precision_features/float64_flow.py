"""NP801's data flow: whether a float64 value made in a function provably never reaches a device as
float64.

A simple, sound analysis over one scope. The value is followed through the expressions that keep it a
float64 tensor or array on the same device (arithmetic, indexing, same-device tensor methods, ``torch.*``
and ``numpy`` functions without a ``device=``, assignment to a local name, whose uses are followed in
turn). Each path must end in a cast to a narrower dtype (``.float()``, ``.to(torch.float32)``,
``torch.tensor(v, dtype=torch.float32)``) or a CPU-only use (``.numpy()``, ``.item()``, ``.tolist()``,
``float(v)``, ``print``, a discarded expression, a comparison's boolean result). Anything else (an
unknown call, a return, an attribute store, ``register_buffer``, ``.to(device)``, a ``global``, a
module-level or class-level name, which other code can import) means not proven, and NP801 reports the reference as it always did.
"""

from __future__ import annotations

from typing import Iterator, Optional, Sequence

import libcst as cst

from neuron_port.rules.context import FileContext
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import walk
from neuron_port.rules.helpers.nodes import children

WIDE_DTYPES = frozenset({"torch.float64", "torch.double", "torch.complex128", "torch.cdouble"})
NARROW_CASTS = frozenset({"float", "half", "bfloat16", "int", "long", "short", "bool"})
CPU_ONLY_METHODS = frozenset({"numpy", "item", "tolist"})
CPU_ONLY_BUILTINS = frozenset({"float", "int", "len", "print", "str", "repr", "bool", "round", "isinstance"})
# tensor / array methods that return a value of the same dtype on the same device
SAME_DEVICE_METHODS = frozenset({
    "abs", "clamp", "clip", "clone", "contiguous", "cos", "cpu", "cumprod", "cumsum", "detach", "diff", "exp",
    "expand", "expm1", "flatten", "flip", "log", "log1p", "log2", "max", "mean", "min", "neg", "permute",
    "pow", "prod", "reciprocal", "repeat", "reshape", "roll", "rsqrt", "sigmoid", "sin", "sqrt", "square",
    "squeeze", "sum", "t", "tan", "tanh", "transpose", "unsqueeze", "view", "astype", "copy",
})
METADATA = frozenset({"shape", "dtype", "ndim", "size", "is_cuda", "requires_grad"})
SAME_DEVICE_MODULES = ("torch.nn.functional.", "torch.linalg.", "torch.special.", "numpy.")
SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.Module)


class Float64Flow:
    """The analysis of one module: ``cast_reason(value)`` for each float64-producing expression."""

    def __init__(self, module: cst.Module, context: FileContext) -> None:
        self.context = context
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        for node in walk(module):
            for child in _children(node):
                self.parents[child] = node

    def produced_value(self, reference: cst.CSTNode) -> Optional[cst.BaseExpression]:
        """The expression whose value a float64 reference makes: the factory or ``.to()`` / ``.type()``
        call it is the dtype of, or the ``.double()`` call itself; None for other references (a
        comparison with ``x.dtype``, an annotation ...)."""
        if isinstance(reference, cst.Call):
            return reference
        arg = self.parents.get(reference)
        call = self.parents.get(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(call, cst.Call) or call.func is reference:
            return None
        assert isinstance(arg, cst.Arg)
        if arg.keyword is not None and arg.keyword.value != "dtype":
            return None
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "type"):
            return call
        return call if (self.context.qualname(call.func) or "").startswith("torch.") else None

    # -- the value's paths ---------------------------------------------------------------------
    def is_contained(self, value: cst.BaseExpression) -> bool:
        """True when every path of ``value`` ends in a narrowing cast or a CPU-only use."""
        if _has_device(value) and not _cpu_device(value):
            return False
        pending: list[cst.BaseExpression] = [value]
        followed: set[cst.CSTNode] = set()
        while pending:
            node = pending.pop()
            if node in followed:
                continue
            followed.add(node)
            step = self._follow(node)
            if step is None:
                return False
            pending.extend(step)
        return True

    def _follow(self, node: cst.CSTNode) -> Optional[list[cst.BaseExpression]]:
        """The expressions the float64 value of ``node`` flows into ([] when it ends safely here), or
        None when where it goes is not known."""
        parent = self.parents.get(node)
        if parent is None:
            return None
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return self._attribute(parent)
        if isinstance(parent, cst.Arg) and parent.value is node:
            call = self.parents.get(parent)
            return self._argument(call) if isinstance(call, cst.Call) and call.func is not node else None
        if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
            return [parent]
        if isinstance(parent, cst.Subscript) and parent.value is node:
            return [parent]
        if isinstance(parent, cst.IfExp):
            return [] if parent.test is node else [parent]
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.Expr)):
            return []  # a boolean result, or a value that is discarded
        if isinstance(parent, cst.Assign) and parent.value is node:
            return self._assigned(parent)
        return None

    def _attribute(self, attribute: cst.Attribute) -> Optional[list[cst.BaseExpression]]:
        call = self.parents.get(attribute)
        name = attribute.attr.value
        if not (isinstance(call, cst.Call) and call.func is attribute):
            if name in METADATA:
                return []
            return [attribute] if name in ("T", "mT", "real") else None
        if name in NARROW_CASTS and not call.args:
            return []
        if name in ("to", "type", "astype") and self._narrow_dtype(call):
            return []
        if name in CPU_ONLY_METHODS:
            return []
        if name in SAME_DEVICE_METHODS and not _has_device(call):
            return [call]
        return None

    def _argument(self, call: cst.Call) -> Optional[list[cst.BaseExpression]]:
        qualname = self.context.qualname(call.func) or ""
        if isinstance(call.func, cst.Name) and call.func.value in CPU_ONLY_BUILTINS and not qualname:
            return []
        if not qualname.startswith("torch.") and not qualname.startswith("numpy."):
            return None
        if self._narrow_dtype(call):
            return []
        if _has_device(call) or not (qualname.count(".") == 1 or qualname.startswith(SAME_DEVICE_MODULES)):
            return None  # torch.nn.Parameter, torch.distributed.*, torch.cuda.* ... or a device given
        return [call]

    def _assigned(self, assign: cst.Assign) -> Optional[list[cst.BaseExpression]]:
        names = [t.target.value for t in assign.targets if isinstance(t.target, cst.Name)]
        if len(names) != len(assign.targets):
            return None  # an attribute, a subscript or a tuple: followed no further
        scope = self._scope(assign)
        if not isinstance(scope, cst.FunctionDef):
            return None  # a module global or a class attribute: other code can reach it
        uses: list[cst.BaseExpression] = []
        for name in names:
            if self._declared_shared(scope, name):
                return None
            uses.extend(self._uses(scope, name, assign))
        return uses

    # -- scopes and uses -------------------------------------------------------------------------
    def _scope(self, node: cst.CSTNode) -> cst.CSTNode:
        current = self.parents.get(node)
        while current is not None and not isinstance(current, SCOPES):
            current = self.parents.get(current)
        return current if current is not None else node

    def _declared_shared(self, scope: cst.CSTNode, name: str) -> bool:
        return any(isinstance(n, (cst.Global, cst.Nonlocal)) and any(a.name.value == name for a in n.names)
                   for n in walk(scope))

    def _uses(self, scope: cst.CSTNode, name: str, binding: cst.Assign) -> Iterator[cst.Name]:
        """The loads of ``name`` the binding can reach: every one in the scope (nested functions
        included), but for a binding in the scope's own straight-line body only those of the statements
        from it to the next plain assignment of the name there (and of every nested function: a closure
        may run later)."""
        window = self._window(scope, name, binding)
        roots: list[cst.CSTNode] = [scope] if window is None else window + [
            n for n in walk(scope) if isinstance(n, (cst.FunctionDef, cst.Lambda)) and n is not scope]
        seen: set[cst.CSTNode] = set()
        for root in roots:
            for node in walk(root):
                if isinstance(node, cst.Name) and node.value == name and node not in seen and self._is_load(node):
                    seen.add(node)
                    yield node

    def _window(self, scope: cst.CSTNode, name: str, binding: cst.Assign) -> Optional[list[cst.CSTNode]]:
        if not (isinstance(scope, cst.FunctionDef) and isinstance(scope.body, cst.IndentedBlock)):
            return None
        body: Sequence[cst.BaseStatement] = scope.body.body
        statement = self.parents.get(binding)
        index = next((i for i, s in enumerate(body) if s is statement), None)
        if index is None:
            return None  # bound inside a branch or a loop: every use in the scope
        window: list[cst.CSTNode] = []
        for later in body[index + 1:]:
            window.append(later)
            if isinstance(later, cst.SimpleStatementLine) and any(
                    isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                          for t in small.targets) for small in later.body):
                break  # rebound: the uses after this statement see the new value
        return window

    def _is_load(self, node: cst.Name) -> bool:
        if not self.context.is_reference(node):
            return False
        parent = self.parents.get(node)
        return not (isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.AugAssign)
                                                              and parent.target is node))

    def _narrow_dtype(self, call: cst.Call) -> bool:
        dtype = arg_named(call, "dtype")
        if dtype is None:
            positional = [a for a in call.args if a.keyword is None]
            dtype = positional[-1] if positional else None
        if dtype is None:
            return False
        qualname = self.context.qualname(dtype.value) or ""
        return qualname.startswith(("torch.", "numpy.")) and qualname not in WIDE_DTYPES and qualname != "numpy.float64"


def _children(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    return children(node)


def _has_device(call: cst.CSTNode) -> bool:
    if not isinstance(call, cst.Call):
        return False
    return any(arg.keyword is not None and arg.keyword.value == "device" for arg in call.args)


def _cpu_device(call: cst.CSTNode) -> bool:
    if not isinstance(call, cst.Call):
        return False
    device = arg_named(call, "device")
    return device is not None and isinstance(device.value, cst.SimpleString) and \
        device.value.value.strip("'\"") == "cpu"
