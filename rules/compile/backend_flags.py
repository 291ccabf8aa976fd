"""NP407 ``cuda-backend-flag`` (cuDNN, TF32 and cuBLAS settings) and NP408 ``sdpa-kernel-context`` (SDPA
kernel-selection contexts): CUDA library settings that have no effect on Trainium."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.compile.common import StatementRule
from neuron_port.rules.compile.tables import CUDA_FLAG_ASSIGNMENTS, CUDA_FLAG_CALLS, CUDA_FLAG_CONTEXTS, SDPA_CONTEXTS
from neuron_port.rules.spec import Invalid, PythonRule, Valid


class CudaBackendFlag(StatementRule):
    """Reports cuDNN, TF32 and cuBLAS settings, which have no effect on Trainium.

    ## What it does
    Finds assignments to ``torch.backends.cudnn.benchmark`` / ``deterministic`` / ``allow_tf32`` /
    ``enabled``, ``torch.backends.cuda.matmul.allow_tf32`` and the other cuBLAS/cuDNN precision flags,
    and statement calls of ``torch.set_float32_matmul_precision(...)`` and
    ``torch.backends.cuda.enable_flash_sdp(...)`` & co., and offers to remove the statement.
    ``with torch.backends.cudnn.flags(...)`` blocks are reported only. So are reads of the flags
    (``if torch.backends.cuda.matmul.allow_tf32:``, ``print(torch.backends.cudnn.benchmark)``), except
    a plain save (``old = torch.backends.cudnn.benchmark``, whose restore is an assignment). Neuron target
    only: on the accelerator target the flags still matter on GPUs.

    ## Why is this bad?
    They configure NVIDIA libraries (cuDNN autotuning, TF32 tensor-core math, cuBLAS reductions, the
    CUDA SDPA kernel choice). Trainium has none of them: neuron kernels come from the Neuron compiler and
    follow the tensor dtypes, and no Neuron documentation gives these flags a meaning (not confirmed
    either way). Left in place they suggest a speed-up or a determinism that is not there; for
    reproducibility use ``torch.use_deterministic_algorithms(True)``.

    ## Example
    ```python
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    ```
    Use instead: nothing (delete the lines); use bf16 autocast for fast matmuls.

    ## Fix safety
    Unsafe: removing the statements is harmless on Trainium but changes speed or determinism if the
    file still runs on a GPU, and a flag may be read back later. A statement with a comment line above
    it is reported without a fix, so no comment is lost. A read of a flag is reported without a fix:
    what replaces the branch (or the log line) depends on the code.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst ("treat as no-ops to remove"; Neuron docs silent)
    - https://docs.pytorch.org/docs/stable/backends.html
    """

    CODE = "NP407"
    NAME = "cuda-backend-flag"
    SEVERITY = "info"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "low"
    MESSAGE = "`{name}` has no effect on Trainium: {why}"
    TRIGGERS = ('cuda', 'cudnn', 'float32_matmul_precision')
    TARGETS = ("neuron",)

    VALID = [
        Valid("import torch\ntorch.use_deterministic_algorithms(True)\n"),
        Valid("import torch\nif torch.backends.cudnn.is_available():\n    pass\n"),
        Valid("import torch\nold = torch.backends.cudnn.benchmark\n"),
    ]
    INVALID = [
        Invalid("import torch\ntorch.backends.cudnn.benchmark = True\n", None),
        Invalid(
            "import torch\n\ntorch.backends.cudnn.benchmark = True  # faster convs\n"
            "torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True\n"
            "torch.set_float32_matmul_precision('high')\n\nmodel = Net()\n",
            "import torch\n\nmodel = Net()\n",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch\ntorch.backends.cudnn.deterministic = True\n",
            "import torch\n",
            unsafe_fixes=True,
            message_contains="use_deterministic_algorithms",
        ),
        Invalid(
            "from torch.backends import cudnn\nif args.benchmark: cudnn.benchmark = True\n",
            "from torch.backends import cudnn\nif args.benchmark: pass\n",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch as th\nth.backends.cuda.enable_flash_sdp(True)\n",
            "import torch as th\n",
            unsafe_fixes=True,
        ),
        Invalid("import torch\nwith torch.backends.cudnn.flags(enabled=False):\n    y = f(x)\n", None),
        Invalid("import torch\nif torch.backends.cuda.matmul.allow_tf32:\n    print('TF32 on')\n", None,
                message_contains="is read here"),
        Invalid("import torch\nlogger.info('tf32=%s', torch.backends.cuda.matmul.allow_tf32)\n", None),
    ]

    def match(self, small: cst.BaseSmallStatement) -> Optional[str]:
        assigned = self.assigned(small)
        if assigned is not None and assigned[0] in CUDA_FLAG_ASSIGNMENTS:
            return self.MESSAGE.format(name=assigned[0], why=CUDA_FLAG_ASSIGNMENTS[assigned[0]])
        called = self.called(small)
        if called is not None and called[0] in CUDA_FLAG_CALLS:
            return self.MESSAGE.format(name=called[0], why=CUDA_FLAG_CALLS[called[0]])
        return None

    READ_MESSAGE = (
        "`{name}` is read here, but it has no effect on Trainium ({why}): drop the test (or the log)"
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._not_reads: set[cst.CSTNode] = set()  # targets, plain saves, statements reported whole
        self._matched_lines = 0

    def _statement(self, owner) -> None:
        if any(self.match(small) is not None for small in owner.body):
            self._matched_lines += 1
            self._not_reads.add(owner)
        super()._statement(owner)

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        if original_node in self._not_reads:
            self._matched_lines -= 1

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite) -> None:
        if original_node in self._not_reads:
            self._matched_lines -= 1

    def visit_Assign(self, node: cst.Assign) -> None:
        self._not_reads.update(t.target for t in node.targets)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self._not_reads.add(node.value)  # old = torch.backends.cudnn.benchmark: saved to be restored

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._not_reads.add(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._not_reads.add(node.target)

    def _read(self, node: cst.BaseExpression) -> None:
        if self._matched_lines:
            return
        qualname = self.context.qualname(node)  # asked before the set: a node's hash is a Python call
        if qualname in CUDA_FLAG_ASSIGNMENTS and node not in self._not_reads:
            self.report(node, self.READ_MESSAGE.format(name=qualname, why=CUDA_FLAG_ASSIGNMENTS[qualname]),
                        effort="low")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._read(node)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.context.aliases:
            self._read(node)

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in CUDA_FLAG_CONTEXTS:
            self.report(node, self.MESSAGE.format(name=qualname, why=CUDA_FLAG_CONTEXTS[qualname]) +
                        "; the `with` can go", effort="low")


class SdpaKernelContext(PythonRule):
    """Reports SDPA kernel-selection contexts, which have no effect on Trainium.

    ## What it does
    Reports ``with torch.backends.cuda.sdp_kernel(...)`` (deprecated) and
    ``with torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION)`` (and their decorator or call
    uses). Neuron target only.

    ## Why is this bad?
    These contexts choose among the CUDA implementations of ``scaled_dot_product_attention`` (flash,
    memory-efficient, cuDNN, math). On Trainium, SDPA dispatches to its own NKI flash-attention path
    and ignores the selection, so the context has no effect (``sdp_kernel`` only adds a
    FutureWarning). Code that forces the math backend for a numerical reason should be re-checked on
    Trainium.

    ## Example
    ```python
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ```
    Use instead:
    ```python
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ```

    ## Fix safety
    No automatic fix: removing a ``with`` means dedenting its body, and the context still matters when
    the file runs on a GPU.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (sdp_kernel benign on Neuron; SDPA -> NKI flash backend)
    - https://docs.pytorch.org/docs/stable/generated/torch.nn.attention.sdpa_kernel.html
    """

    CODE = "NP408"
    NAME = "sdpa-kernel-context"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = (
        "`{name}` selects a CUDA attention kernel and has no effect on Trainium (SDPA picks its NKI path): the "
        "context can go"
    )
    TRIGGERS = ("sdp_kernel", "sdpa_kernel")
    TARGETS = ("neuron",)

    VALID = [
        Valid("import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)\n"),
        Valid("from torch.nn.attention import sdpa_kernel, SDPBackend\n"),
    ]
    INVALID = [
        Invalid(
            "from torch.nn.attention import sdpa_kernel, SDPBackend\n"
            "with sdpa_kernel(SDPBackend.FLASH_ATTENTION):\n    y = attn(q, k, v)\n",
            None,
        ),
        Invalid(
            "import torch\nwith torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False):\n"
            "    y = attn(q, k, v)\n",
            None,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in SDPA_CONTEXTS:
            self.report(node, self.MESSAGE.format(name=qualname))
