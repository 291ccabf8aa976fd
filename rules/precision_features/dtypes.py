"""NP801 / NP802 / NP809: dtypes Trainium does not compute natively: float64 (computed as float32),
complex dtypes and FFTs, and float8 (limited on Trainium2, no ``torch._scaled_mm``).
"""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import source_of
from neuron_port.rules.precision_features.common import ReferenceRule
from neuron_port.rules.precision_features.float64_flow import Float64Flow
from neuron_port.rules.spec import Invalid, RunPremise, Valid


FLOAT64_MESSAGE = (
    "`{name}`: float64 is not native on Trainium (computed with float32 precision): use float32, or keep "
    "this computation on the CPU"
)

CPU_ONLY_MESSAGE = (
    "`{name}`: float64 only on the CPU here (every use is cast to 32 bits or stays CPU-side before any "
    "device move): fine on Trainium"
)


class Float64(ReferenceRule):
    """Reports float64 (double precision) tensors: computed as float32 on Trainium.

    ## What it does
    Reports ``torch.float64`` / ``torch.double`` / ``torch.DoubleTensor`` references (in ``dtype=``,
    ``.to(...)``, comparisons), ``x.double()`` calls and ``torch.set_default_dtype(torch.float64)``.

    ## Why is this bad?
    Neuron hardware has no 64-bit floating point. TorchNeuron computes float64 ops in float32 and casts
    the result back, so the visible dtype stays float64 while the precision is float32's (silently: no
    warning is printed), and every cast to or from 64-bit bounces through the CPU. Code that relies on
    double precision (numerical tests, some losses, high-precision accumulators) gives different
    results; code that used float64 by accident (``torch.tensor(np_array)``) is merely slow.

    ## Example
    ```python
    x = torch.randn(8, dtype=torch.float64, device="neuron")
    ```
    Use instead:
    ```python
    x = torch.randn(8, dtype=torch.float32, device="neuron")
    ```

    A float64 value that provably never reaches a device as float64 is reported as ``info`` with that
    reason: CPU-side initialisation such as a diffusion beta schedule made with
    ``torch.linspace(..., dtype=torch.float64)``, derived in float64 (``1.0 - betas``,
    ``torch.cumprod``) and cast before it is stored (``register_buffer(name, v.to(torch.float32))``).
    The proof is a simple data flow over the function: every path of the value ends in a cast to a
    narrower dtype or a CPU-only use (numpy, ``.item()``, ``.tolist()``) before anything that could move
    it (an unknown call, a return, an attribute, ``register_buffer`` of the float64 value itself,
    ``.to(device)``); otherwise the finding is a warning as before.

    ## Fix safety
    No automatic fix: whether the precision matters is a decision about the algorithm. CPU-side data
    preparation in float64 is fine; move the tensor with ``.float().to("neuron")``.

    ## References
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py ("float64 and int64 are not natively supported by Neuron hardware")
    """

    CODE = "NP801"
    RUN_PREMISE = RunPremise("no float64 tensor reached the device", demotions=("float64",))
    NAME = "float64"
    SEVERITY = "warning"
    EFFORT = "low"
    MESSAGE = FLOAT64_MESSAGE.format(name="float64")
    TRIGGERS = (r"\.[ \t]*(?:float64|double|DoubleTensor)\b", r"import\b[^\n]*\b(?:float64|double|DoubleTensor)\b", r"float64(?<=[\s(,]float64)\b[ \t]*(?:[,)\\]|as\b|\r?$)", r"double(?<=[\s(,]double)\b[ \t]*(?:[,)\\]|as\b|\r?$)", r"DoubleTensor(?<=[\s(,]DoubleTensor)\b[ \t]*(?:[,)\\]|as\b|\r?$)")
    TABLE = {
        "torch.float64": (FLOAT64_MESSAGE, "low"),
        "torch.double": (FLOAT64_MESSAGE, "low"),
        "torch.DoubleTensor": (FLOAT64_MESSAGE, "low"),
    }

    VALID = [
        Valid("import torch\nx = torch.zeros(3, dtype=torch.float32, device='cpu')\ny = x.float()\n"),
        Valid("import numpy as np\na = np.zeros(3, dtype=np.float64)\nb = np.double(2)\n"),
        Valid("import torch\nx = torch.zeros(3, dtype=torch.float32)\n", target="accelerator"),
    ]
    INVALID = [
        Invalid("import torch\nx = torch.randn(8, dtype=torch.float64)\n", None, message_contains="float32 precision"),
        # a diffusion beta schedule: float64 on the CPU, cast before it is stored
        Invalid(
            """
            import torch
            from torch import nn


            class Diffusion(nn.Module):
                def __init__(self, steps):
                    super().__init__()
                    betas = torch.linspace(1e-4, 0.02, steps, dtype=torch.float64)
                    alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
                    self.register_buffer("betas", betas.to(torch.float32))
                    self.register_buffer("sqrt_ac", torch.sqrt(alphas_cumprod).float())
                    self.log_snr = float(torch.log(alphas_cumprod[-1]).item())
            """,
            None,
            message_contains="only on the CPU",
        ),
        Invalid("import torch\ndef table(device):\n    schedule = torch.arange(10, dtype=torch.float64)\n"
                "    return torch.tensor(schedule.numpy() ** 2, dtype=torch.float32).to(device)\n", None,
                message_contains="only on the CPU"),
        # the float64 value itself is stored or moved: a warning as before
        Invalid("import torch\ndef init(model):\n    betas = torch.linspace(0, 1, 10, dtype=torch.float64)\n"
                "    model.register_buffer('betas', betas)\n", None, message_contains="float32 precision"),
        Invalid("import torch\ndef init(device):\n    betas = torch.linspace(0, 1, 10, dtype=torch.float64)\n"
                "    betas = betas.to(device)\n", None, message_contains="float32 precision"),
        Invalid("import torch\ndef schedule(n):\n    betas = torch.linspace(0, 1, n, dtype=torch.float64)\n"
                "    return betas\n", None, message_contains="float32 precision"),
        Invalid("import torch as th\ny = x.double()\nz = x.to(th.double)\n", None),
        Invalid("import torch\ntorch.set_default_dtype(torch.float64)\n", None, message_contains="default dtype",
                target="accelerator"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._pending: list[tuple[cst.CSTNode, str, str]] = []  # (reference, message, effort)

    def on_reference(self, node: cst.BaseExpression, qualname: str, key: str) -> None:
        message, effort = self.TABLE[key]
        self._pending.append((node, message.format(name=qualname), effort))

    def leave_Module(self, original_node: cst.Module) -> None:
        flow = Float64Flow(original_node, self.context) if self._pending else None
        for node, message, effort in self._pending:
            assert flow is not None
            value = flow.produced_value(node)
            if value is not None and flow.is_contained(value):
                name = message.split("`")[1]
                self.report(node, CPU_ONLY_MESSAGE.format(name=name), severity="info", effort=None)
            else:
                self.report(node, message, effort=effort)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "double" and not node.args:
            qualname = self.context.qualname(func)
            if qualname is None or qualname.startswith("torch"):
                self._pending.append((node, FLOAT64_MESSAGE.format(name=source_of(func) + "()"), "low"))
            return
        if self.context.qualname(func) == "torch.set_default_dtype":
            arg = arg_named(node, "d", 0)
            if arg is not None and self.context.qualname(arg.value) in ("torch.float64", "torch.double"):
                self.not_uses.add(arg.value)
                self.report(node, "float64 as the default dtype makes every new float tensor float64, which "
                            "Trainium computes with float32 precision")


ROTARY_ADVICE = (
    "complex dtypes are not supported natively on Neuron; for rotary embeddings use "
    "`x * cos + rotate_half(x) * sin`"
)
FFT_ADVICE = "FFTs produce complex tensors, which Neuron does not support natively: compute the FFT on the CPU"


class ComplexDtype(ReferenceRule):
    """Reports complex dtypes and complex-number ops (rotary embeddings, FFTs).

    ## What it does
    Reports ``torch.complex64`` / ``complex128`` / ``cfloat`` / ``cdouble`` / ``complex32`` / ``chalf``,
    ``torch.view_as_complex``, ``torch.view_as_real``, ``torch.polar``, ``torch.complex``,
    ``torch.stft`` / ``istft`` and ``torch.fft.*``.

    ## Why is this bad?
    Complex dtypes are not supported natively: eager ops fail with "complex dtypes are not supported
    natively on Neuron" and the compiler with ``NCC_EVRF004``. The most common source is LLaMA-style
    rotary embeddings (``freqs_cis = torch.polar(...)``, ``torch.view_as_complex(xq)``), which have an
    equivalent real-valued formulation.

    ## Example
    ```python
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    ```
    Use instead:
    ```python
    cos, sin = freqs.cos(), freqs.sin()          # precomputed, real
    xq_out = xq * cos + rotate_half(xq) * sin     # rotate_half: (-x2, x1)
    ```

    ## Fix safety
    No automatic fix: the real form pairs dimensions differently (interleaved pairs for
    ``view_as_complex`` vs halves for ``rotate_half``), so checkpoints trained with one need the
    matching pairing (permute the q/k projection weights, or use an interleaved ``rotate_every_two``).

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (complex dtypes / FFT; TORCH_NEURONX_COMPLEX_DECOMPOSE in 2.33)
    """

    CODE = "NP802"
    RUN_PREMISE = RunPremise("no complex tensor reached the device", features=("complex",))
    NAME = "complex-dtype"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = ROTARY_ADVICE
    TRIGGERS = ("complex", "polar", "cfloat", "cdouble", "chalf", "fft", "stft")
    TABLE = {
        **{f"torch.{n}": ("`{name}`: " + ROTARY_ADVICE, "medium") for n in (
            "complex64", "complex128", "complex32", "cfloat", "cdouble", "chalf", "view_as_complex",
            "view_as_real", "polar", "complex")},
        "torch.fft": ("`{name}`: " + FFT_ADVICE, "high"),
        "torch.stft": ("`{name}`: " + FFT_ADVICE, "high"),
        "torch.istft": ("`{name}`: " + FFT_ADVICE, "high"),
    }

    VALID = [
        Valid("import torch\ncos, sin = freqs.cos(), freqs.sin()\nx_out = x * cos + rotate_half(x) * sin\n"),
        Valid("import torch\nok = x.is_complex()\nc = complex(1, 2)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nfreqs_cis = torch.polar(torch.ones_like(freqs), freqs)\n"
            "xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))\n",
            None,
            message_contains="rotate_half",
        ),
        Invalid("import torch\nspec = torch.fft.rfft(signal)\n", None, message_contains="FFT"),
        Invalid("import torch\nz = torch.zeros(4, dtype=torch.cfloat)\n", None, target="accelerator"),
    ]


FLOAT8_MESSAGES = {
    "torch.float8_e4m3fn": (
        "`{name}`: OCP float8_e4m3fn is supported on Trainium3 only (Trainium2: non-OCP e4m3, no scaled "
        "matmul): train in bf16 on trn2", "medium"),
    "torch.float8_e5m2": (
        "`{name}`: float8_e5m2 is limited to casts and data-path ops under torch.compile (no scaled "
        "matmul): keep matmuls in bf16", "medium"),
    "torch.float8_": (
        "`{name}`: this float8 variant is not a Trainium format (trn2: non-OCP e4m3; trn3: OCP e4m3fn "
        "and MXFP8/MXFP4)", "medium"),
    "torch._scaled_mm": (
        "`{name}` is not available on Neuron (no scaled float8 matmul): use a bf16 matmul", "medium"),
    "torchao.float8": (
        "`{name}`: torchao float8 training relies on `torch._scaled_mm`, which Neuron does not have: "
        "train in bf16", "medium"),
}


class Float8(ReferenceRule):
    """Reports float8 dtypes and ``torch._scaled_mm``: limited on Trainium2, different formats on Trainium3.

    ## What it does
    Reports ``torch.float8_e4m3fn`` / ``float8_e5m2`` / ``float8_e4m3fnuz`` / ``float8_e5m2fnuz`` /
    ``float8_e8m0fnu`` references, ``torch._scaled_mm`` (an error) and ``torchao.float8`` uses
    (``convert_to_float8_training``).

    ## Why is this bad?
    Trainium2 supports the non-OCP ``float8_e4m3`` (max 240); OCP ``float8_e4m3fn`` and MXFP8/MXFP4 are
    Trainium3-only (TorchNeuron raises "MXOCP is not supported on this platform target: trn2").
    float8 casts and data-path ops work under compile, but there is no ``_scaled_mm``, so FP8 matmul
    recipes (torchao, TransformerEngine) do not port.

    ## Example
    ```python
    out = torch._scaled_mm(a_fp8, b_fp8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    ```
    Use instead:
    ```python
    out = a.to(torch.bfloat16) @ b.to(torch.bfloat16)
    ```

    ## Fix safety
    No automatic fix: FP8 is a memory/speed recipe; the bf16 version needs more memory.

    ## References
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py (FP8: trn2 non-OCP e4m3, trn3 OCP e4m3fn / MX formats; no _scaled_mm)
    """

    CODE = "NP809"
    NAME = "float8"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = "float8: Trainium2 supports only non-OCP e4m3 and no `_scaled_mm`"
    TRIGGERS = ("float8", "_scaled_mm")
    TABLE = FLOAT8_MESSAGES
    SEVERITIES = {"torch._scaled_mm": "error", "torchao.float8": "error"}

    VALID = [Valid("import torch\nx = w.to(torch.bfloat16)\n")]
    INVALID = [
        Invalid("import torch\nw8 = w.to(torch.float8_e4m3fn)\n", None, message_contains="Trainium3"),
        Invalid("import torch\nout = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb)\n", None,
                message_contains="not available"),
        Invalid("from torchao.float8 import convert_to_float8_training\nconvert_to_float8_training(model)\n", None,
                target="accelerator"),
    ]
