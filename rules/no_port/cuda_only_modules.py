"""NP717: modules and kernel functions that are CUDA-only as a whole, reported once and not edited inside.

A module that imports a GPU kernel language or library (``tables.KERNEL_LIBRARIES``) at top level, with
no fallback, cannot be imported on a Trainium host: whatever device tests, launch wrappers and kernel
preconditions it holds serve that library, and rewriting them (``assert all(t.is_cuda ...)`` into
``is_neuron``) inverts what they assert. A function decorated by such a library is a kernel. Both are
decided by construction, once per file, and declared kept (``helpers/kept_scopes.py``): the engine applies
no fix inside and folds the findings there into this one.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.kept_scopes import keep_scope
from neuron_port.rules.helpers.names import dotted_name, walk
from neuron_port.rules.no_port.common import covers
from neuron_port.rules.no_port.tables import KERNEL_LIBRARIES, NKI_ROUTE
from neuron_port.rules.spec import Invalid, PythonRule, Valid

_CUDA_WORD = re.compile(r"cuda", re.IGNORECASE)


def _imported(statement: cst.BaseSmallStatement) -> Optional[str]:
    """The kernel library a top-level import statement brings in (None when it brings in none)."""
    if isinstance(statement, cst.Import):
        for alias in statement.names:
            full = dotted_name(alias.name)
            if full is not None and covers(full, KERNEL_LIBRARIES):
                return full
    elif isinstance(statement, cst.ImportFrom) and not statement.relative and statement.module is not None:
        module = dotted_name(statement.module)
        if module is None:
            return None
        if covers(module, KERNEL_LIBRARIES):
            return module
        if not isinstance(statement.names, cst.ImportStar):
            for alias in statement.names:
                full = f"{module}.{dotted_name(alias.name)}"
                if covers(full, KERNEL_LIBRARIES):
                    return full
    return None


def cuda_references(module: cst.Module) -> int:
    """Names, attributes and strings that mention CUDA in ``module`` (what a reviewer would have read)."""
    count = 0
    for node in walk(module):
        if isinstance(node, cst.Name) and _CUDA_WORD.search(node.value):
            count += 1
        elif isinstance(node, cst.SimpleString) and _CUDA_WORD.search(node.value):
            count += 1
    return count


class CudaOnlyModule(PythonRule):
    """Reports a module (or a kernel function) that is CUDA-only as a whole, once, and keeps it unedited.

    ## What it does
    A module whose top level imports a GPU kernel language or library with no fallback (Triton,
    TileLang, CuTe / CUTLASS, Helion, CuPy, PyCUDA, cuda-python, ``numba.cuda``; CUDA extension builds
    stay NP708's) is reported once, on that import, with the number of CUDA references it holds; no fix is
    applied anywhere inside it, and the findings of the other rules there are folded into this one. A
    function decorated by one of these libraries in an otherwise portable module (``@cuda.jit``,
    ``@tilelang.jit``, ``@cute.kernel``; Triton kernels are NP701's) is kept the same way.

    ## Why is this bad?
    Such a module cannot even be imported on a Trainium host. Its device tests and preconditions
    (``assert all(t.is_cuda for t in tensors)``, ``if x.device.type == "cuda"`` before a launch) say
    "this is the CUDA path": renaming them to ``neuron`` inverts them, and the review of the port drowns
    in edits to code that stays GPU-only.

    ## Example
    ```python
    import triton
    import triton.language as tl

    def add(x, y):
        assert x.is_cuda and y.is_cuda
        ...
    ```
    Use instead: keep the module for GPUs and give the callers a torch path for ``neuron`` (the torch
    expression, or an NKI kernel registered with ``@torch_neuronx.nki_op``).

    ## Fix safety
    No automatic fix; it prevents the other rules' fixes inside the module.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html (custom kernels -> NKI)
    """

    CODE = "NP717"
    NAME = "cuda-only-module"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "CUDA-only module"
    TRIGGERS = ("triton", "tilelang", "cutlass", "helion", "cupy", "pycuda", r"numba", r"cuda\.bindings",
                r"cuda\.core")

    VALID = [
        Valid("try:\n    import triton\nexcept ImportError:\n    triton = None\n"),
        Valid("import torch\nfrom torch.utils.cpp_extension import CppExtension\n"),
        Valid("import numba\n\n@numba.njit\ndef f(x):\n    return x\n"),
    ]
    INVALID = [
        Invalid("import torch\nimport triton\n\ndef add(x, y):\n    assert x.is_cuda and y.is_cuda\n"
                "    return x + y\n", None, message_contains="2 CUDA references"),
        Invalid("import cupy as cp\n", None, message_contains="CUDA-only module (imports `cupy`"),
        Invalid("import torch\n\ntry:\n    from numba import cuda\nexcept ImportError:\n    cuda = None\n\n"
                "@cuda.jit\ndef scale(x, out):\n    out[0] = x[0]\n", None, message_contains="kernel `scale`"),
    ]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        for decorator in node.decorators:
            target = decorator.decorator
            qualname = self.context.qualname(target.func if isinstance(target, cst.Call) else target) or ""
            if covers(qualname, KERNEL_LIBRARIES) and not covers(qualname, ("triton",)):
                self.report(decorator, f"CUDA kernel `{node.name.value}` (@{qualname}): left as it is; "
                            + NKI_ROUTE)
                keep_scope(self.context, self.CODE, decorator, node)
                return

    def leave_Module(self, original_node: cst.Module) -> None:
        for statement in original_node.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue  # imports under try/if have a fallback: the module is not CUDA-only as a whole
            for small in statement.body:
                library = _imported(small)
                if library is None:
                    continue
                count = cuda_references(original_node)
                self.report(small, f"CUDA-only module (imports `{library}` at top level, {count} CUDA "
                            f"reference{'s' * (count != 1)}): not edited inside; give its callers a torch path")
                keep_scope(self.context, self.CODE, small, original_node)
                return
