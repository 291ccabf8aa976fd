"""Legacy tensor-type aliases: ``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`` (NP105).

A legacy typed-tensor class is a *dtype and a device* in one name. An alias choosing between the CUDA class
and the CPU class of the same dtype is therefore a device choice tied to the flag that decides it; every
use of the alias in the file means one of:

- a constructor from sizes (``Tensor(n, 1)``, ``Tensor(x.size(0), *shape)``): ``torch.empty(..., dtype=,
  device=)`` (the legacy constructor leaves the memory uninitialised, as ``torch.empty`` does);
- a constructor from a sequence literal (``LongTensor([1, 2])``): ``torch.tensor(..., dtype=, device=)``;
- a constructor from a NumPy value (``Tensor(np.random.normal(0, 1, (n, d)))``): the CPU class of the same
  dtype, then ``.to(device)`` (the CPU constructor takes a NumPy value exactly as the CUDA one does: an
  array as data, a NumPy integer as a size, so this is the program's own meaning on every NumPy value);
- a conversion ``x.type(Tensor)``: ``x.to(device=..., dtype=...)``;
- anything else (``isinstance(x, Tensor)``, a constructor from a name that may hold a tensor, the alias
  passed on or read for an attribute): no portable spelling keeps its meaning; the whole alias is kept
  and reported, never half of it.

The device is the alias's choice: ``"neuron" if cuda else "cpu"`` (the flag read where the alias read it:
the flag must be assigned once, in the scope the alias reads it from, and not shadowed where the alias
is used), or the device alone for an unconditional ``Tensor = torch.cuda.FloatTensor``. The alias line
goes once every use is spelled out. ``decision_groups.py`` makes the alias's sites members of the flag's
decision group, so the alias and the flag are ported together or kept together.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import libcst as cst

from neuron_port.rules.device_placement.tables import LEGACY_CUDA_TENSOR_TYPES
from neuron_port.rules.helpers.names import walk
from neuron_port.rules.helpers.per_file import PerFileAnalysis, module_walk
from neuron_port.rules.helpers.scopes import Scopes

# the dtype-changing default setters: with one in the file, `torch.Tensor` is not known to be float32
_DEFAULT_DTYPE_SETTERS = frozenset({"torch.set_default_dtype", "torch.set_default_tensor_type"})
# a value that is a size: `x.size(0)`, `x.shape[0]`, `len(x)`, `x.numel()`, `x.dim()`, or a whole shape
_SIZE_METHODS = frozenset({"size", "numel", "dim", "ndimension", "nelement"})
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Power)


@dataclasses.dataclass
class Site:
    """One use of an alias: ``kind`` is ``sizes`` / ``sequence`` / ``numpy`` (constructors), ``type``
    (``x.type(A)``) or ``other`` (not portable); ``node`` is what NP105 reports and replaces."""

    kind: str
    node: cst.CSTNode
    read: cst.Name


@dataclasses.dataclass
class Alias:
    name: str
    type_name: str  # "FloatTensor"
    line: cst.SimpleStatementLine  # the alias statement (goes when every use is ported)
    cuda_type: cst.BaseExpression  # the `torch.cuda.FloatTensor` reference in it
    flag: Optional[cst.Name]  # the flag the alias reads (None: unconditional)
    sites: list[Site]
    why_kept: Optional[str] = None  # None: every use has a portable spelling

    @property
    def dtype(self) -> str:
        return LEGACY_CUDA_TENSOR_TYPES[self.type_name]

    def members(self) -> list[cst.CSTNode]:
        return [self.line, self.cuda_type, *(s.node for s in self.sites)]


def _legacy_name(context, node: cst.CSTNode, prefix: str) -> Optional[str]:
    qualname = context.qualname(node)
    if qualname is None or not qualname.startswith(prefix):
        return None
    name = qualname[len(prefix):]
    return name if name in LEGACY_CUDA_TENSOR_TYPES else None


def is_size(context, node: cst.BaseExpression) -> bool:
    """An expression that is a size or a shape wherever it runs (so a legacy constructor reads sizes)."""
    kind = type(node)
    if kind is cst.Integer:
        return True
    if kind is cst.BinaryOperation:
        return isinstance(node.operator, _ARITHMETIC) and is_size(context, node.left) and is_size(
            context, node.right)
    if kind is cst.Call:
        func = node.func
        if type(func) is cst.Name and func.value == "len" and context.qualname(func) is None:
            return True
        if type(func) is not cst.Attribute or func.attr.value not in _SIZE_METHODS:
            return False
        return not node.args or (func.attr.value == "size" and len(node.args) == 1)
    if kind is cst.Attribute:  # `x.shape`: a torch.Size
        return node.attr.value == "shape"
    if kind is cst.Subscript:  # `x.shape[0]`, `x.size()[1]`
        base = node.value
        return (type(base) is cst.Attribute and base.attr.value == "shape") or (
            type(base) is cst.Call and type(base.func) is cst.Attribute and base.func.attr.value == "size"
            and not base.args)
    return False


def _is_numpy_value(context, node: cst.BaseExpression) -> bool:
    """A NumPy call (``np.random.normal(...)``) or arithmetic over one: a NumPy value, never a tensor."""
    kind = type(node)
    if kind is cst.Call:
        return (context.qualname(node.func) or "").startswith("numpy.")
    if kind is cst.BinaryOperation:
        terms = (node.left, node.right)
        return any(_is_numpy_value(context, t) for t in terms) and all(
            _is_numpy_value(context, t) or type(t) in (cst.Integer, cst.Float) for t in terms)
    if kind is cst.UnaryOperation:
        return _is_numpy_value(context, node.expression)
    return False


def constructor_kind(context, call: cst.Call) -> Optional[str]:
    """What a legacy constructor's arguments mean: ``sizes``, ``sequence``, ``numpy``, or None (not known
    without running it: a name may hold an int, a list or a tensor)."""
    args = call.args
    if any(a.keyword is not None or a.star == "**" for a in args):
        return None
    if not args:
        return "sizes"
    if len(args) == 1 and not args[0].star:
        value = args[0].value
        if type(value) in (cst.List, cst.Tuple, cst.ListComp):
            return "sequence"
        if is_size(context, value):
            return "sizes"
        if _is_numpy_value(context, value):
            return "numpy"
        return None
    # two or more arguments (or `n, *shape`): the legacy constructor takes only sizes there
    return "sizes" if any(not a.star for a in args) else None


def _binding_names(node: cst.CSTNode) -> list[cst.Name]:
    """The names a statement or clause binds (assignment, loop, with, import, def, class targets)."""
    kind = type(node)
    targets: list[cst.CSTNode] = []
    if kind is cst.Assign:
        targets = [t.target for t in node.targets]
    elif kind in (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor):
        targets = [node.target]
    elif kind is cst.AsName:
        targets = [node.name]
    elif kind in (cst.FunctionDef, cst.ClassDef):
        targets = [node.name]
    elif kind is cst.NamedExpr:
        targets = [node.target]
    out: list[cst.Name] = []
    for target in targets:
        for child in walk(target):
            if type(child) is cst.Name:
                out.append(child)
    return out


class LegacyAliases:
    """The legacy tensor-type aliases of a module and their uses (built once per file and pass)."""

    def __init__(self, context, module: cst.Module) -> None:
        self.module = module
        self.aliases: list[Alias] = []
        nodes = module_walk(context, module).nodes
        candidates: list[tuple[cst.SimpleStatementLine, cst.Assign]] = []
        for node in nodes:
            if (type(node) is cst.SimpleStatementLine and len(node.body) == 1 and type(node.body[0]) is cst.Assign
                    and len(node.body[0].targets) == 1 and type(node.body[0].targets[0].target) is cst.Name):
                value = node.body[0].value
                if type(value) in (cst.IfExp, cst.Attribute, cst.Name):
                    candidates.append((node, node.body[0]))
        if not candidates:
            return
        found = [(line, assign, parts) for line, assign in candidates
                 if (parts := self._alias_parts(context, assign.value, nodes)) is not None]
        if not found:
            return
        # a class attribute (`Tensor = ...` in a class body, read as `self.Tensor`) or a name read as an
        # attribute anywhere in the file (`train.Tensor`): its uses are not all names of this file
        in_classes = {id(line) for node in nodes if type(node) is cst.ClassDef
                      for line in getattr(node.body, "body", ())}
        attributes = {node.attr.value for node in nodes if type(node) is cst.Attribute
                      and not (context.qualname(node) or "").startswith("torch.")}  # not `torch.FloatTensor`
        found = [f for f in found if id(f[0]) not in in_classes and f[1].targets[0].target.value not in attributes]
        if not found:
            return
        scopes = Scopes(module)
        bound: dict[tuple[cst.CSTNode, str], int] = {}  # (scope, name) -> how many bindings
        values: dict[tuple[cst.CSTNode, str], list[cst.BaseExpression]] = {}  # (scope, name) -> assigned values
        for node in nodes:
            for name in _binding_names(node):
                key = (scopes.scope_of.get(name, module), name.value)
                bound[key] = bound.get(key, 0) + 1
                if type(node) is cst.Assign and any(t.target is name for t in node.targets):
                    values.setdefault(key, []).append(node.value)
        self._scopes, self._bound, self._values = scopes, bound, values
        globals_ = {n.name.value for node in nodes if type(node) in (cst.Global, cst.Nonlocal) for n in node.names}
        for line, assign, (type_name, cuda_type, flag) in found:
            target = assign.targets[0].target
            scope = scopes.scope_of.get(target, module)
            name = target.value
            if bound.get((scope, name)) != 1 or name in globals_:
                continue  # bound again: a use may see another value
            alias = Alias(name, type_name, line, cuda_type, flag, [])
            reads = [n for n in nodes if type(n) is cst.Name and n.value == name and n is not target
                     and context.is_reference(n) and scopes.binder(n) is scope]
            self._sites(context, nodes, alias, set(reads))
            self._check_flag(scopes, bound, globals_, alias, module)
            self.aliases.append(alias)

    @staticmethod
    def _alias_parts(context, value: cst.BaseExpression, nodes):
        """(type name, the CUDA class reference, the flag) of an alias value, else None."""
        if type(value) is not cst.IfExp:
            name = _legacy_name(context, value, "torch.cuda.")
            return (name, value, None) if name is not None else None
        if type(value.test) is not cst.Name:
            return None
        name = _legacy_name(context, value.body, "torch.cuda.")
        if name is None:
            return None
        cpu = context.qualname(value.orelse)
        if cpu == f"torch.{name}":
            return name, value.body, value.test
        if cpu == "torch.Tensor" and name == "FloatTensor" and not any(
                type(n) is cst.Call and context.qualname(n.func) in _DEFAULT_DTYPE_SETTERS for n in nodes):
            return name, value.body, value.test  # `torch.Tensor` is float32 while the default is
        return None

    def _named_value_kind(self, context, call: cst.Call) -> Optional[str]:
        """``LongTensor(labels)`` where every binding of ``labels`` is an assignment of a NumPy value
        (``labels = np.array(...)``): ``numpy``; of sizes: ``sizes``; else None (a name may hold a tensor)."""
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            return None
        arg = call.args[0].value
        if type(arg) is not cst.Name:
            return None
        key = (self._scopes.binder(arg), arg.value)
        assigned = self._values.get(key, [])
        if not assigned or len(assigned) != self._bound.get(key):
            return None
        if all(_is_numpy_value(context, v) for v in assigned):
            return "numpy"
        if all(is_size(context, v) for v in assigned):
            return "sizes"
        return None

    def _sites(self, context, nodes, alias: Alias, reads: set) -> None:
        used: set = set()
        for node in nodes:
            if type(node) is not cst.Call:
                continue
            func = node.func
            if func in reads:
                kind = constructor_kind(context, node) or self._named_value_kind(context, node)
                alias.sites.append(Site(kind or "other", node, func))
                used.add(func)
            elif (type(func) is cst.Attribute and func.attr.value == "type" and len(node.args) == 1
                  and node.args[0].keyword is None and not node.args[0].star and node.args[0].value in reads):
                alias.sites.append(Site("type", node, node.args[0].value))
                used.add(node.args[0].value)
        for read in reads - used:
            alias.sites.append(Site("other", read, read))
        other = next((s for s in alias.sites if s.kind == "other"), None)
        if other is not None:
            alias.why_kept = "a use has no portable spelling"

    @staticmethod
    def _check_flag(scopes: Scopes, bound: dict, globals_: set, alias: Alias, module: cst.Module) -> None:
        """The flag, read again at each use, must be the value the alias read: assigned once where the
        alias reads it from, and not bound in a scope between a use and that one."""
        flag = alias.flag
        if flag is None or alias.why_kept is not None:
            return
        home = scopes.binder(flag)
        if bound.get((home, flag.value)) != 1 or flag.value in globals_:
            alias.why_kept = f"`{flag.value}` is assigned more than once"
            return
        for site in alias.sites:
            scope = scopes.scope_of.get(site.read, module)
            while scope is not None and scope is not home:
                if flag.value in scopes.bindings.get(scope, ()):
                    alias.why_kept = f"`{flag.value}` means another value where `{alias.name}` is used"
                    return
                scope = scopes.parent.get(scope)


legacy_aliases = PerFileAnalysis(LegacyAliases)


def device_choice(alias: Alias, device_source: str) -> str:
    """The device an alias chose, as source: ``"neuron" if cuda else "cpu"``."""
    if alias.flag is None:
        return device_source
    return f'{device_source} if {alias.flag.value} else "cpu"'
