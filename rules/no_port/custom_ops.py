"""NP713 ``cuda-only-custom-op``: custom operators registered only for the CUDA dispatch key
(``torch.library.impl(lib, "op", "CUDA")``, ``Library.impl(..., "CUDA")``, ``register_kernel(op, "cuda")``,
``custom_op(..., device_types="cuda")``), which have no kernel on ``neuron`` (PrivateUse1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.kept_scopes import keep_scope
from neuron_port.rules.helpers.names import dotted_name, is_none, last_segment, walk
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.no_port.common import covers
from neuron_port.rules.no_port.tables import KERNEL_LIBRARIES
from neuron_port.rules.spec import Invalid, PythonRule, Valid

LIBRARY = frozenset({"torch.library.Library"})
IMPL = frozenset({"torch.library.impl"})
REGISTER_KERNEL = frozenset({"torch.library.register_kernel"})
CUSTOM_OP = frozenset({"torch.library.custom_op", "torch._library.custom_ops.custom_op"})
# device types / dispatch keys (lower-cased) whose kernel a neuron tensor can reach: its own backend,
# the composite kernels every backend uses, and CPU (TorchNeuron falls back to CPU for an op it has no
# kernel for: slow, but it runs). "" is a Library.impl without a key: CompositeImplicitAutograd.
REACHABLE = frozenset({"", "cpu", "default", "compositeimplicitautograd", "compositeexplicitautograd",
                       "compositeexplicitautogradnonfunctional", "privateuse1", "neuron"})
ALL_DEVICES = "*"  # device_types=None: one kernel for every device


@dataclass
class _Lib:
    namespace: Optional[str]
    dispatch_key: str


@dataclass(eq=False)
class _Registration:
    node: cst.CSTNode
    op: tuple[str, str]
    devices: set[str]  # lower-cased device types / dispatch keys, or {ALL_DEVICES}
    spelled: str  # as written, for the message


def _op_key(value: Optional[str], namespace: Optional[str], fallback: str) -> tuple[str, str]:
    """("ns", "op") for "ns::op" / "ns::op.overload", or for "op" in a library of namespace ``ns``."""
    if value is None:
        return ("?", fallback)
    if "::" in value:
        ns, _, name = value.partition("::")
        return (ns, name.split(".")[0])
    return (namespace or "?", value.split(".")[0])


def _devices(node: Optional[cst.BaseExpression]) -> Optional[set[str]]:
    """The device types a literal names ({ALL_DEVICES} for None); None when it is not a literal."""
    if node is None or is_none(node):
        return {ALL_DEVICES}
    value = string_value(node)
    if value is not None:
        return {value.lower()}
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        values = [string_value(e.value) for e in node.elements]
        if all(v is not None for v in values):
            return {v.lower() for v in values if v is not None}
    return None


class CudaOnlyCustomOp(PythonRule):
    """Reports custom operators whose only kernel is registered for CUDA.

    ## What it does
    Collects the kernel registrations of each custom operator in a file: ``torch.library.impl(lib,
    "op", "CUDA")`` and ``torch.library.impl("ns::op", "cuda")`` (call or decorator),
    ``lib.impl("op", fn, "CUDA")`` on a ``torch.library.Library`` instance (also a library created
    with ``dispatch_key="CUDA"``), ``@torch.library.register_kernel("ns::op", "cuda")``,
    ``@torch.library.custom_op("ns::op", ..., device_types="cuda")`` and ``@op.register_kernel("cuda")``
    on such an op. An operator registered for CUDA and for nothing a neuron tensor can reach (CPU,
    ``PrivateUse1`` / ``neuron``, a CompositeImplicitAutograd or CompositeExplicitAutograd kernel, a
    ``Library.impl`` without a key, ``device_types=None``) is reported at each CUDA registration.

    ## Why is this bad?
    The dispatcher picks a kernel by the tensors' dispatch key; ``neuron`` is PrivateUse1. An operator
    with only a CUDA kernel has nothing to run for a neuron tensor, and TorchNeuron's CPU fallback finds
    no CPU kernel either: the call raises ``NotImplementedError: Could not run 'ns::op' with arguments
    from the 'PrivateUse1' backend`` (or the CPU one). Where NP101 renames a lowercase ``"cuda"``
    device type to ``"neuron"``, the same Python kernel is registered for neuron: that runs only if its
    body is plain torch ops (not a CUDA extension, Triton or cupy, see NP701 and NP708).

    ## Example
    ```python
    lib = torch.library.Library("mylib", "DEF")
    lib.define("fused_gelu(Tensor x) -> Tensor")
    lib.impl("fused_gelu", fused_gelu_cuda, "CUDA")
    ```
    Use instead (a reference kernel every device can use; NKI for speed on Trainium):
    ```python
    lib.impl("fused_gelu", fused_gelu_cuda, "CUDA")
    lib.impl("fused_gelu", lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
             "CompositeImplicitAutograd")
    ```

    ## Fix safety
    No automatic fix: a neuron kernel has to be written. Register a torch-ops implementation for
    ``"PrivateUse1"`` (``"neuron"`` in ``register_kernel`` / ``custom_op``) or as a CPU /
    CompositeImplicitAutograd kernel, and, where speed matters, an NKI kernel registered with
    ``@torch_neuronx.nki_op``.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/__init__.py (neuron is the renamed PrivateUse1 backend), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/best-practices-pytorch-neuron.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/csrc/core/NeuronBindings.cpp (CPU
      fallback) and https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html (custom kernels -> NKI, ``@torch_neuronx.nki_op``)
    - https://docs.pytorch.org/docs/stable/library.html
    """

    CODE = "NP713"
    NAME = "cuda-only-custom-op"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = (
        "custom op `{op}` has a kernel only for CUDA ({spelled}): register one for \"PrivateUse1\" (neuron)"
    )
    KERNEL_NOTE = " (its body launches a GPU kernel: left as it is)"
    RENAMED_NOTE = " (NP101 renames it: fine for plain torch ops)"
    TRIGGERS = (r"\.[ \t]*library\b", r"library(?<!\wlibrary)[ \t]*\.[A-Za-z_]", r"library(?<!\wlibrary)\s+as\b")

    VALID = [
        Valid("import torch\nlib = torch.library.Library('mylib', 'DEF')\n"
              "lib.impl('gelu2', gelu_cuda, 'CUDA')\nlib.impl('gelu2', gelu_ref, 'CompositeImplicitAutograd')\n"),
        Valid("import torch\n\n@torch.library.custom_op('mylib::scale', mutates_args=())\n"
              "def scale(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n"),
        Valid("import torch\n\n@torch.library.register_kernel('mylib::scale', ('cpu', 'cuda'))\n"
              "def scale(x):\n    return x * 2\n"),
        Valid("import torch\ntorch.library.impl('mylib::scale', 'neuron', scale_ref)\n"),
    ]
    INVALID = [
        Invalid("import torch\nlib = torch.library.Library('mylib', 'DEF')\n"
                "lib.define('gelu2(Tensor x) -> Tensor')\nlib.impl('gelu2', gelu_cuda, 'CUDA')\n", None,
                message_contains="mylib::gelu2"),
        Invalid("import torch\nlib = torch.library.Library('mylib', 'IMPL')\n\n"
                "@torch.library.impl(lib, 'gelu2', 'CUDA')\ndef gelu2(x):\n    return x\n", None),
        Invalid("import torch\n\n@torch.library.register_kernel('mylib::scale', 'cuda')\n"
                "def scale(x):\n    return x * 2\n", None, message_contains="NP101"),
        Invalid("from torch.library import impl\n\n@impl('mylib::scale', 'cuda')\ndef scale(x):\n    return x\n",
                None),
        Invalid("import torch\n\n@torch.library.custom_op('mylib::scale', mutates_args=(), device_types='cuda')\n"
                "def scale(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n", None),
        Invalid("import torch\n\n@torch.library.custom_op('mylib::add', mutates_args=(), device_types='cuda')\n"
                "def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n    out = torch.empty_like(x)\n"
                "    add_kernel[(1,)](x, y, out, x.numel())\n    return out\n", None,
                message_contains="launches a GPU kernel"),
        Invalid("import torch\ncuda_lib = torch.library.Library('mylib', 'IMPL', 'CUDA')\n"
                "cuda_lib.impl('scale', scale_cuda)\n", None),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._libs: dict[str, _Lib] = {}  # local name (or attribute name) -> library
        self._custom_ops: dict[str, tuple[str, str]] = {}  # function / variable name -> op
        self._registrations: list[_Registration] = []
        self._decorated: dict[cst.CSTNode, cst.FunctionDef] = {}  # decorator call -> the function

    # -- libraries and custom ops ------------------------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if not isinstance(value, cst.Call):
            return
        names = [n for n in (last_segment(t.target) for t in node.targets) if n is not None]
        if self.context.qualname(value.func) in LIBRARY:
            ns = arg_named(value, "ns", 0)
            key = arg_named(value, "dispatch_key", 2)
            lib = _Lib(string_value(ns.value) if ns is not None else None,
                       (string_value(key.value) or "") if key is not None else "")
            for name in names:
                self._libs[name] = lib
        elif isinstance(value.func, cst.Call) and self.context.qualname(value.func.func) in CUSTOM_OP:
            # scale = torch.library.custom_op("mylib::scale", mutates_args=())(scale_impl)
            op = self._custom_op(value.func, names[0] if names else "?")
            for name in names:
                self._custom_ops[name] = op

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        for decorator in node.decorators:
            call = decorator.decorator
            if isinstance(call, cst.Call):
                self._decorated[call] = node
            if isinstance(call, cst.Call) and self.context.qualname(call.func) in CUSTOM_OP:
                self._custom_ops[node.name.value] = self._custom_op(call, node.name.value)

    def _launches_kernel(self, function: cst.FunctionDef) -> bool:
        """The body launches a GPU kernel: ``kernel[grid](...)`` or a call into a kernel library."""
        for node in walk(function.body):
            if isinstance(node, cst.Call) and (isinstance(node.func, cst.Subscript)
                                               or covers(self.context.qualname(node.func) or "", KERNEL_LIBRARIES)):
                return True
        return False

    def _custom_op(self, call: cst.Call, fallback: str) -> tuple[str, str]:
        name = arg_named(call, "name", 0)
        op = _op_key(string_value(name.value) if name is not None else None, None, fallback)
        arg = arg_named(call, "device_types")
        devices = _devices(arg.value) if arg is not None else {ALL_DEVICES}
        if devices is not None:
            self._add(call, op, devices, "device_types")
        return op

    # -- kernel registrations -----------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in IMPL:
            first = arg_named(node, "qualname", 0)
            lib = self._lib_of(first.value) if first is not None else None
            second = (self._string(arg_named(node, "types", 1)) or "").lower()
            if lib is not None or (first is not None and string_value(first.value) is None
                                   and second not in REACHABLE | {"cuda", "meta"}):
                # the deprecated form: impl(lib, "op", dispatch_key="")
                name = arg_named(node, "name", 1)
                key = arg_named(node, "dispatch_key", 2)
                self._add_key(node, _op_key(self._string(name), lib.namespace if lib else None, "?"), key, lib)
            else:
                types = arg_named(node, "types", 1)
                devices = _devices(types.value) if types is not None else None
                if devices is not None:
                    self._add(node, _op_key(self._string(first), None, "?"), devices, "types")
        elif qualname in REGISTER_KERNEL:
            op_arg = arg_named(node, "op", 0)
            devices = _devices(self._arg_value(node, "device_types", 1))
            if op_arg is not None and devices is not None:
                self._add(node, self._op_of(op_arg.value), devices, "device_types")
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value in ("impl", "register_kernel"):
            owner = last_segment(node.func.value)
            if node.func.attr.value == "impl" and owner in self._libs:
                lib = self._libs[owner]
                name = arg_named(node, "op_name", 0)
                key = arg_named(node, "dispatch_key", 2)
                self._add_key(node, _op_key(self._string(name), lib.namespace, "?"), key, lib)
            elif node.func.attr.value == "register_kernel" and owner in self._custom_ops:
                devices = _devices(self._arg_value(node, "device_types", 0))
                if devices is not None:
                    self._add(node, self._custom_ops[owner], devices, "device_types")

    @staticmethod
    def _arg_value(node: cst.Call, keyword: str, position: int) -> Optional[cst.BaseExpression]:
        arg = arg_named(node, keyword, position)
        return None if arg is None else arg.value

    @staticmethod
    def _string(arg: Optional[cst.Arg]) -> Optional[str]:
        return None if arg is None else string_value(arg.value)

    def _lib_of(self, node: cst.BaseExpression) -> Optional[_Lib]:
        name = last_segment(node)
        return self._libs.get(name) if name is not None and dotted_name(node) is not None else None

    def _op_of(self, node: cst.BaseExpression) -> tuple[str, str]:
        value = string_value(node)
        if value is not None:
            return _op_key(value, None, "?")
        name = last_segment(node)
        return self._custom_ops.get(name or "", ("?", name or "?"))

    def _add_key(self, node: cst.Call, op: tuple[str, str], key: Optional[cst.Arg], lib: Optional[_Lib]) -> None:
        if key is None:
            value: Optional[str] = lib.dispatch_key if lib is not None else ""
        else:
            value = string_value(key.value)
        if value is not None:
            self._add(node, op, {value.lower()}, "dispatch key")

    def _add(self, node: cst.CSTNode, op: tuple[str, str], devices: set[str], spelled: str) -> None:
        self._registrations.append(_Registration(node, op, devices, spelled))

    # -- the verdict --------------------------------------------------------------------------------
    def leave_Module(self, original_node: cst.Module) -> None:
        by_op: dict[tuple[str, str], set[str]] = {}
        for registration in self._registrations:
            by_op.setdefault(registration.op, set()).update(registration.devices)
        for registration in self._registrations:
            devices = by_op[registration.op]
            if "cuda" not in registration.devices or ALL_DEVICES in devices or devices & REACHABLE:
                continue
            ns, name = registration.op
            op = f"{ns}::{name}" if ns != "?" else name
            lowercase = registration.spelled != "dispatch key"
            spelled = "device type \"cuda\"" if lowercase else "dispatch key \"CUDA\""
            function = self._decorated.get(registration.node)
            if function is not None and self._launches_kernel(function):
                # a Triton (or other GPU) op: its "cuda" stays "cuda", nothing inside is edited
                self.report(registration.node, self.MESSAGE.format(op=op, spelled=spelled) + self.KERNEL_NOTE)
                keep_scope(self.context, self.CODE, registration.node, function)
                continue
            self.report(registration.node, self.MESSAGE.format(op=op, spelled=spelled)
                        + (self.RENAMED_NOTE if lowercase else ""))
