"""The analysis behind NP720 (``cuda_only_branches.py``) and the device-test flips of NP102 / NP104 /
NP201: which ``x.is_cuda`` / ``device.type == "cuda"`` / ``torch.cuda.is_available()`` tests guard CUDA-only
code (kept, with the code they guard), and which flips are unsafe because what they decide is not known to
run on Trainium (``rules/helpers/portable.py``) or goes where the file does not show
(``rules/helpers/escaping_tests.py``). Once per file and pass: ``cuda_only_guards(context, module)``."""

from __future__ import annotations

import weakref
from typing import Optional

import libcst as cst

from neuron_port.rules.cuda_api.tables import TORCH_CUDA_NO_EQUIVALENT
from neuron_port.rules.helpers.names import dotted_name, last_segment, source_of, walk
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.helpers.escaping_tests import Escape, escaping_tests
from neuron_port.rules.helpers.ranks_guards import (guard_atom, term_polarity, guard_terms, nodes_in, regions_either_way,
                                                    regions_where)
from neuron_port.rules.cuda_api.kept_arguments import portability_of
from neuron_port.rules.helpers.table_rule import covering_key
from neuron_port.rules.helpers.per_file import PerFileAnalysis, module_walk

# Qualified-name prefixes of code that runs on CUDA only -> (what it is, effort to port it).
CUDA_ONLY: dict[str, tuple[str, str]] = {
    "triton": ("a Triton kernel", "high"),
    "flash_attn": ("flash-attn", "medium"),
    "xformers": ("xformers", "medium"),
    "tensorrt": ("a TensorRT engine", "medium"),
    "torch_tensorrt": ("a TensorRT engine", "medium"),
    "torch.utils.cpp_extension": ("a CUDA extension", "high"),
    "torch.cuda.graph": ("a CUDA graph", "medium"),
    "torch.cuda.graphs": ("a CUDA graph", "medium"),
    "torch.cuda.CUDAGraph": ("a CUDA graph", "medium"),
    "torch.cuda.make_graphed_callables": ("a CUDA graph", "medium"),
    # torch.cuda APIs that NP201 cannot rename (NP202's table): on Trainium they raise or do nothing, so a
    # test guarding them turned True would run them where the CUDA program skipped them
    **{f"torch.cuda.{api}": ("a CUDA API with no Trainium equivalent", effort)
       for api, (_advice, effort) in TORCH_CUDA_NO_EQUIVALENT.items()},
}
TRITON_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics")
# last segments of the CUDA_ONLY names that code reaches through `torch` without importing them
_QUALIFIED_ATTRS = frozenset({"graph", "graphs", "CUDAGraph", "make_graphed_callables", "load", "load_inline",
                              "CUDAExtension", "CppExtension", "cpp_extension"}
                             | {api.split(".")[-1] for api in TORCH_CUDA_NO_EQUIVALENT})


def _cuda_module_name(name: str) -> bool:
    """``cuda``, ``*_cuda``, ``cuda_*``: how compiled CUDA extension modules are named (``fused_gelu_cuda``,
    ``selective_scan_cuda``); not ``check_cuda_p2p_ib_support``."""
    name = name.lower()
    return name == "cuda" or name.endswith("_cuda") or name.startswith("cuda_")


def _is_cuda_literal(node: cst.CSTNode) -> bool:
    kind = type(node)  # exact types: LibCST's node classes have no subclasses
    if kind is cst.List or kind is cst.Tuple or kind is cst.Set:
        return any(type(e) is cst.Element and string_value(e.value) == "cuda" for e in node.elements)
    return string_value(node) == "cuda"


def is_cuda_availability_test(node: cst.CSTNode) -> bool:
    """``torch.cuda.is_available()`` (any alias of ``torch``): NP201 keeps it where it guards CUDA-only code."""
    return (isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "is_available" and last_segment(node.func.value) == "cuda")


def same_truth(value: cst.BaseExpression) -> cst.BaseExpression:
    """The test whose truth ``value`` is, by data dependence: ``T`` for ``True if T else False``,
    ``bool(T)``, ``not not T`` (any nesting of them); ``value`` itself for anything else."""
    while True:
        kind = type(value)
        if kind is cst.IfExp and dotted_name(value.body) == "True" and dotted_name(value.orelse) == "False":
            value = value.test
        elif (kind is cst.Call and dotted_name(value.func) == "bool" and len(value.args) == 1
              and value.args[0].keyword is None and not value.args[0].star):
            value = value.args[0].value
        elif (kind is cst.UnaryOperation and type(value.operator) is cst.Not
              and type(value.expression) is cst.UnaryOperation and type(value.expression.operator) is cst.Not):
            value = value.expression.expression
        else:
            return value


def _availability_aliases(nodes) -> dict[str, list[cst.Call]]:
    """Names assigned ``torch.cuda.is_available()`` or the same truth (``use_cuda = torch.cuda.is_available()``,
    ``cuda = True if torch.cuda.is_available() else False``, ``bool(...)``), with those calls: a test of the
    name is a test of CUDA (in any scope: keeping a test is the safe mistake). A longer expression (``flash is
    not None and torch.cuda.is_available() and ...``) says more than that."""
    aliases: dict[str, list[cst.Call]] = {}
    for node in nodes:
        if (type(node) is cst.Assign and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                and is_cuda_availability_test(same_truth(node.value))):
            aliases.setdefault(node.targets[0].target.value, []).append(same_truth(node.value))  # type: ignore[arg-type]
    return aliases


def is_device_count_call(node: cst.CSTNode) -> bool:
    """``torch.cuda.device_count()`` (any alias of ``torch``)."""
    return (type(node) is cst.Call and not node.args and type(node.func) is cst.Attribute
            and node.func.attr.value == "device_count" and last_segment(node.func.value) == "cuda")


def _count_aliases(nodes) -> dict[str, list[cst.Call]]:
    """Names assigned ``torch.cuda.device_count()`` (``n_gpu = torch.cuda.device_count()``), with those calls."""
    aliases: dict[str, list[cst.Call]] = {}
    for node in nodes:
        if (type(node) is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name
                and is_device_count_call(node.value)):
            aliases.setdefault(node.targets[0].target.value, []).append(node.value)  # type: ignore[arg-type]
    return aliases


def _count_polarity(node: cst.BaseExpression, counts: dict) -> Optional[bool]:
    """A comparison of the CUDA device count (``torch.cuda.device_count() > 1``, ``n_gpu >= 1``, ``n_gpu == 0``,
    a bare ``if torch.cuda.device_count():``): True where it holds only with a CUDA device (a Trainium host
    counts NeuronCores, so a renamed count enters it: ``DataParallel`` over several cores), False where it
    holds only without one, None for anything else (``n_gpu < 4``)."""
    def is_count(value) -> bool:
        return is_device_count_call(value) or (type(value) is cst.Name and value.value in counts)

    if is_count(node):
        return True
    if type(node) is not cst.Comparison or len(node.comparisons) != 1 or not is_count(node.left):
        return None
    target = node.comparisons[0]
    if type(target.comparator) is not cst.Integer:
        return None
    bound, operator = int(target.comparator.value, 0), type(target.operator)
    if (operator is cst.GreaterThan and bound >= 0) or (operator is cst.GreaterThanEqual and bound >= 1) or (
            operator is cst.NotEqual and bound == 0) or (operator is cst.Equal and bound >= 1):
        return True
    if (operator is cst.Equal and bound == 0) or (operator is cst.LessThan and bound == 1) or (
            operator is cst.LessThanEqual and bound == 0):
        return False
    return None


def on_cuda_polarity(node: cst.BaseExpression) -> Optional[bool]:
    """True for a test that the data is on a CUDA device (``x.is_cuda``, ``x.device.type == "cuda"``,
    ``"cuda" in str(x.device)``, ``device.type in ("cuda", "xpu")``, ``str(x.device).startswith("cuda")``,
    ``torch.cuda.is_available()``), False for its negation (``!=``, ``not in``), None for anything else."""
    kind = type(node)  # exact types (LibCST's node classes have no subclasses): this runs for most nodes
    if kind is cst.Attribute:
        return True if node.attr.value == "is_cuda" else None
    if kind is cst.Call and type(node.func) is cst.Attribute:
        if node.func.attr.value == "startswith" and len(node.args) == 1 and string_value(node.args[0].value) == "cuda":
            return True  # str(x.device).startswith("cuda")
        if is_cuda_availability_test(node):
            return True
    if kind is cst.Comparison and len(node.comparisons) == 1:
        target = node.comparisons[0]
        operator = target.operator
        if isinstance(operator, (cst.Equal, cst.NotEqual)) and (
            _is_cuda_literal(node.left) or _is_cuda_literal(target.comparator)
        ) and not isinstance(node.left, (cst.List, cst.Tuple)):
            return isinstance(operator, cst.Equal)
        if isinstance(operator, (cst.In, cst.NotIn)) and (
            string_value(node.left) == "cuda" or _is_cuda_literal(target.comparator)
        ):
            return isinstance(operator, cst.In)
    return None


class CudaOnlyGuards:
    """The ``is_cuda`` / ``device.type == "cuda"`` tests of one module that guard CUDA-only code."""

    def __init__(self, context, module: cst.Module) -> None:
        self.module = module
        self.context = context
        self.guards: dict[cst.BaseExpression, tuple[str, str, str]] = {}  # atom -> (call, what, effort)
        self.guard_nodes: set[cst.CSTNode] = set()  # every node inside those atoms
        self.guarded: dict[cst.BaseExpression, list[cst.CSTNode]] = {}  # atom -> the CUDA-only code it guards
        # torch.cuda.is_available references (in a test, or assigned to a name a test reads) that guard
        # CUDA-only code -> (call, what, effort): NP201 keeps them
        self.kept_availability: dict[cst.CSTNode, tuple[str, str, str]] = {}
        # tests whose fix would be unsafe: what they decide is not known to run on Trainium (``portable.py``)
        self.unsafe: dict[cst.CSTNode, str] = {}  # every node inside such a test -> what it guards
        self.unsafe_availability: dict[cst.CSTNode, str] = {}  # torch.cuda.is_available reference -> the same
        nodes = module_walk(context, module).nodes
        aliases = _availability_aliases(nodes)
        self._alias_funcs = {name: [call.func for call in calls] for name, calls in aliases.items()}

        def polarity(node: cst.BaseExpression) -> Optional[bool]:
            return True if type(node) is cst.Name and node.value in aliases else on_cuda_polarity(node)

        if self._has_cuda_only_code(module, nodes):
            self._cuda_only_guards(module, nodes, polarity, aliases)
        counts = _count_aliases(nodes)

        def flipped(node: cst.BaseExpression) -> Optional[bool]:
            """The tests a rename turns on Trainium: CUDA's, and comparisons of its device count."""
            found = polarity(node)
            return found if found is not None else _count_polarity(node, counts)

        portability = portability_of(context, module, nodes)
        regions = list(regions_either_way(nodes, flipped))
        # code a flip stops running on Trainium (the `else` of a CUDA test): judged for what it says of the
        # path it keeps the program out of, not for naming the device (portable.py)
        leaving = {(atom, root) for atom, region, how in regions if how == "fails" for root in region}
        leaving |= _branches_left(nodes, flipped)
        for atom, region, _how in regions:
            if atom in self.guards or atom in self.unsafe:
                continue
            found = None
            for root in region:
                found = portability.first_unportable([root], leaving=(atom, root) in leaving)
                if found is not None:
                    break
            if found is None:
                continue
            found = found if len(found) <= 60 else found[:57] + "..."
            for node in walk(atom):
                self.unsafe.setdefault(node, found)
            calls = [atom, *(n for n in walk(atom) if is_device_count_call(n))]
            for name in (n for n in walk(atom) if type(n) is cst.Name):  # `if use_cuda:`, `if n_gpu > 1:`
                calls += [*aliases.get(name.value, []), *counts.get(name.value, [])]
            for call in calls:
                if is_cuda_availability_test(call) or is_device_count_call(call):
                    self.unsafe_availability.setdefault(call.func, found)
        # tests whose value leaves the test (assigned, returned, passed on): judged where the value goes
        escaping = escaping_tests(nodes, lambda n: on_cuda_polarity(n) is not None, portability.first_unportable)
        for atom, found in escaping.items():
            if atom in self.guards or atom in self.unsafe:
                continue
            if not isinstance(found, Escape) and len(found) > 60:
                found = found[:57] + "..."
            for node in walk(atom):
                self.unsafe.setdefault(node, found)
            if is_cuda_availability_test(atom):
                self.unsafe_availability.setdefault(atom.func, found)

    def _cuda_only_guards(self, module, nodes, polarity, aliases) -> None:
        """The denylist's fast path: tests guarding code known to be CUDA-only are kept (NP720)."""
        functions = self._cuda_only_functions(module)
        for atom, region in regions_where(module, polarity, nodes):
            if atom in self.guards:
                continue
            found = self._first_cuda_only(nodes_in(region), functions)
            if found is not None:
                self.guards[atom] = found
                self.guarded[atom] = list(region)
                self.guard_nodes.update(walk(atom))
                calls = aliases.get(atom.value, []) if isinstance(atom, cst.Name) else [atom]
                for call in calls:
                    if is_cuda_availability_test(call):
                        self.kept_availability.setdefault(call.func, found)

    def availability_references(self, atom: cst.BaseExpression) -> list[cst.CSTNode]:
        """The ``torch.cuda.is_available`` references NP201 keeps (and reports) for a kept ``atom``: the
        call itself, or the calls assigned to the name the test reads."""
        return [func for func, _ in self.kept_availability.items() if func is getattr(atom, "func", None)
                or (isinstance(atom, cst.Name) and func in self._alias_funcs.get(atom.value, ()))]

    def _has_cuda_only_code(self, module: cst.Module, nodes) -> bool:
        """An import of CUDA-only code (the import tracker has them all; a package-relative import,
        which it does not bind, is looked at here), or a fully qualified use of one
        (``torch.cuda.graph(...)``, ``torch.utils.cpp_extension.load(...)``)."""
        for qualified in self.context.aliases.values():
            if covering_key(qualified, CUDA_ONLY) is not None or (
                    not qualified.startswith("torch") and _cuda_module_name(qualified.split(".")[-1])):
                return True
        if any(type(n) is cst.ImportFrom and n.relative and _cuda_only_import(n) is not None for n in nodes):
            return True
        seen = QUALIFIED_SEEN.get(self.context)
        if seen is not None:  # NP720 looked at every attribute during the pass
            return seen[0]
        return any(qualified_cuda_only(self.context, n) for n in nodes)

    def _what(self, node: cst.CSTNode, names: dict[str, tuple[str, str]]) -> Optional[tuple[str, str]]:
        if not isinstance(node, (cst.Name, cst.Attribute)) or not self.context.is_reference(node):
            return None
        qualname = self.context.qualname(node)
        if qualname is not None:
            key = covering_key(qualname, CUDA_ONLY)
            if key is not None:
                return CUDA_ONLY[key]
        dotted = dotted_name(node)
        if dotted is not None and dotted.split(".")[0] in names:
            return names[dotted.split(".")[0]]
        return None

    def _cuda_only_functions(self, module: cst.Module) -> dict[str, tuple[str, str]]:
        """Names that stand for CUDA-only code in this file: Triton kernels, modules built by
        ``cpp_extension.load``, modules imported as ``*_cuda`` / ``cuda_*``, and the functions that call them."""
        names: dict[str, tuple[str, str]] = {}
        bodies: dict[str, cst.CSTNode] = {}
        for node in walk(module):
            if isinstance(node, cst.FunctionDef):
                bodies[node.name.value] = node.body
                for decorator in node.decorators:
                    target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
                    if (self.context.qualname(target) or "") in TRITON_DECORATORS:
                        names[node.name.value] = ("a Triton kernel", "high")
            elif isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
                key = covering_key(self.context.qualname(node.value.func) or "", ("torch.utils.cpp_extension",))
                for target in node.targets:
                    if key is not None and isinstance(target.target, cst.Name):
                        names[target.target.value] = ("a CUDA extension", "high")
            elif isinstance(node, (cst.Import, cst.ImportFrom)) and not isinstance(node.names, cst.ImportStar):
                base = dotted_name(node.module) or "" if isinstance(node, cst.ImportFrom) and node.module else ""
                for alias in node.names:
                    full = ".".join(p for p in (base, dotted_name(alias.name) or "") if p)
                    if full.startswith("torch") or not _cuda_module_name(full.split(".")[-1]):
                        continue  # an extension module named like one (`selective_scan_cuda`, `numba.cuda`)
                    local = alias.asname.name if alias.asname is not None else None
                    local_name = local.value if isinstance(local, cst.Name) else full.split(".")[0 if not base else -1]
                    names[local_name] = ("a CUDA extension", "high")
        changed = True
        while changed:  # functions that call CUDA-only code are CUDA-only
            changed = False
            for name, body in bodies.items():
                if name in names:
                    continue
                found = self._first_cuda_only(walk(body), names)
                if found is not None:
                    names[name] = (found[1], found[2])
                    changed = True
        return names

    def _first_cuda_only(self, nodes, names) -> Optional[tuple[str, str, str]]:
        for node in nodes:
            imported = _cuda_only_import(node) if isinstance(node, (cst.Import, cst.ImportFrom)) else None
            if imported is not None:
                return source_of(node), *imported
            if isinstance(node, cst.Call):
                what = self._what(node.func, names) or (
                    self._what(node.func.value, names) if isinstance(node.func, cst.Subscript) else None)
                if what is not None:  # `kernel[grid](...)` launches a Triton kernel
                    return source_of(node.func if not isinstance(node.func, cst.Subscript) else node.func.value), *what
            elif isinstance(node, cst.With):
                for item in node.items:
                    what = self._what(item.item.func if isinstance(item.item, cst.Call) else item.item, names)
                    if what is not None:
                        return source_of(item.item), *what
        return None


def _branches_left(nodes, polarity) -> set:
    """(atom, branch) for the branch of an ``if`` / ternary that a flip of ``atom`` makes run less on
    Trainium: an atom among the ``and`` / ``or`` terms of a test makes it only truer when it turns True
    (``if not args.disable_cuda and torch.cuda.is_available(): ... else: args.gpu_index = -1``), so the
    ``else`` runs less (the body, for a negated atom), as the ``else`` of a plain ``if torch.cuda.is_available():``
    does. What the flip needs to run there is the other branch."""
    left = set()
    for node in nodes:
        kind = type(node)
        if kind is not cst.If and kind is not cst.IfExp:
            continue
        orelse = node.orelse.body if type(node.orelse) is cst.Else else node.orelse
        for term in guard_terms(node.test):
            found = term_polarity(term, polarity)
            if found is not None:
                root = orelse if found else node.body
                if root is not None:
                    left.add((guard_atom(term), root))
    return left


def _cuda_only_import(node) -> Optional[tuple[str, str]]:
    """``import triton``, ``from flash_attn import ...``, ``from .ops import median_filter_cuda``: an import of
    CUDA-only code, absolute or package-relative: (what it is, effort), else None."""
    if isinstance(node.names, cst.ImportStar):
        return None
    base = (dotted_name(node.module) or "") if isinstance(node, cst.ImportFrom) and node.module else ""
    for alias in node.names:
        full = ".".join(p for p in (base, dotted_name(alias.name) or "") if p)
        key = covering_key(full, CUDA_ONLY)
        if key is not None:
            return CUDA_ONLY[key]
        if not full.startswith("torch") and _cuda_module_name(full.split(".")[-1]):
            return "a CUDA extension", "high"
    return None


def qualified_cuda_only(context, node: cst.CSTNode) -> bool:
    return (isinstance(node, cst.Attribute) and node.attr.value in _QUALIFIED_ATTRS
            and covering_key(context.qualname(node) or "", CUDA_ONLY) is not None)


# context -> [whether a fully qualified CUDA-only name was seen], filled by NP720 during the batched pass
# (so the analysis need not walk the module again when NP720 runs)
QUALIFIED_SEEN: "weakref.WeakKeyDictionary[object, list[bool]]" = weakref.WeakKeyDictionary()


def unsafe_flip_note(guarded: str) -> str:
    """What NP102 / NP104 / NP201 add to a fix that flips a test deciding code not known to run on Trainium."""
    if isinstance(guarded, Escape):
        return f" (unsafe: {guarded})"
    shown = guarded if len(guarded) <= 30 else guarded[:27] + "..."
    return f" (unsafe: it guards `{shown}`, not known to run there)"


# The CUDA-only guards of a module, once per file and pass.
cuda_only_guards = PerFileAnalysis(CudaOnlyGuards)
