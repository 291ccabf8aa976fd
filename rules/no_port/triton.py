"""NP701: Triton kernels (``@triton.jit`` / ``autotune`` / ``heuristics``, once per kernel) and
``triton`` imports and uses.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.kept_scopes import keep_scope
from neuron_port.rules.no_port.common import LOWER, PackageRule, covers
from neuron_port.rules.no_port.tables import NKI_ROUTE, TRITON
from neuron_port.rules.spec import Invalid, Valid


class TritonKernel(PackageRule):
    """Reports Triton kernels and ``triton`` imports: Triton has no Trainium backend.

    ## What it does
    Reports every ``import triton`` / ``import triton.language as tl`` statement, every function
    decorated with ``@triton.jit`` / ``@triton.autotune`` / ``@triton.heuristics`` (once per kernel;
    the ``tl.*`` calls inside it are not reported one by one), and other ``triton.*`` uses
    (``triton.cdiv``, ``triton.testing.do_bench``) with their simple torch replacements.

    ## Why is this bad?
    Triton compiles to GPU code (PTX / AMDGPU); there is no Triton backend for NeuronCores, so the
    import fails on a Trainium host (or, when guarded, the kernel path is never taken).

    ## Example
    ```python
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr): ...
    ```
    Use instead: the plain torch expression (``x + y``) if the kernel only fuses elementwise ops
    (``torch.compile(backend="neuron")`` fuses them), or an NKI kernel registered as a PyTorch op:
    ```python
    @torch_neuronx.nki_op("mylib::add", mutates_args=())
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return add_kernel_nki(x, y)  # an @nki.jit kernel
    ```

    ## Fix safety
    No automatic fix: a kernel has to be rewritten (effort high). Guarded imports (``try/except
    ImportError``, ``if HAS_TRITON:``) are reported one severity lower.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (custom kernels -> NKI with ``@torch_neuronx.nki_op``)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/ (how to work with NKI)
    - https://github.com/aws-neuron/nki-library
    """

    CODE = "NP701"
    NAME = "triton-kernel"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "Triton has no Trainium backend: " + NKI_ROUTE
    TRIGGERS = ("triton",)
    LABEL = "Triton"
    ADVICE = TRITON
    KERNEL_DECORATORS = ("jit", "autotune", "heuristics")

    VALID = [
        Valid("import torch\ny = torch.nn.functional.gelu(x)\n"),
        Valid("from torch.utils._triton import has_triton\n"),
        Valid('import torch\nmodel = torch.compile(model, backend="neuron")\n', target="accelerator"),
    ]
    INVALID = [
        Invalid(
            "import triton\nimport triton.language as tl\n\n@triton.jit\n"
            "def add_kernel(x_ptr, n, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n"
            "    x = tl.load(x_ptr + pid)\n",
            None,
            message_contains="kernel `add_kernel`",
        ),
        Invalid("try:\n    import triton\nexcept ImportError:\n    triton = None\n", None, message_contains="guarded"),
        Invalid("import triton\ngrid = (triton.cdiv(n, 1024),)\n", None, message_contains="(a + b - 1) // b"),
        Invalid("import importlib.util\nif importlib.util.find_spec('triton'):\n    from triton import jit\n", None,
                target="accelerator"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._kernels: set[cst.CSTNode] = set()
        self._kernel_depth = 0

    def _triton_decorator(self, decorator: cst.Decorator) -> Optional[str]:
        target = decorator.decorator
        if isinstance(target, cst.Call):
            target = target.func
        qualname = self.context.qualname(target) or ""
        if covers(qualname, ("triton",)) and qualname.rsplit(".", 1)[-1] in self.KERNEL_DECORATORS:
            return qualname
        return None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self._kernel_depth:
            return
        for decorator in node.decorators:
            qualname = self._triton_decorator(decorator)
            if qualname is not None:
                self._kernels.add(node)
                self._kernel_depth += 1
                keep_scope(self.context, self.CODE, decorator, node)  # nothing inside a kernel is edited
                guarded = self.guarded()
                self.report(
                    decorator,
                    f"Triton kernel `{node.name.value}` (@{qualname.split('.', 1)[-1]}): {NKI_ROUTE}"
                    + (self.GUARDED_NOTE if guarded else ""),
                    effort="high",
                    severity=LOWER[self.SEVERITY] if guarded else None,
                )
                return

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if original_node in self._kernels:
            self._kernel_depth -= 1

    def reference_key(self, node: cst.BaseExpression) -> Optional[tuple[str, str]]:
        if self._kernel_depth:  # inside a kernel only the kernel itself is reported
            return None
        return super().reference_key(node)
