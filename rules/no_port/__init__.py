"""NP7xx: CUDA-only code with no automatic port.

Codes (stable):

- NP701 ``triton-kernel``: Triton kernels (``@triton.jit``) and ``triton`` imports and uses.
- NP702 ``flash-attn``: the ``flash_attn`` package.
- NP703 ``xformers``: the ``xformers`` package.
- NP704 ``apex``: NVIDIA apex (``apex.amp``, ``FusedAdam``, ``FusedLayerNorm``, apex DDP).
- NP705 ``transformer-engine``: NVIDIA TransformerEngine.
- NP706 ``deepspeed``: DeepSpeed (also ``TrainingArguments(deepspeed=...)``, ``DeepSpeedPlugin``).
- NP707 ``bitsandbytes``: the ``bitsandbytes`` package (HF arguments that use it are NP605).
- NP708 ``cuda-extension``: ``torch.utils.cpp_extension`` ``load`` / ``load_inline`` / ``CUDAExtension``.
- NP709 ``cuda-source-file``: ``.cu`` / ``.cuh`` sources named in Python (and, by the tree discovery,
  ``.cu`` files themselves).
- NP710 ``nvtx-package``: the ``nvtx`` package (``torch.cuda.nvtx`` is NP202).
- NP711 ``gpu-monitoring``: ``nvidia-smi`` subprocesses, pynvml / GPUtil / gpustat / nvitop.
- NP712 ``profiler-activity-cuda``: ``ProfilerActivity.CUDA`` -> ``ProfilerActivity.PrivateUse1``.

Each package is reported once per import statement and once per use (the outermost dotted reference;
inside a Triton kernel only the kernel itself is reported), with an effort level and the Neuron route.
Imports and uses inside the body of a ``try:`` whose handler catches ``ImportError`` (or a broader
exception), or of an ``if`` that tests availability (``if is_flash_attn_2_available():``,
``if importlib.util.find_spec("triton"):``, ``if HAS_TRITON:``, ``if flash_attn is not None:``), are
reported one severity lower: the program has a fallback, which still has to be checked. CUDA graphs
are NP409. Facts: shared/torchneuron.md section 7.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.spec import Invalid, PythonRule, Valid
from neuron_port.rules.helpers.names import dotted_name
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.guards import GuardedBlocks
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.no_port.tables import (
    APEX,
    AVAILABILITY_CALL_RE,
    AVAILABILITY_FLAG_RE,
    BITSANDBYTES,
    CPP_EXTENSION_CALLS,
    CUDA_SOURCE_RE,
    DEEPSPEED,
    FLASH_ATTN,
    GPU_MONITORING,
    GUARD_EXCEPTIONS,
    NKI_ROUTE,
    NVIDIA_SMI_ADVICE,
    NVTX,
    SHELL_CALLS,
    TRANSFORMER_ENGINE,
    TRITON,
    XFORMERS,
    Advice,
)

LOWER = {"error": "warning", "warning": "info", "info": "info"}


def _last_segment(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def _catches_import_errors(handler: cst.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = [e.value for e in handler.type.elements] if isinstance(handler.type, cst.Tuple) else [handler.type]
    return any(_last_segment(t) in GUARD_EXCEPTIONS for t in types)


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _is_none(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


class _GuardedRule(GuardedBlocks, PythonRule):
    """Tracks whether the node being visited sits in a guarded block (optional import or availability
    check) so reports there get a lower severity."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._guarded_blocks: set[cst.CSTNode] = set()
        self._guarded_nodes: set[cst.CSTNode] = set()
        self._guard_depth = 0
        self._skip: set[cst.CSTNode] = set()  # references that are not uses (tests, assignment targets)

    def _is_availability_test(self, test: cst.BaseExpression) -> bool:
        stack: list[cst.CSTNode] = [test]
        while stack:
            node = stack.pop()
            if isinstance(node, (cst.Call, cst.Name, cst.Attribute)) and (
                self.context.qualname(node.func if isinstance(node, cst.Call) else node) or ""
            ).startswith("torch."):
                continue  # torch.cuda.is_available() is a device test (NP2xx), not a package check
            stack.extend(node.children)
            if isinstance(node, cst.Call):
                last = _last_segment(node.func)
                if last is not None and AVAILABILITY_CALL_RE.match(last):
                    return True
            elif isinstance(node, (cst.Name, cst.Attribute)):
                last = _last_segment(node)
                if last is not None and AVAILABILITY_FLAG_RE.match(last):
                    return True
            elif isinstance(node, cst.Comparison):
                if any(isinstance(c.operator, cst.IsNot) and _is_none(c.comparator) for c in node.comparisons):
                    return True
        return False

    def _skip_test_references(self, test: cst.BaseExpression) -> None:
        if any(isinstance(n, cst.Comparison) and any(_is_none(c.comparator) for c in n.comparisons)
               for n in _walk(test)):
            self._skip.update(n for n in _walk(test) if isinstance(n, (cst.Name, cst.Attribute)))

    def visit_Try(self, node: cst.Try) -> None:
        if any(_catches_import_errors(h) for h in node.handlers):
            self._guarded_blocks.add(node.body)

    def visit_If(self, node: cst.If) -> None:
        if self._is_availability_test(node.test):
            self._guarded_blocks.add(node.body)
        self._skip_test_references(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self._is_availability_test(node.test):
            self._guarded_nodes.update(_walk(node.body))
        self._skip_test_references(node.test)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        # `bnb is not None` / `flash_attn is None` test for the package: not a use
        if any(isinstance(c.operator, (cst.Is, cst.IsNot)) and _is_none(c.comparator) for c in node.comparisons):
            self._skip.add(node.left)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._skip.add(node.target)  # `flash_attn_func = None` in a fallback is not a use

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._skip.add(node.target)

    def guarded(self, node: Optional[cst.CSTNode] = None) -> bool:
        return self._guard_depth > 0 or (node is not None and node in self._guarded_nodes)

    def severity_for(self, node: Optional[cst.CSTNode] = None) -> Optional[str]:
        return LOWER[self.SEVERITY] if self.guarded(node) else None


def _matches(qualname: str, prefixes) -> bool:
    return any(qualname == p or qualname.startswith(p + ".") for p in prefixes)


def _advice_for(qualname: str, table: Advice) -> tuple[str, str]:
    best = None
    for key in table:
        if (qualname == key or qualname.startswith(key + ".")) and (best is None or len(key) > len(best)):
            best = key
    if best is None:
        best = next(iter(table))
    return table[best]


class _PackageRule(_GuardedRule):
    """One package with no Neuron port: every import statement and every use is reported."""

    LABEL: str = ""
    ADVICE: Advice = {}
    PACKAGES: tuple[str, ...] = ()  # dotted prefixes (default: the keys of ADVICE without a dot)
    GUARDED_NOTE = " (guarded: a fallback exists; check that it is the torch path)"

    def _packages(self) -> tuple[str, ...]:
        return self.PACKAGES or tuple(k for k in self.ADVICE if "." not in k)

    def _report_use(self, node: cst.CSTNode, qualname: str, what: str) -> None:
        advice, effort = _advice_for(qualname, self.ADVICE)
        guarded = self.guarded(node)
        self.report(
            node,
            f"{self.LABEL} {what}: {advice}" + (self.GUARDED_NOTE if guarded else ""),
            effort=effort,
            severity=LOWER[self.SEVERITY] if guarded else None,
        )

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is not None and _matches(full, self._packages()):
                self._report_use(node, full, f"import of `{full}`")
                return

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = dotted_name(node.module)
        if module is None:
            return
        names = [] if isinstance(node.names, cst.ImportStar) else [
            a.name.value for a in node.names if isinstance(a.name, cst.Name)]
        fulls = [f"{module}.{n}" for n in names]
        if _matches(module, self._packages()):
            self._report_use(node, fulls[0] if len(fulls) == 1 else module, f"import from `{module}`")
            return
        for full in fulls:
            if _matches(full, self._packages()):
                self._report_use(node, full, f"import of `{full}`")
                return

    def _reference(self, node: cst.BaseExpression) -> None:
        if node in self._skip:
            return
        qualname = self.context.qualname(node)
        if qualname is None or not _matches(qualname, self._packages()):
            return
        inner = node
        while isinstance(inner, cst.Attribute):  # report the outermost reference only
            inner = inner.value
            self._skip.add(inner)
        self._report_use(node, qualname, f"`{qualname}`")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)


# --------------------------------------------------------------------------------------------------


class TritonKernel(_PackageRule):
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
    - shared/torchneuron.md section 7 (custom kernels -> NKI with ``@torch_neuronx.nki_op``)
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
        if _matches(qualname, ("triton",)) and qualname.rsplit(".", 1)[-1] in self.KERNEL_DECORATORS:
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

    def _reference(self, node: cst.BaseExpression) -> None:
        if not self._kernel_depth:
            super()._reference(node)


class FlashAttn(_PackageRule):
    """Reports the ``flash_attn`` package: its kernels are CUDA-only.

    ## What it does
    Reports every import of ``flash_attn`` and every use of its functions and modules
    (``flash_attn_func``, ``flash_attn_varlen_func``, ``flash_attn.layers.rotary``, ``flash_attn.ops``,
    ...), each with the torch replacement.

    ## Why is this bad?
    flash-attn builds CUDA kernels; on a Trainium host the import fails, or a guarded import silently
    takes the fallback path.

    ## Example
    ```python
    from flash_attn import flash_attn_func
    out = flash_attn_func(q, k, v, causal=True)           # (batch, seq, heads, dim)
    ```
    Use instead:
    ```python
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
    ).transpose(1, 2)
    ```

    ## Fix safety
    No automatic fix: the tensor layout differs (flash-attn takes ``(batch, seq, heads, dim)``, SDPA
    ``(batch, heads, seq, dim)``) and varlen (unpadded) batches need padding to static shapes. In
    Hugging Face models ``attn_implementation="sdpa"`` is the switch (NP603).

    ## References
    - shared/torchneuron.md sections 5 (SDPA on neuron) and 7
    - https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html
    """

    CODE = "NP702"
    NAME = "flash-attn"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "flash-attn's kernels are CUDA-only: use F.scaled_dot_product_attention"
    TRIGGERS = ("flash_attn",)
    LABEL = "flash-attn"
    ADVICE = FLASH_ATTN

    VALID = [
        Valid("import torch.nn.functional as F\nout = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"),
        Valid("use_flash_attn = False\n"),
    ]
    INVALID = [
        Invalid("from flash_attn import flash_attn_func\nout = flash_attn_func(q, k, v, causal=True)\n", None,
                message_contains="transpose(1, 2)"),
        Invalid(
            "try:\n    from flash_attn import flash_attn_func\n    HAS_FLASH = True\nexcept ImportError:\n"
            "    flash_attn_func = None\n    HAS_FLASH = False\n"
            "if HAS_FLASH:\n    out = flash_attn_func(q, k, v)\n",
            None,
            message_contains="guarded",
        ),
        Invalid("from transformers.utils import is_flash_attn_2_available\nif is_flash_attn_2_available():\n"
                "    import flash_attn\n", None, target="accelerator"),
    ]


class Xformers(_PackageRule):
    """Reports the ``xformers`` package: its kernels are CUDA-only.

    ## What it does
    Reports every import of ``xformers`` and every use (``xformers.ops.memory_efficient_attention``,
    attention biases such as ``LowerTriangularMask``, ``SwiGLU``), each with the torch replacement.

    ## Why is this bad?
    xformers' memory-efficient attention and fused ops are CUDA (and Triton) kernels; on a Trainium
    host the import fails or the code takes its fallback.

    ## Example
    ```python
    out = xops.memory_efficient_attention(q, k, v, attn_bias=xops.LowerTriangularMask())
    ```
    Use instead:
    ```python
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
    ).transpose(1, 2)
    ```

    ## Fix safety
    No automatic fix: layouts differ (xformers uses ``(batch, seq, heads, dim)``) and block-diagonal
    biases (packed variable-length batches) need padding.

    ## References
    - shared/torchneuron.md sections 5 and 7
    """

    CODE = "NP703"
    NAME = "xformers"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "xformers' kernels are CUDA-only: use F.scaled_dot_product_attention"
    TRIGGERS = ("xformers",)
    LABEL = "xformers"
    ADVICE = XFORMERS

    VALID = [Valid("import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)\n")]
    INVALID = [
        Invalid("import xformers.ops as xops\ny = xops.memory_efficient_attention(q, k, v)\n", None,
                message_contains="memory_efficient_attention"),
    ]


class Apex(_PackageRule):
    """Reports NVIDIA apex: its fused kernels and AMP are CUDA-only.

    ## What it does
    Reports every import of ``apex`` and every use: ``amp.initialize`` / ``amp.scale_loss``,
    ``FusedAdam`` / ``FusedLAMB``, ``FusedLayerNorm`` / ``FusedRMSNorm``, apex DDP and SyncBatchNorm,
    ``apex.contrib`` and ``apex.transformer``, each with the torch equivalent.

    ## Why is this bad?
    apex is a CUDA extension library: it does not build or import on a Trainium host, and apex AMP was
    superseded by ``torch.autocast`` years ago.

    ## Example
    ```python
    from apex.normalization import FusedLayerNorm
    norm = FusedLayerNorm(hidden)
    ```
    Use instead:
    ```python
    norm = torch.nn.LayerNorm(hidden)
    ```

    ## Fix safety
    No automatic fix: the replacements are close but not identical (argument names, AMP opt levels
    become an autocast region, apex DDP's ``delay_allreduce`` has no counterpart).

    ## References
    - shared/torchneuron.md sections 4 (autocast) and 6 (DDP)
    - https://docs.pytorch.org/docs/stable/amp.html
    """

    CODE = "NP704"
    NAME = "apex"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "apex is CUDA-only: use the torch equivalent"
    TRIGGERS = ("apex",)
    LABEL = "apex"
    ADVICE = APEX

    VALID = [
        Valid("import torch\nnorm = torch.nn.LayerNorm(512)\nopt = torch.optim.AdamW(params)\n"),
        Valid("apex = find_apex(points)\n"),
    ]
    INVALID = [
        Invalid("from apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O1')\n", None,
                message_contains="torch.autocast"),
        Invalid(
            "try:\n    from apex.normalization import FusedLayerNorm as LayerNorm\nexcept ImportError:\n"
            "    from torch.nn import LayerNorm\n",
            None,
            message_contains="guarded",
        ),
        Invalid("from apex.optimizers import FusedAdam\nopt = FusedAdam(model.parameters(), lr=1e-3)\n", None,
                message_contains="torch.optim.AdamW"),
    ]


class TransformerEngine(_PackageRule):
    """Reports NVIDIA TransformerEngine: FP8 and fused kernels for NVIDIA GPUs only.

    ## What it does
    Reports every import of ``transformer_engine`` and every use (``te.Linear``, ``te.LayerNorm``,
    ``te.TransformerLayer``, ``te.fp8_autocast``, FP8 recipes), each with the torch equivalent.

    ## Why is this bad?
    TransformerEngine's kernels target Hopper/Blackwell tensor cores. TorchNeuron has no FP8 training
    recipe equivalent (Trainium2 supports only non-OCP ``float8_e4m3`` casts, and there is no
    ``torch._scaled_mm``); bf16 autocast is the recommended precision.

    ## Example
    ```python
    with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
        out = te.Linear(1024, 1024)(x)
    ```
    Use instead:
    ```python
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        out = torch.nn.Linear(1024, 1024)(x)
    ```

    ## Fix safety
    No automatic fix: module arguments differ (``params_dtype``, ``tp_group``, ``sequence_parallel``)
    and tensor parallelism moves to DTensor.

    ## References
    - shared/torchneuron.md sections 4 (FP8) and 6 (DTensor tensor parallelism)
    """

    CODE = "NP705"
    NAME = "transformer-engine"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "TransformerEngine is CUDA-only: use torch modules under bf16 autocast"
    TRIGGERS = ("transformer_engine",)
    LABEL = "TransformerEngine"
    ADVICE = TRANSFORMER_ENGINE

    VALID = [Valid("import torch\nlayer = torch.nn.Linear(1024, 1024)\n")]
    INVALID = [
        Invalid("import transformer_engine.pytorch as te\nlayer = te.Linear(1024, 1024)\n"
                "with te.fp8_autocast(enabled=True):\n    y = layer(x)\n", None, message_contains="fp8"),
    ]


class DeepSpeed(_PackageRule):
    """Reports DeepSpeed: no documented Trainium accelerator, CUDA ops.

    ## What it does
    Reports every import of ``deepspeed`` and every use (``deepspeed.initialize``,
    ``deepspeed.zero.Init``, ``deepspeed.checkpointing``, DeepSpeed ops), the Hugging Face
    ``TrainingArguments(deepspeed=...)`` keyword, accelerate's ``DeepSpeedPlugin`` and Lightning's
    ``strategy="deepspeed..."``, each with the torch-native replacement.

    ## Why is this bad?
    DeepSpeed selects CUDA (or another vendor's) accelerator and JIT-builds CUDA ops; no DeepSpeed
    accelerator for Trainium is documented. TorchNeuron supports DDP, FSDP2, DTensor tensor and sequence
    parallelism and pipeline parallelism; ZeRO stages map onto FSDP2 sharding.

    ## Example
    ```python
    engine, opt, _, _ = deepspeed.initialize(model=model, config="ds_config.json")
    ```
    Use instead:
    ```python
    from torch.distributed.fsdp import fully_shard
    for block in model.layers:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters())
    ```

    ## Fix safety
    No automatic fix: the engine API (``engine.backward``, ``engine.step``, checkpoint format) has to be
    replaced by a plain training loop.

    ## References
    - shared/torchneuron.md section 6 (supported distributed stacks)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html
    """

    CODE = "NP706"
    NAME = "deepspeed"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "DeepSpeed has no documented Trainium accelerator: use FSDP2 / DDP"
    TRIGGERS = ("deepspeed", "DeepSpeed")
    LABEL = "DeepSpeed"
    ADVICE = DEEPSPEED
    PACKAGES = ("deepspeed", "accelerate.DeepSpeedPlugin", "accelerate.utils.DeepSpeedPlugin")

    VALID = [
        Valid("from torch.distributed.fsdp import fully_shard\nfully_shard(model)\n"),
        Valid('args = TrainingArguments(output_dir="o", deepspeed=None)\n'),
        Valid("from accelerate import Accelerator\nacc = Accelerator(mixed_precision='bf16')\n"),
    ]
    INVALID = [
        Invalid("import deepspeed\nengine, opt, _, _ = deepspeed.initialize(model=model, config=cfg)\n", None,
                message_contains="FSDP2"),
        Invalid('args = TrainingArguments(output_dir="o", deepspeed="ds_config.json")\n', None),
        Invalid('import lightning as L\ntrainer = L.Trainer(strategy="deepspeed_stage_3")\n', None),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        for arg in node.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value == "deepspeed" and not _is_none(arg.value) and not (
                isinstance(arg.value, cst.Name) and arg.value.value == "False"
            ):
                self._report_use(arg, "deepspeed", "`deepspeed=` configuration")
            elif arg.keyword.value == "strategy" and (string_value(arg.value) or "").startswith("deepspeed"):
                self._report_use(arg.value, "deepspeed.zero", f"strategy `{string_value(arg.value)}`")


class BitsAndBytes(_PackageRule):
    """Reports the ``bitsandbytes`` package: CUDA-only quantization kernels and 8-bit optimizers.

    ## What it does
    Reports every import of ``bitsandbytes`` and every use (``bnb.optim.Adam8bit`` / ``PagedAdamW``,
    ``bnb.nn.Linear8bitLt`` / ``Linear4bit``, ``bnb.functional``), each with the torch replacement.
    Quantization requested through Hugging Face arguments (``load_in_4bit=True``,
    ``BitsAndBytesConfig``) is NP605.

    ## Why is this bad?
    bitsandbytes ships CUDA kernels only; on a Trainium host it fails to find a GPU or falls back to
    slow CPU code, and there is no Neuron 8-bit optimizer or NF4 weight format.

    ## Example
    ```python
    opt = bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)
    ```
    Use instead (shard optimizer state with FSDP2 to save memory):
    ```python
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ```

    ## Fix safety
    No automatic fix: an 8-bit optimizer state is 4x smaller than AdamW's fp32 state and quantized
    weights are 2-4x smaller than bf16, so the memory plan changes.

    ## References
    - shared/torchneuron.md section 7
    """

    CODE = "NP707"
    NAME = "bitsandbytes"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "bitsandbytes is CUDA-only: use the torch equivalent in bf16"
    TRIGGERS = ("bitsandbytes",)
    LABEL = "bitsandbytes"
    ADVICE = BITSANDBYTES

    VALID = [Valid("import torch\nopt = torch.optim.AdamW(model.parameters(), lr=1e-4)\n")]
    INVALID = [
        Invalid("import bitsandbytes as bnb\nopt = bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)\n", None,
                message_contains="torch.optim.AdamW"),
        Invalid("try:\n    import bitsandbytes as bnb\nexcept ImportError:\n    bnb = None\n", None,
                message_contains="guarded"),
    ]


def _string_literals(node: cst.CSTNode):
    """String literals directly in an argument value or in a list/tuple/set literal there."""
    if isinstance(node, cst.SimpleString):
        yield node
    elif isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        for element in node.elements:
            if isinstance(element.value, cst.SimpleString):
                yield element.value


def _is_cuda_source(node: cst.SimpleString) -> bool:
    return bool(CUDA_SOURCE_RE.match(string_value(node) or ""))


class CudaExtension(PythonRule):
    """Reports ``torch.utils.cpp_extension`` builds: CUDA extensions have no Trainium equivalent.

    ## What it does
    Reports ``torch.utils.cpp_extension.load(...)``, ``load_inline(...)``, ``CUDAExtension(...)`` and
    ``CppExtension(...)`` calls. A build with CUDA sources (``CUDAExtension``, ``cuda_sources=``,
    ``with_cuda=True``, a ``.cu`` file in ``sources``) is an error; a C++-only build is a warning (it
    works, on CPU tensors).

    ## Why is this bad?
    CUDA extensions need nvcc and a CUDA toolkit to build and run their kernels on NVIDIA GPUs. Custom
    device code for Trainium is written in NKI and registered as a PyTorch op. A C++ extension runs on
    the host CPU: given neuron tensors it needs them copied to the CPU first.

    ## Example
    ```python
    ext = load(name="fused", sources=["fused.cpp", "fused_kernel.cu"])
    ```
    Use instead: the torch expression the kernel fuses (``torch.compile(backend="neuron")`` fuses it),
    or an NKI kernel registered with ``@torch_neuronx.nki_op``.

    ## Fix safety
    No automatic fix: kernels have to be rewritten. ``.cu`` source files are NP709.

    ## References
    - shared/torchneuron.md section 7 (custom CUDA kernels -> NKI)
    - https://docs.pytorch.org/docs/stable/cpp_extension.html
    """

    CODE = "NP708"
    NAME = "cuda-extension"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "`{api}` builds a CUDA extension, which cannot run on Trainium: " + NKI_ROUTE
    TRIGGERS = ("cpp_extension",)

    VALID = [
        Valid("from torch.utils.cpp_extension import include_paths\npaths = include_paths()\n"),
        Valid("import torch\nlib = torch.library.Library('mylib', 'DEF')\n", target="accelerator"),
    ]
    INVALID = [
        Invalid("from torch.utils.cpp_extension import load\n"
                "ext = load(name='fused', sources=['fused.cpp', 'fused_kernel.cu'])\n", None),
        Invalid("from torch.utils.cpp_extension import CUDAExtension\n"
                "ext = CUDAExtension('ops', sources=srcs)\n", None),
        Invalid("import torch.utils.cpp_extension as ce\nm = ce.load_inline('m', cpp_sources=src)\n", None,
                message_contains="C++ extension"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname not in CPP_EXTENSION_CALLS:
            return
        api = qualname.rsplit(".", 1)[-1]
        cuda = api == "CUDAExtension"
        for arg in node.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword == "cuda_sources" and not _is_none(arg.value):
                cuda = True
            elif keyword == "with_cuda" and isinstance(arg.value, cst.Name) and arg.value.value == "True":
                cuda = True
            elif any(_is_cuda_source(s) for s in _string_literals(arg.value)):
                cuda = True
        if cuda:
            self.report(node, self.MESSAGE.format(api=api))
        else:
            self.report(
                node,
                f"`{api}` builds a C++ extension: it runs on the CPU (neuron tensors need `.cpu()` first); "
                "check that its sources include no CUDA code, device kernels need NKI",
                severity="warning",
                effort="medium",
            )


class CudaSourceFile(PythonRule):
    """Reports ``.cu`` / ``.cuh`` CUDA source files: no Trainium compiler for them.

    ## What it does
    In Python, reports string literals naming CUDA sources (``"kernel.cu"``, ``"csrc/*.cu"``,
    ``"helpers.cuh"``) outside the ``cpp_extension`` calls NP708 already reports, e.g. source lists
    built for ``setup.py``. The project discovery reports the ``.cu`` files of a tree under the same
    code.

    ## Why is this bad?
    CUDA C++ compiles with nvcc for NVIDIA GPUs only. Each kernel needs an NKI port (or a torch
    expression) to run on Trainium.

    ## Example
    ```python
    sources = ["csrc/attention.cpp", "csrc/attention_kernel.cu"]
    ```
    Use instead: an NKI kernel registered with ``@torch_neuronx.nki_op``, or the torch ops it fuses.

    ## Fix safety
    No automatic fix.

    ## References
    - shared/torchneuron.md section 7
    """

    CODE = "NP709"
    NAME = "cuda-source-file"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "CUDA source `{name}` cannot be compiled for Trainium: " + NKI_ROUTE
    TRIGGERS = (".cu'", '.cu"', ".cuh")

    VALID = [
        Valid("path = 'model.cpp'\nurl = 'http://example.cu/x'\n"),
        Valid("from torch.utils.cpp_extension import load\next = load('f', sources=['f.cu'])\n"),  # NP708
    ]
    INVALID = [
        Invalid("sources = ['csrc/attention.cpp', 'csrc/attention_kernel.cu']\n", None),
        Invalid('import glob\nsrcs = glob.glob("csrc/*.cu")\n', None, target="accelerator"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._extension_depth = 0
        self._extension_calls: set[cst.CSTNode] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node.func) in CPP_EXTENSION_CALLS:
            self._extension_calls.add(node)
            self._extension_depth += 1

    def leave_Call(self, original_node: cst.Call) -> None:
        if original_node in self._extension_calls:
            self._extension_depth -= 1

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if not self._extension_depth and _is_cuda_source(node):
            self.report(node, self.MESSAGE.format(name=string_value(node)))


class NvtxPackage(_PackageRule):
    """Reports the ``nvtx`` package (NVIDIA Tools Extension ranges).

    ## What it does
    Reports every import of the ``nvtx`` package and every use (``@nvtx.annotate``,
    ``nvtx.push_range`` / ``pop_range``). ``torch.cuda.nvtx`` is reported by NP202.

    ## Why is this bad?
    NVTX ranges are consumed by Nsight tools; on a Trainium host the package may import but nothing
    records the ranges.

    ## Example
    ```python
    with nvtx.annotate("forward"):
        y = model(x)
    ```
    Use instead:
    ```python
    with torch.profiler.record_function("forward"):
        y = model(x)
    ```

    ## Fix safety
    No automatic fix: ``nvtx.annotate`` is also a decorator and takes colours and domains.

    ## References
    - shared/torchneuron.md section 7 (profiling with ``ProfilerActivity.PrivateUse1``)
    """

    CODE = "NP710"
    NAME = "nvtx-package"
    SEVERITY = "warning"
    EFFORT = "low"
    MESSAGE = "NVTX ranges are CUDA tooling: use torch.profiler.record_function"
    TRIGGERS = ("nvtx",)
    LABEL = "NVTX"
    ADVICE = NVTX

    VALID = [
        Valid("import torch\nwith torch.profiler.record_function('fwd'):\n    pass\n"),
        Valid("import torch\ntorch.cuda.nvtx.range_push('fwd')\n"),  # NP202
    ]
    INVALID = [Invalid("import nvtx\n\n@nvtx.annotate('step', color='blue')\ndef step():\n    pass\n", None)]


def _command_head(node: cst.BaseExpression) -> Optional[str]:
    """The program a shell call runs: the first word of a command string, or the first list element."""
    if isinstance(node, (cst.List, cst.Tuple)) and node.elements:
        return string_value(node.elements[0].value)
    value = string_value(node)
    if value is None and isinstance(node, cst.Call) and node.args:  # shlex.split("nvidia-smi ...")
        value = string_value(node.args[0].value)
    if value is None:
        return None
    words = value.split()
    return words[0] if words else None


class GpuMonitoring(_PackageRule):
    """Reports ``nvidia-smi`` calls and NVML-based GPU monitoring packages.

    ## What it does
    Reports ``subprocess.run(["nvidia-smi", ...])``, ``check_output("nvidia-smi ...", shell=True)``,
    ``os.system("nvidia-smi")`` / ``os.popen(...)``, and every import and use of ``pynvml``,
    ``nvidia_smi``, ``py3nvml``, ``GPUtil``, ``gpustat`` and ``nvitop``.

    ## Why is this bad?
    ``nvidia-smi`` and NVML do not exist on a Trainium host: the subprocess fails (``FileNotFoundError``)
    or NVML reports no devices, so GPU-count and memory logic breaks.

    ## Example
    ```python
    out = subprocess.check_output(["nvidia-smi", "--query-gpu=memory.used", "--format=csv"])
    ```
    Use instead:
    ```python
    used = torch.neuron.memory_allocated()      # in-process
    info = subprocess.check_output(["neuron-ls", "--json-output"])  # devices
    ```

    ## Fix safety
    No automatic fix: the output formats differ.

    ## References
    - shared/torchneuron.md section 7 (diagnostics: neuron-ls, neuron-top, Neuron Observer) and 1.2
    """

    CODE = "NP711"
    NAME = "gpu-monitoring"
    SEVERITY = "warning"
    EFFORT = "low"
    MESSAGE = NVIDIA_SMI_ADVICE
    TRIGGERS = ("nvidia-smi", "nvidia_smi", "pynvml", "nvml", "GPUtil", "gpustat", "nvitop")
    LABEL = "GPU monitoring"
    ADVICE = GPU_MONITORING

    VALID = [
        Valid("import subprocess\nsubprocess.run(['neuron-ls', '--json-output'])\n"),
        Valid("print('run nvidia-smi to check')\n"),
    ]
    INVALID = [
        Invalid("import subprocess\nout = subprocess.check_output(['nvidia-smi', '--query-gpu=memory.used'])\n",
                None, message_contains="neuron-ls"),
        Invalid("import os\nos.system('nvidia-smi -L')\n", None),
        Invalid("import pynvml\npynvml.nvmlInit()\n", None),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node.func) not in SHELL_CALLS:
            return
        arg = arg_named(node, "args", 0) or arg_named(node, "cmd", 0) or arg_named(node, "command", 0)
        if arg is not None and _command_head(arg.value) == "nvidia-smi":
            self.report(node, severity=self.severity_for())


PROFILER_ACTIVITY_CUDA = ("torch.profiler.ProfilerActivity.CUDA", "torch.autograd.ProfilerActivity.CUDA",
                          "torch._C._profiler.ProfilerActivity.CUDA", "torch.autograd.profiler.ProfilerActivity.CUDA")


class ProfilerActivityCuda(PythonRule):
    """Rewrites ``ProfilerActivity.CUDA`` to ``ProfilerActivity.PrivateUse1``.

    ## What it does
    Finds ``torch.profiler.ProfilerActivity.CUDA`` (any import spelling) and rewrites it to
    ``ProfilerActivity.PrivateUse1``, the activity under which TorchNeuron's Kineto plugin records
    device events. A list that already names ``PrivateUse1`` next to ``CUDA`` (multi-backend code) is
    left alone. With ``--target accelerator`` it is reported only.

    ## Why is this bad?
    With ``ProfilerActivity.CUDA`` on a Trainium host the profiler records CPU events only: the trace
    shows no device time at all.

    ## Example
    ```python
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        model(x)
    ```
    Use instead:
    ```python
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        model(x)
    ```

    ## Fix safety
    Safe on the neuron target: the same request for device events, on the device that exists. (Neuron
    Explorer's device mode reserves about 5 GB of HBM on Trn2.) On the accelerator target there is no
    device-agnostic activity: keep ``CUDA`` for GPUs and add ``PrivateUse1`` when
    ``torch.accelerator.current_accelerator().type == "neuron"``.

    ## References
    - shared/torchneuron.md section 7 (profiling: ``ProfilerActivity.CPU`` + ``ProfilerActivity.PrivateUse1``)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-explorer/how-to-profile-pytorch.html
    """

    CODE = "NP712"
    NAME = "profiler-activity-cuda"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    MESSAGE = (
        "`ProfilerActivity.CUDA` records nothing on Trainium: use `ProfilerActivity.PrivateUse1` (TorchNeuron's "
        "device activity)"
    )
    TRIGGERS = ("ProfilerActivity",)

    VALID = [
        Valid("from torch.profiler import ProfilerActivity\nacts = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]\n"),
        Valid("from torch.profiler import ProfilerActivity as PA\nacts = [PA.CPU, PA.CUDA, PA.PrivateUse1]\n"),
    ]
    INVALID = [
        Invalid(
            "from torch.profiler import profile, ProfilerActivity\n"
            "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:\n    model(x)\n",
            "from torch.profiler import profile, ProfilerActivity\n"
            "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:\n    model(x)\n",
        ),
        Invalid(
            "import torch\nacts = [torch.profiler.ProfilerActivity.CUDA]\n",
            "import torch\nacts = [torch.profiler.ProfilerActivity.PrivateUse1]\n",
        ),
        Invalid("import torch\nacts = [torch.profiler.ProfilerActivity.CUDA]\n", None, target="accelerator"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._multibackend: set[cst.CSTNode] = set()

    def _container(self, node) -> None:
        values = [e.value for e in node.elements if isinstance(e, cst.Element)]
        if any(isinstance(v, cst.Attribute) and v.attr.value == "PrivateUse1" for v in values):
            self._multibackend.update(values)

    def visit_List(self, node: cst.List) -> None:
        self._container(node)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._container(node)

    def visit_Set(self, node: cst.Set) -> None:
        self._container(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "CUDA" or node in self._multibackend:
            return
        if self.context.qualname(node) not in PROFILER_ACTIVITY_CUDA:
            return
        if self.context.target != "neuron":
            self.report(node, self.MESSAGE + " on Trainium; there is no device-agnostic activity: add it when "
                        "the current accelerator is neuron", effort="low")
            return
        self.report(node, replacement=node.with_changes(attr=cst.Name("PrivateUse1")))
