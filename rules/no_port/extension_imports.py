"""NP718: imports of compiled CUDA extension modules (``import selective_scan_cuda``, ``import amp_C``,
``from .ops import deform_conv_cuda``), reported at the import with the torch alternative.

An extension module built by nvcc is found by how such modules are named (``*_cuda``, ``*_cuda_*``,
``cuda_*``: ``tables.CUDA_EXTENSION_NAME_RE``), by the table of known ones whose name says nothing (apex's
``amp_C``, flash-attn's ``rotary_emb``, mmcv's ``_ext``), and, in the same file, by the name a
``cpp_extension.load(name=..., sources=[... .cu])`` gives it. An unguarded top-level import makes the code that
uses the module kernel code (``kernel_code.py``): a launcher or an ``autograd.Function`` that only wraps the
extension is kept unedited and folded into this finding, the module's other code is ported as usual.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.kept_scopes import keep_scope
from neuron_port.rules.helpers.names import dotted_name, walk
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.no_port.common import LOWER, GuardedRule, covers
from neuron_port.rules.no_port.kernel_code import KernelCode
from neuron_port.rules.no_port.tables import (CPP_EXTENSION_CALLS, CUDA_EXTENSION_DEFAULT, CUDA_EXTENSION_NAME_RE,
                                              CUDA_EXTENSIONS, NOT_CUDA_EXTENSIONS)
from neuron_port.rules.spec import Invalid, Valid
from neuron_port.rules.helpers.table_rule import covering_key

_LOAD_EXT = "mmcv.utils.ext_loader.load_ext"


def extension_advice(full: str, built: frozenset = frozenset()) -> Optional[tuple[str, str]]:
    """(advice, effort) when the dotted module name ``full`` is a compiled CUDA extension, else None."""
    key = covering_key(full, CUDA_EXTENSIONS)
    if key is not None:
        return CUDA_EXTENSIONS[key]
    if covers(full, NOT_CUDA_EXTENSIONS):
        return None
    last = full.split(".")[-1]
    if last in CUDA_EXTENSIONS:  # `from .ops import deform_conv_cuda`: the module's own name
        return CUDA_EXTENSIONS[last]
    if last in built or CUDA_EXTENSION_NAME_RE.match(last):
        return CUDA_EXTENSION_DEFAULT
    return None


def _built_names(module: cst.Module, context) -> frozenset:
    """Module names this file builds from CUDA sources (``load(name="fused", sources=["f.cu"])``)."""
    names = set()
    for node in walk(module):
        if type(node) is cst.Call and context.qualname(node.func) in CPP_EXTENSION_CALLS:
            for arg in node.args:
                if (arg.keyword is None and arg is node.args[0]) or (arg.keyword and arg.keyword.value == "name"):
                    value = string_value(arg.value)
                    if value:
                        names.add(value.split(".")[-1])
    return frozenset(names)


class CudaExtensionImport(GuardedRule):
    """Reports imports of compiled CUDA extension modules, with the torch alternative.

    ## What it does
    Reports an import of a module that nvcc built for NVIDIA GPUs: one named as such modules are
    (``selective_scan_cuda``, ``fused_layer_norm_cuda``, ``xentropy_cuda_lib``, ``from .ops import
    deform_conv_cuda``), a known one whose name says nothing (apex's ``amp_C``, flash-attn's ``rotary_emb``
    and ``dropout_layer_norm``, mmcv's ``_ext``), or one this file builds from ``.cu`` sources
    (``cpp_extension.load(name=...)``). The message gives the torch alternative. Where the import is at top
    level with no fallback, the code that uses the module (a launcher, an ``autograd.Function`` that only wraps
    it) is kept unedited and its findings are folded into this one; the rest of the module is ported.

    ## Why is this bad?
    The import fails on a Trainium host (the extension was built against CUDA and has no NeuronCore
    kernels), and so does every module that imports it.

    ## Example
    ```python
    import selective_scan_cuda

    out, x, *rest = selective_scan_cuda.fwd(u, delta, A, B, C, D, None, delta_bias, True)
    ```
    Use instead: the torch code the kernel fuses (here the reference scan), or an NKI kernel registered with
    ``@torch_neuronx.nki_op``.

    ## Fix safety
    No automatic fix. A guarded import (``try: ... except ImportError``) is reported one severity lower.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html (custom kernels -> NKI)
    - https://docs.pytorch.org/docs/stable/cpp_extension.html
    """

    CODE = "NP718"
    NAME = "cuda-extension-import"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "a compiled CUDA extension cannot be imported on Trainium"
    TRIGGERS = ("_cuda", "cuda_", "amp_C", "apex_C", "syncbn", "rotary_emb", "dropout_layer_norm", "_lib",
                "_ext", "cpp_extension")

    VALID = [
        Valid("import torch\nx = torch.zeros(2).cuda()\n"),
        Valid("from numba import cuda\n"),
        Valid("from utils import to_cuda\n\nbatch = to_cuda(batch)\n"),
    ]
    INVALID = [
        Invalid("import torch\nimport selective_scan_cuda\n\n\ndef scan(u, delta):\n"
                "    return selective_scan_cuda.fwd(u, delta)\n", None, message_contains="`selective_scan_cuda`"),
        Invalid("try:\n    import amp_C\nexcept ImportError:\n    amp_C = None\n", None, message_contains="foreach=True"),
        Invalid("from .ops import deform_conv_cuda\n\n\ndef dcn(x, w):\n    return deform_conv_cuda.forward(x, w)\n",
                None, message_contains="deform_conv2d"),
        Invalid("from torch.utils.cpp_extension import load\n\nfused = load(name='fused_op', sources=['f.cu'])\n"
                "import fused_op\n", None, message_contains="`fused_op`"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._found: list[tuple[cst.CSTNode, str, bool, bool]] = []  # (import statement, module, guarded, top level)
        self._depth = 0  # inside a function or class: not a top-level import

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._depth += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._depth -= 1

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._depth += 1

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._depth -= 1

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full:
                self._found.append((node, full, self.guarded(), self._depth == 0))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        base = dotted_name(node.module) if node.module is not None else ""
        for alias in node.names:
            name = dotted_name(alias.name)
            if name:
                self._found.append((node, f"{base}.{name}" if base else name, self.guarded(), self._depth == 0))

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node.func) == _LOAD_EXT and node.args and string_value(node.args[0].value) == "_ext":
            self._found.append((node, "mmcv._ext", self.guarded(), False))

    def lookup(self, qualname: str) -> Optional[str]:
        return None  # the import is reported, not each use

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._found:
            return
        builds = any(v.startswith("torch.utils.cpp_extension") for v in self.context.aliases.values())
        built = _built_names(original_node, self.context) if builds else frozenset()
        modules = _used_as_modules(original_node)
        reported: set[cst.CSTNode] = set()
        kept: list[tuple[cst.CSTNode, str]] = []
        for node, full, guarded, top in self._found:
            advice = extension_advice(full, built)
            if advice is None or node in reported or (
                    isinstance(node, cst.ImportFrom) and _local_name(node, full) not in modules):
                continue  # `from utils import to_cuda`: a name of a module, used as a function
            reported.add(node)
            text, effort = advice
            if top and not guarded:
                kept.append((node, full))
                continue
            self.report(node, f"`{full.split('.')[-1]}` is {_what(text)}" + (" (guarded: check the fallback)" if
                        guarded else ""), effort=effort, severity=LOWER[self.SEVERITY] if guarded else None)
        if not kept:
            return
        locals_ = {_local_name(node, full) for node, full in kept}
        kernel = KernelCode(self.context, original_node, uses=lambda name: name.value in locals_)
        for node, full in kept:
            text, effort = extension_advice(full, built)  # type: ignore[misc]
            what = _what(text)
            held = (f" (kept: {', '.join(f'`{n}`' for n in kernel.names[:2])}"
                    + (", ...)" if len(kernel.names) > 2 else ")")) if kernel.nodes and node is kept[0][0] else ""
            self.report(node, f"`{full.split('.')[-1]}` is {what}{held}", effort=effort)
        if kernel.nodes:
            keep_scope(self.context, self.CODE, kept[0][0], tuple(kernel.nodes))


def _used_as_modules(module: cst.Module) -> set[str]:
    """Names whose attributes are read (``ext.fwd(...)``) and that are never called themselves: what a
    ``from pkg import name`` binds is a module only where it is used as one."""
    read, called = set(), set()
    for node in walk(module):
        kind = type(node)
        if kind is cst.Attribute and type(node.value) is cst.Name:
            read.add(node.value.value)
        elif kind is cst.Call and type(node.func) is cst.Name:
            called.add(node.func.value)
    return read - called


def _what(advice: str) -> str:
    return "a CUDA extension: " + advice


def _local_name(node: cst.CSTNode, full: str) -> str:
    """The name an import binds for ``full``."""
    aliases = node.names if isinstance(node, (cst.Import, cst.ImportFrom)) else ()
    for alias in aliases:  # type: ignore[union-attr]
        name = dotted_name(alias.name) or ""
        if full == name or full.endswith("." + name):
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                return alias.asname.name.value
            return name.split(".")[0] if isinstance(node, cst.Import) else name
    return full.split(".")[-1]
