"""NP717: kernel code and modules that are CUDA-only, reported once and not edited inside.

A module that imports a GPU kernel library (``tables.KERNEL_LIBRARIES``) at top level, with no fallback,
cannot be imported on a Trainium host, and its kernel code (the kernels, their launchers, what only they
need: ``kernel_code.py``, decided by dependence) serves that library: rewriting its device tests and launch
preconditions (``assert all(t.is_cuda ...)`` into ``is_neuron``) inverts what they assert. That code is
declared kept (``helpers/kept_scopes.py``): the engine applies no fix inside and folds the findings there into
this one; the module's other code (a model, a training loop) is ported and reported as usual. A module that is
kernel code as a whole is one kept module. A function decorated by such a library elsewhere is a kernel, kept
the same way.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.kept_scopes import keep_scope
from neuron_port.rules.helpers.names import dotted_name, source_of, walk
from neuron_port.rules.no_port.common import covers
from neuron_port.rules.no_port.kernel_code import KernelCode
from neuron_port.rules.no_port.tables import (
    CUDA_ONLY_PACKAGE_ADVICE,
    CUDA_ONLY_PACKAGES,
    KERNEL_LIBRARIES,
    NKI_ROUTE,
)
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


def cuda_references(module: cst.CSTNode) -> int:
    """Names, attributes and strings that mention CUDA in ``module`` (or in one statement of it) (what a reviewer would have read)."""
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
    TileLang, CuTe / CUTLASS, Helion, CuPy, PyCUDA, cuda-python, ``numba.cuda``, TensorRT's ``tensorrt`` /
    ``torch_tensorrt``, whose engines run on NVIDIA GPUs only; CUDA extension builds
    stay NP708's) is reported once, on that import, with its kernel code: the functions that use the
    library (the ``@triton.jit`` kernels), their launchers (``kernel[grid](...)``), what only they need,
    and classes made of them. No fix is applied inside that code, and the findings of the other rules there
    are folded into this one (each keeps its place: related locations in JSON and SARIF, listed under it
    with ``--verbose``). The rest of the module (a model that calls the launcher, a training loop) is
    ported and reported at its lines as usual; a module that is all kernel code is one kept module. A
    function decorated by one of these libraries in an otherwise portable module (``@cuda.jit``,
    ``@tilelang.jit``, ``@cute.kernel``; Triton kernels are NP701's) is kept the same way.

    A call into a package that runs on NVIDIA GPUs or the CPU and has no Trainium build (Isaac Gym and
    IsaacGymEnvs, Isaac Lab, NVIDIA DALI, RAPIDS cuDF / cuML / cuGraph: ``tables.CUDA_ONLY_PACKAGES``) is
    reported once, and the device values passed into it (its arguments that mention CUDA:
    ``sim_device="cuda:0" if torch.cuda.is_available() else "cpu"``) are kept: they are the package's
    device, not the program's choice, and on a Trainium host their own tests pick the CPU. The module's
    portable code (the model, the optimizer, the program's ``device``) is ported as usual; move the
    tensors the package returns to the model's device. A device argument that is a name (``sim_device=device``)
    is reported with the same advice: give it a CUDA or CPU device.

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
        add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, ...)
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
                r"cuda\.core", "tensorrt", "isaacgym", "isaaclab", r"omni\.isaac", "dali", "cudf",
                "cuml", "cugraph")

    VALID = [
        Valid("try:\n    import triton\nexcept ImportError:\n    triton = None\n"),
        Valid("import torch\nfrom torch.utils.cpp_extension import CppExtension\n"),
        Valid("import numba\n\n@numba.njit\ndef f(x):\n    return x\n"),
        Valid("import isaacgymenvs\n\nenvs = isaacgymenvs.make(task='Ant', num_envs=4, headless=True)\n"),
    ]
    INVALID = [
        Invalid("import torch\nimport triton\n\ndef add(x, y):\n    assert x.is_cuda and y.is_cuda\n"
                "    grid = (triton.cdiv(x.numel(), 1024),)\n    return x + y\n", None,
                message_contains="2 CUDA references"),
        Invalid("import cupy as cp\n", None, message_contains="CUDA-only module (imports `cupy`"),
        # a TensorRT engine's device stays CUDA's (the training code beside it is ported by the other rules)
        Invalid("import tensorrt as trt\nimport torch\n\ndef load(path):\n"
                "    runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))\n"
                "    device = torch.device('cuda:0')\n    return runtime, device\n\n"
                "def train(model):\n    return model.cuda()\n", None,
                message_contains="kernel code (`load`; imports `tensorrt`"),
        Invalid("import torch\nimport triton\n\n@triton.jit\ndef k(x_ptr):\n    pass\n\ndef launch(x):\n"
                "    assert x.is_cuda\n    k[(1,)](x)\n\ndef model_input():\n"
                "    return torch.zeros(4, dtype=torch.float64)\n", None,
                message_contains="CUDA-only kernel code (`k`, `launch`; imports `triton`"),
        # a GPU simulator's devices stay CUDA's or the CPU's; the model's device beside them is ported
        Invalid(
            """
            import isaacgymenvs
            import torch

            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            envs = isaacgymenvs.make(
                seed=1,
                task="Ant",
                sim_device="cuda:0" if torch.cuda.is_available() else "cpu",
                graphics_device_id=0 if torch.cuda.is_available() else -1,
            )
            agent = torch.nn.Linear(4, 2).to(device)
            """,
            None,  # NP717 alone edits nothing; with every rule the device line is ported (test_cuda_only_packages.py)
            message_contains="device arguments (`sim_device`, `graphics_device_id`) are kept",
            not_runnable="needs isaacgymenvs, a CUDA-only simulator (tests/rules/test_cuda_only_packages.py runs it "
                         "against a stand-in)",
        ),
        Invalid("import isaacgymenvs\nimport torch\n\ndevice = torch.device('cpu')\n"
                "envs = isaacgymenvs.make(task='Ant', sim_device=device)\n", None,
                message_contains="pass it a CUDA or CPU device"),
        Invalid("import torch\n\ntry:\n    from numba import cuda\nexcept ImportError:\n    cuda = None\n\n"
                "@cuda.jit\ndef scale(x, out):\n    out[0] = x[0]\n", None, message_contains="kernel `scale`"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        # a call into a package with no Trainium build (a GPU simulator): the device values handed to it are
        # its own (CUDA or the CPU), not the program's device choice; kept, the rest of the module is ported
        qualname = self.context.qualname(node.func) or ""
        if not covers(qualname, CUDA_ONLY_PACKAGES):
            return
        kept = [arg for arg in node.args if cuda_references(arg.value)]
        by_name = [arg for arg in node.args if arg not in kept and arg.keyword is not None
                   and "device" in arg.keyword.value.lower() and not isinstance(arg.value, cst.BaseNumber)]
        if not kept and not by_name:
            return
        shown = ", ".join(f"`{a.keyword.value}`" if a.keyword is not None else f"`{source_of(a.value)[:20]}`"
                          for a in kept[:2]) + (", ..." if len(kept) > 2 else "")
        if kept:
            message = (f"`{qualname}` {CUDA_ONLY_PACKAGE_ADVICE}: its device arguments ({shown}) are kept; move "
                       "its results to the model's device")
        else:
            names = ", ".join(f"`{a.keyword.value}`" for a in by_name[:2])
            message = (f"`{qualname}` {CUDA_ONLY_PACKAGE_ADVICE}: pass it a CUDA or CPU device ({names}); move "
                       "its results to the model's device")
        self.report(node.func, message, severity="warning", effort="medium")
        if kept:
            keep_scope(self.context, self.CODE, node.func, tuple(arg.value for arg in kept))

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
        imports: list[cst.CSTNode] = []  # the top-level statements importing a kernel library
        first: Optional[tuple[cst.BaseSmallStatement, str]] = None
        for statement in original_node.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue  # imports under try/if have a fallback: the module is not CUDA-only as a whole
            for small in statement.body:
                library = _imported(small)
                if library is not None:
                    imports.append(statement)
                    first = first or (small, library)
        if first is None:
            return
        small, library = first
        kernel = KernelCode(self.context, original_node)
        scope = tuple(dict.fromkeys([*imports, *kernel.nodes]))
        if kernel.whole_module:
            count = cuda_references(original_node)
            self.report(small, f"CUDA-only module (imports `{library}` at top level, {count} CUDA "
                        f"reference{'s' * (count != 1)}): not edited inside; give its callers a torch path")
            keep_scope(self.context, self.CODE, small, original_node)
            return
        if not kernel.nodes:
            self.report(small, f"imports `{library}` at top level, and no code of the module uses it: remove the "
                        "import (it fails on a Trainium host)", severity="warning",
                        effort="low")
            return
        count = sum(cuda_references(node) for node in kernel.nodes)
        shown = ", ".join(f"`{name}`" for name in kernel.names[:3]) + (", ..." if len(kernel.names) > 3 else "")
        self.report(small, f"CUDA-only kernel code ({shown}; imports `{library}`, {count} CUDA "
                    f"reference{'s' * (count != 1)}): not edited, the rest is ported; make the import optional")
        keep_scope(self.context, self.CODE, small, scope)
