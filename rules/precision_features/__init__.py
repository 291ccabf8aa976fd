"""NP8xx: precision and features that TorchNeuron does not support (or only partly), seen statically.

Codes (stable):

- NP801 ``float64``: ``torch.float64`` / ``torch.double`` / ``.double()`` / ``set_default_dtype(float64)``.
- NP802 ``complex-dtype``: complex dtypes, ``view_as_complex`` / ``view_as_real`` / ``polar``, ``torch.fft``.
- NP803 ``sparse-tensor``: sparse layouts, ``to_sparse()``, ``torch.sparse.*``, ``Embedding(sparse=True)``.
- NP804 ``nested-tensor``: ``torch.nested.*``, ``layout=torch.jagged``.
- NP805 ``forward-mode-ad``: ``torch.autograd.forward_ad``, ``torch.func.jvp`` / ``jacfwd`` / ``hessian``.
- NP806 ``interpolate-mode``: ``F.interpolate`` / ``nn.Upsample`` with bilinear, bicubic or trilinear mode.
- NP807 ``mha-attn-mask``: ``nn.MultiheadAttention`` instances called with an ``attn_mask``.
- NP808 ``channels-last``: ``memory_format=torch.channels_last`` (Neuron tensors are contiguous only).
- NP809 ``float8``: float8 dtypes, ``torch._scaled_mm``, ``torchao.float8``.
- NP810 ``flex-attention``: ``torch.nn.attention.flex_attention``.
- NP811 ``compiled-dynamic-shape``: ``nonzero`` / boolean-mask indexing / ``masked_select`` / ``unique``
  inside code compiled with ``torch.compile``.

All are reported (only NP808 has an unsafe fix); they run on both targets, since the code is about
what the Trainium device supports, not about how it is named. Facts: shared/torchneuron.md sections
4 (dtypes) and 5 (unsupported features), 3.3 (static shapes).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.spec import Invalid, PythonRule, Valid
from neuron_port.rules.compile.tables import COMPILE_FUNCS
from neuron_port.rules.helpers.names import dotted_name
from neuron_port.rules.helpers.calls import arg_named, remove_arg
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.helpers.statements import has_comment_above, statement_without


def _source(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _is_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _prefix_match(qualname: str, key: str) -> bool:
    """``key`` matches itself and its dotted children; a key ending in ``_`` matches as a plain prefix."""
    if key.endswith("_"):
        return qualname.startswith(key)
    return qualname == key or qualname.startswith(key + ".")


class _ReferenceRule(PythonRule):
    """Reports the outermost reference (Name/Attribute, following imports) whose qualified name matches
    a key of ``TABLE`` (longest key wins); ``TABLE`` values are ``(message, effort)``."""

    TABLE: dict[str, tuple[str, str]] = {}
    SEVERITIES: dict[str, str] = {}  # key -> severity override

    def __init__(self, context) -> None:
        super().__init__(context)
        self._skip: set[cst.CSTNode] = set()

    def lookup(self, qualname: str) -> Optional[str]:
        best = None
        for key in self.TABLE:
            if _prefix_match(qualname, key) and (best is None or len(key) > len(best)):
                best = key
        return best

    def _reference(self, node: cst.BaseExpression) -> None:
        if node in self._skip:
            return
        qualname = self.context.qualname(node)
        if qualname is None:
            return
        key = self.lookup(qualname)
        if key is None:
            return
        inner = node
        while isinstance(inner, cst.Attribute):
            inner = inner.value
            self._skip.add(inner)
        message, effort = self.TABLE[key]
        self.report(node, message.format(name=qualname), effort=effort, severity=self.SEVERITIES.get(key))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)


# --------------------------------------------------------------------------------------------------

FLOAT64_MESSAGE = (
    "`{name}`: float64 is not native on Trainium: ops compute in float32 and cast back, so the tensor "
    "still says float64 but has float32 precision (casts to/from 64-bit bounce through the CPU); use "
    "float32, or keep this computation on the CPU if it needs double precision"
)


class Float64(_ReferenceRule):
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

    ## Fix safety
    No automatic fix: whether the precision matters is a decision about the algorithm. CPU-side data
    preparation in float64 is fine; move the tensor with ``.float().to("neuron")``.

    ## References
    - shared/torchneuron.md section 4 ("float64 and int64 are not natively supported by Neuron hardware")
    """

    CODE = "NP801"
    NAME = "float64"
    SEVERITY = "warning"
    EFFORT = "low"
    MESSAGE = FLOAT64_MESSAGE.format(name="float64")
    TRIGGERS = ("float64", "double", "DoubleTensor")
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
        Invalid("import torch as th\ny = x.double()\nz = x.to(th.double)\n", None),
        Invalid("import torch\ntorch.set_default_dtype(torch.float64)\n", None, message_contains="default dtype",
                target="accelerator"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "double" and not node.args:
            qualname = self.context.qualname(func)
            if qualname is None or qualname.startswith("torch"):
                self.report(node, FLOAT64_MESSAGE.format(name=_source(func) + "()"))
            return
        if self.context.qualname(func) == "torch.set_default_dtype":
            arg = arg_named(node, "d", 0)
            if arg is not None and self.context.qualname(arg.value) in ("torch.float64", "torch.double"):
                self._skip.add(arg.value)
                self.report(node, "float64 as the default dtype makes every new float tensor float64: "
                            + FLOAT64_MESSAGE.format(name="float64").split(": ", 1)[1])


ROTARY_ADVICE = (
    "complex dtypes are not supported natively on Neuron (\"complex dtypes are not supported natively on "
    "Neuron\" / NCC_EVRF004); for rotary embeddings use the real-valued form "
    "`x * cos + rotate_half(x) * sin` with precomputed cos/sin tables"
)
FFT_ADVICE = (
    "FFTs produce complex tensors, which are not supported natively on Neuron (aten::_fft_c2r fails); "
    "TorchNeuron 2.33 adds TORCH_NEURONX_COMPLEX_DECOMPOSE (not confirmed for this version), otherwise "
    "compute the FFT on the CPU"
)


class ComplexDtype(_ReferenceRule):
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
    - shared/torchneuron.md section 5 (complex dtypes / FFT; TORCH_NEURONX_COMPLEX_DECOMPOSE in 2.33)
    """

    CODE = "NP802"
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


SPARSE_MESSAGE = (
    "`{name}`: sparse tensors are not supported on Neuron (\"Sparse is currently not supported\"): use "
    "dense tensors (with a mask), or keep the sparse part on the CPU"
)


class SparseTensor(_ReferenceRule):
    """Reports sparse tensors: not supported on Neuron.

    ## What it does
    Reports ``torch.sparse_coo_tensor`` / ``sparse_csr_tensor`` / ``torch.sparse.*`` /
    ``torch.sparse_coo`` layouts, ``x.to_sparse()`` (and ``to_sparse_csr`` / ``_csc`` / ``_bsr``),
    ``nn.Embedding(..., sparse=True)`` / ``nn.EmbeddingBag`` / ``F.embedding(sparse=True)``,
    ``torch.gather(..., sparse_grad=True)`` and ``torch.optim.SparseAdam``.

    ## Why is this bad?
    TorchNeuron has no sparse layouts: sparse embedding gradients raise
    ``NotImplementedError("Sparse is currently not supported for embedding.")`` and ``gather`` with
    ``sparse_grad=True`` raises ``"sparse_grad=True is not supported on Neuron"``.

    ## Example
    ```python
    emb = nn.Embedding(vocab, dim, sparse=True)
    opt = torch.optim.SparseAdam(emb.parameters())
    ```
    Use instead:
    ```python
    emb = nn.Embedding(vocab, dim)
    opt = torch.optim.AdamW(emb.parameters())
    ```

    ## Fix safety
    No automatic fix: dense gradients of a very large embedding cost memory; sparse matrix products
    need a dense (masked) formulation.

    ## References
    - shared/torchneuron.md section 5 (sparse embedding grads, ``gather(sparse_grad=True)``)
    """

    CODE = "NP803"
    NAME = "sparse-tensor"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = SPARSE_MESSAGE.format(name="sparse")
    TRIGGERS = ("sparse", "SparseAdam")
    TABLE = {
        "torch.sparse": (SPARSE_MESSAGE, "medium"),
        "torch.sparse_": (SPARSE_MESSAGE, "medium"),
        "torch.optim.SparseAdam": (SPARSE_MESSAGE, "low"),
    }
    SPARSE_KEYWORD_CALLEES = frozenset({
        "torch.nn.Embedding", "torch.nn.EmbeddingBag", "torch.nn.functional.embedding",
        "torch.nn.functional.embedding_bag", "torch.nn.Embedding.from_pretrained",
        "torch.nn.EmbeddingBag.from_pretrained",
    })
    TO_SPARSE = frozenset({"to_sparse", "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc",
                           "to_sparse_coo"})

    VALID = [
        Valid("import torch.nn as nn\nemb = nn.Embedding(1000, 64)\nemb2 = nn.Embedding(10, 4, sparse=False)\n"),
        Valid("import torch\ny = torch.gather(x, 1, idx)\n"),
    ]
    INVALID = [
        Invalid("import torch.nn as nn\nemb = nn.Embedding(1000, 64, sparse=True)\n", None),
        Invalid("import torch\ni = torch.sparse_coo_tensor(idx, vals, (3, 3))\ny = torch.sparse.mm(i, d)\n", None),
        Invalid("s = dense.to_sparse()\n", None),
        Invalid("import torch\ny = torch.gather(x, 1, idx, sparse_grad=True)\n", None, target="accelerator"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in self.TO_SPARSE:
            self.report(node, SPARSE_MESSAGE.format(name=f".{func.attr.value}()"))
            return
        for arg in node.args:
            if arg.keyword is None or not _is_true(arg.value):
                continue
            if arg.keyword.value == "sparse_grad" or (
                arg.keyword.value == "sparse" and self.context.qualname(func) in self.SPARSE_KEYWORD_CALLEES
            ):
                self.report(arg, SPARSE_MESSAGE.format(name=f"{arg.keyword.value}=True"), effort="low")


NESTED_MESSAGE = (
    "`{name}`: nested (ragged) tensors are not supported on Neuron (not in its documented feature set; "
    "compiled code needs static shapes anyway): pad to a fixed length and pass a mask"
)


class NestedTensor(_ReferenceRule):
    """Reports NestedTensor (``torch.nested``): ragged shapes are not supported on Neuron.

    ## What it does
    Reports ``torch.nested.*`` (``nested_tensor``, ``as_nested_tensor``, ``narrow``, ...) and the
    ``torch.jagged`` layout.

    ## Why is this bad?
    Nested tensors are not in TorchNeuron's supported feature set (its support is **not confirmed** by
    any readable source), and they are ragged by design, while the neuron compile backend needs static
    shapes.

    ## Example
    ```python
    batch = torch.nested.nested_tensor([a, b, c], layout=torch.jagged)
    ```
    Use instead:
    ```python
    batch = torch.nn.utils.rnn.pad_sequence([a, b, c], batch_first=True)  # plus a padding mask
    ```

    ## Fix safety
    No automatic fix: padding changes every op that consumes the batch (masks in attention and losses).

    ## References
    - shared/torchneuron.md sections 3.3 (static shapes) and 5 (NestedTensor: NOT confirmed)
    """

    CODE = "NP804"
    NAME = "nested-tensor"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = NESTED_MESSAGE.format(name="torch.nested")
    TRIGGERS = ("nested", "jagged")
    TABLE = {"torch.nested": (NESTED_MESSAGE, "medium"), "torch.jagged": (NESTED_MESSAGE, "medium")}

    VALID = [Valid("import torch\nbatch = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)\nnested = 1\n")]
    INVALID = [
        Invalid("import torch\nnt = torch.nested.nested_tensor([a, b], layout=torch.jagged)\n", None),
    ]


FORWARD_AD_MESSAGE = (
    "`{name}`: forward-mode AD (dual numbers, jvp/jacfwd) is not in TorchNeuron's documented support "
    "(unconfirmed; its ops may have no forward-derivative lowering): use reverse mode (`torch.func.vjp`, "
    "`jacrev`, or the double-backward trick `torch.autograd.functional.jvp`), or run it on the CPU"
)


class ForwardModeAD(_ReferenceRule):
    """Reports forward-mode automatic differentiation.

    ## What it does
    Reports ``torch.autograd.forward_ad`` (``dual_level``, ``make_dual``, ``unpack_dual``),
    ``torch.func.jvp`` / ``jacfwd`` / ``linearize`` / ``hessian`` (forward-over-reverse) and the same
    names from ``functorch``.

    ## Why is this bad?
    Forward-mode AD needs forward derivatives of every op; TorchNeuron's support for it is **not
    confirmed** by any readable source, while reverse mode is what training uses and is supported.

    ## Example
    ```python
    out, tangent = torch.func.jvp(f, (x,), (v,))
    ```
    Use instead (reverse mode, twice the cost of a backward pass):
    ```python
    out, tangent = torch.autograd.functional.jvp(f, (x,), (v,))
    ```

    ## Fix safety
    No automatic fix: the alternatives differ in cost and in ``create_graph`` handling.

    ## References
    - shared/torchneuron.md section 5 ("Forward-mode AD ... NOT confirmed")
    """

    CODE = "NP805"
    NAME = "forward-mode-ad"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = FORWARD_AD_MESSAGE.format(name="forward-mode AD")
    TRIGGERS = ("forward_ad", "jvp", "jacfwd", "linearize", "hessian")
    TABLE = {
        name: (FORWARD_AD_MESSAGE, "medium")
        for name in ("torch.autograd.forward_ad", "torch.func.jvp", "torch.func.jacfwd", "torch.func.linearize",
                     "torch.func.hessian", "functorch.jvp", "functorch.jacfwd", "functorch.hessian")
    }

    VALID = [
        Valid("import torch\ng = torch.func.grad(f)(x)\nj = torch.func.jacrev(f)(x)\n"),
        Valid("import torch\nout, t = torch.autograd.functional.jvp(f, (x,), (v,))\n"),
    ]
    INVALID = [
        Invalid("import torch.autograd.forward_ad as fwAD\nwith fwAD.dual_level():\n    d = fwAD.make_dual(x, t)\n",
                None),
        Invalid("from torch.func import jvp, jacfwd\nout, t = jvp(f, (x,), (v,))\nJ = jacfwd(f)(x)\n", None),
    ]


INTERPOLATE_FUNCS = {  # qualname -> position of mode (None: fixed mode)
    "torch.nn.functional.interpolate": 3,
    "torch.nn.functional.upsample": 3,
    "torch.nn.Upsample": 2,
    "torch.nn.modules.upsampling.Upsample": 2,
}
FIXED_MODE = {
    "torch.nn.functional.upsample_bilinear": "bilinear",
    "torch.nn.UpsamplingBilinear2d": "bilinear",
    "torch.nn.modules.upsampling.UpsamplingBilinear2d": "bilinear",
}
SLOW_MODES = ("bilinear", "bicubic", "trilinear")


class InterpolateMode(PythonRule):
    """Reports bilinear / bicubic / trilinear resampling, which may fall back or be slow on Neuron.

    ## What it does
    Reports ``F.interpolate`` / ``F.upsample`` / ``nn.Upsample`` with ``mode="bilinear"``,
    ``"bicubic"`` or ``"trilinear"`` (keyword or positional), and ``F.upsample_bilinear`` /
    ``nn.UpsamplingBilinear2d``.

    ## Why is this bad?
    Native support for these modes on TorchNeuron is **not confirmed** (its April source has JAX
    implementations for bilinear and bicubic; behaviour on the current release is unknown), and
    resampling ops that lower to gathers are slow on Trainium: ``nn.Upsample(mode="nearest-exact")`` was
    reported to lower to thousands of indirect DMA gathers. An op that falls back runs on the CPU with a
    copy each way.

    ## Example
    ```python
    y = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
    ```
    Use instead, for integer scale factors where nearest is acceptable:
    ```python
    y = x.repeat_interleave(2, dim=-1).repeat_interleave(2, dim=-2)  # then a conv to smooth
    ```
    or keep the op and measure it (``neuron-port check`` reports CPU fallbacks).

    ## Fix safety
    No automatic fix: the numerical result changes with the mode.

    ## References
    - shared/torchneuron.md section 5 (bilinear/bicubic: NOT confirmed; nearest-exact gather report)
    """

    CODE = "NP806"
    NAME = "interpolate-mode"
    SEVERITY = "warning"
    EFFORT = "low"
    MESSAGE = (
        "{mode} resampling: native support on Neuron is not confirmed (it may fall back to the CPU or "
        "lower to slow gathers): measure it, or use repeat_interleave / a transposed conv for integer scales"
    )
    TRIGGERS = ("interpolate", "Upsample", "upsample", "Upsampling")

    VALID = [
        Valid("import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2)\n"),
        Valid("import torch.nn as nn\nup = nn.Upsample(scale_factor=2, mode='nearest')\n"),
        Valid("import torch.nn.functional as F\ny = F.interpolate(x, size=s, mode=self.mode)\n"),
    ]
    INVALID = [
        Invalid("import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2, mode='bilinear')\n", None),
        Invalid("import torch.nn as nn\nup = nn.Upsample(None, 2, 'bicubic')\n", None),
        Invalid("from torch import nn\nup = nn.UpsamplingBilinear2d(scale_factor=2)\n", None, target="accelerator"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname is None:
            return
        if qualname in FIXED_MODE:
            self.report(node, self.MESSAGE.format(mode=FIXED_MODE[qualname]))
            return
        if qualname not in INTERPOLATE_FUNCS:
            return
        arg = arg_named(node, "mode", INTERPOLATE_FUNCS[qualname])
        mode = string_value(arg.value) if arg is not None else None
        if mode in SLOW_MODES:
            self.report(arg.value, self.MESSAGE.format(mode=mode))


MHA_QUALNAMES = frozenset({"torch.nn.MultiheadAttention", "torch.nn.modules.activation.MultiheadAttention"})


class MhaAttnMask(PythonRule):
    """Reports ``nn.MultiheadAttention`` called with an arbitrary ``attn_mask``.

    ## What it does
    Records the names bound to ``nn.MultiheadAttention(...)`` in the file (``self.attn = ...``,
    ``mha = ...``) and reports calls of those names that pass an ``attn_mask`` (keyword or 6th
    positional argument). A call with ``is_causal=True`` and ``need_weights=False`` and no
    ``key_padding_mask`` is not reported: PyTorch then drops the mask and runs causal SDPA.

    ## Why is this bad?
    TorchNeuron's native multi-head-attention path raises ``NotImplementedError("Arbitrary mask tensors
    not yet supported in Neuron implementation. Please use mask_type=1 for causal masking or
    mask=None.")``; returning attention weights (the default ``need_weights=True``) is not supported
    either, and the backward pass with an additive mask failed to compile in the Beta 3 release.

    ## Example
    ```python
    out, _ = self.attn(x, x, x, attn_mask=causal_mask)
    ```
    Use instead (a causal mask):
    ```python
    out, _ = self.attn(x, x, x, attn_mask=causal_mask, is_causal=True, need_weights=False)
    ```
    or project q/k/v yourself and call ``F.scaled_dot_product_attention(q, k, v, attn_mask=...)``.

    ## Fix safety
    No automatic fix: only a causal mask may be declared ``is_causal=True``; other masks need manual
    attention.

    ## References
    - shared/torchneuron.md section 5 (``nn.MultiheadAttention`` rows)
    """

    CODE = "NP807"
    NAME = "mha-attn-mask"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = (
        "`nn.MultiheadAttention` with an arbitrary `attn_mask` is not supported by TorchNeuron's native MHA "
        "(\"Arbitrary mask tensors not yet supported\"): for a causal mask pass `is_causal=True, "
        "need_weights=False`; otherwise compute attention with F.scaled_dot_product_attention"
    )
    TRIGGERS = ("MultiheadAttention",)

    VALID = [
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4)\nout, _ = attn(x, x, x)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4)\n"
              "out, _ = attn(x, x, x, attn_mask=m, is_causal=True, need_weights=False)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4)\nout = other(x, attn_mask=m)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4)\nout, _ = attn(x, x, x, attn_mask=None)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch.nn as nn\nclass Block(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.attn = nn.MultiheadAttention(64, 4, batch_first=True)\n"
            "    def forward(self, x, mask):\n        return self.attn(x, x, x, attn_mask=mask)[0]\n",
            None,
        ),
        Invalid("from torch.nn import MultiheadAttention\nmha = MultiheadAttention(64, 4)\n"
                "out, w = mha(q, k, v, None, True, m)\n", None, target="accelerator"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._bound: set[str] = set()
        self._calls: list[tuple[str, cst.Call]] = []

    def _bind(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression]) -> None:
        if isinstance(value, cst.Call) and self.context.qualname(value.func) in MHA_QUALNAMES:
            name = dotted_name(target)
            if name is not None:
                self._bound.add(name)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target, node.value)

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted_name(node.func)
        if name is None:
            return
        mask = arg_named(node, "attn_mask", 5)
        if mask is None or _is_none(mask.value):
            return
        causal, weights = arg_named(node, "is_causal", 7), arg_named(node, "need_weights", 4)
        padding = arg_named(node, "key_padding_mask", 3)
        if (causal is not None and _is_true(causal.value) and weights is not None
                and isinstance(weights.value, cst.Name) and weights.value.value == "False"
                and (padding is None or _is_none(padding.value))):
            return
        self._calls.append((name, node))

    def leave_Module(self, original_node: cst.Module) -> None:
        for name, call in self._calls:
            if name in self._bound:
                self.report(call)


CHANNELS_LAST = frozenset({"torch.channels_last", "torch.channels_last_3d"})
# methods/functions whose memory_format= can simply be dropped (the default is contiguous/preserve)
DROPPABLE_FORMAT = frozenset({"to", "contiguous", "clone", "empty", "empty_like", "zeros_like", "ones_like",
                              "rand_like", "randn_like", "full_like", "empty_strided"})


class ChannelsLast(PythonRule):
    """Reports ``memory_format=torch.channels_last``: Neuron tensors are contiguous only.

    ## What it does
    Reports every ``torch.channels_last`` / ``channels_last_3d`` reference. Where the conversion can
    simply go it offers an unsafe fix: ``x.to(memory_format=torch.channels_last)`` becomes ``x`` (a
    statement ``model.to(memory_format=...)`` or ``x = x.to(memory_format=...)`` is removed), and the
    ``memory_format=`` argument is dropped from ``.to(device, ...)``, ``.contiguous(...)``,
    ``.clone(...)`` and the ``*_like`` / ``empty`` factories. Checks (``is_contiguous(memory_format=...)``)
    are reported only. On the accelerator target everything is reported only (channels_last is a
    performance win on GPUs).

    ## Why is this bad?
    TorchNeuron raises ``RuntimeError("<op>: Neuron tensors only support contiguous or preserve memory
    format")`` for other memory formats, and a layout-changing neuron-to-neuron copy is not supported
    ("Neuron->Neuron copy with layout change is not supported yet").

    ## Example
    ```python
    model = model.to(memory_format=torch.channels_last)
    x = x.to(device, memory_format=torch.channels_last)
    ```
    Use instead:
    ```python
    x = x.to(device)
    ```

    ## Fix safety
    Unsafe: the fix removes a performance choice made for GPUs (and code reading ``x.stride()`` may
    assume the channels-last layout); the numbers are unchanged.

    ## References
    - shared/torchneuron.md section 5 (channels_last / other memory formats)
    """

    CODE = "NP808"
    NAME = "channels-last"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "low"
    MESSAGE = (
        "`{name}`: Neuron tensors support only the contiguous memory format (\"Neuron tensors only support "
        "contiguous or preserve memory format\"): drop the channels_last conversion"
    )
    TRIGGERS = ("channels_last",)

    VALID = [
        Valid("import torch\nx = x.contiguous(memory_format=torch.contiguous_format)\ny = x.to('cpu')\n"),
        Valid("import torch\nx = x.to(memory_format=torch.preserve_format)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nmodel = model.to(memory_format=torch.channels_last)\n"
            "y = net(x.to(memory_format=torch.channels_last))\n",
            "import torch\ny = net(x)\n",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch\nx = x.to(device, memory_format=torch.channels_last, non_blocking=True)\n"
            "z = z.contiguous(memory_format=torch.channels_last)\n",
            "import torch\nx = x.to(device, non_blocking=True)\nz = z.contiguous()\n",
            unsafe_fixes=True,
        ),
        Invalid("import torch\nmodel = model.to(memory_format=torch.channels_last)\n", None),  # safe mode
        Invalid("import torch\nok = x.is_contiguous(memory_format=torch.channels_last)\n", None, unsafe_fixes=True),
        Invalid(
            "import torch\n# channels_last is faster on A100\nmodel.to(memory_format=torch.channels_last)\n",
            "import torch\n# channels_last is faster on A100\nmodel\n",
            unsafe_fixes=True,
        ),
        Invalid("import torch\nx = x.to(memory_format=torch.channels_last)\n", None, target="accelerator",
                unsafe_fixes=True),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._handled: set[cst.CSTNode] = set()

    def _format_arg(self, call: cst.Call) -> Optional[cst.Arg]:
        func = call.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        arg = arg_named(call, "memory_format", 0 if method == "contiguous" else None)
        if arg is not None and self.context.qualname(arg.value) in CHANNELS_LAST:
            return arg
        return None

    def _only_format_to(self, call: cst.Call) -> bool:
        """``x.to(memory_format=cl)``: the conversion is the whole call."""
        return (isinstance(call.func, cst.Attribute) and call.func.attr.value == "to"
                and len(call.args) == 1 and self._format_arg(call) is not None)

    def _message(self, arg: cst.Arg) -> str:
        return self.MESSAGE.format(name=_source(arg.value))

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if self.context.target != "neuron" or len(node.body) != 1 or has_comment_above(node):
            return
        small = node.body[0]
        call: Optional[cst.Call] = None
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            call = small.value
        elif (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call)
              and isinstance(small.value.func, cst.Attribute)
              and _source(small.targets[0].target) == _source(small.value.func.value)):
            call = small.value
        if call is None or not self._only_format_to(call):
            return
        arg = self._format_arg(call)
        assert arg is not None
        self._handled.update({call, arg.value})
        self.report(node, self._message(arg) + " (statement removed)", replacement=statement_without(node, small))

    def visit_Call(self, node: cst.Call) -> None:
        if node in self._handled:
            return
        arg = self._format_arg(node)
        if arg is None:
            return
        method = node.func.attr.value if isinstance(node.func, cst.Attribute) else dotted_name(node.func) or ""
        method = method.rsplit(".", 1)[-1]
        if self.context.target != "neuron" or method not in DROPPABLE_FORMAT:
            return  # the reference itself is reported by visit_Attribute
        self._handled.add(arg.value)
        if self._only_format_to(node):
            assert isinstance(node.func, cst.Attribute)
            self.report(node, self._message(arg), replacement=node.func.value.with_changes(
                lpar=node.lpar, rpar=node.rpar) if node.lpar else node.func.value)
        else:
            self.report(node, self._message(arg), replacement=remove_arg(node, arg))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node in self._handled or node.attr.value not in ("channels_last", "channels_last_3d"):
            return
        qualname = self.context.qualname(node)
        if qualname in CHANNELS_LAST:
            message = self.MESSAGE.format(name=qualname)
            if self.context.target != "neuron":
                message += " on Trainium (guard it by device type: it helps on GPUs)"
            self.report(node, message)


FLOAT8_MESSAGES = {
    "torch.float8_e4m3fn": (
        "`{name}`: OCP float8_e4m3fn is supported on Trainium3 only; Trainium2 supports only the non-OCP "
        "e4m3 variant (max 240) and no scaled matmul: train in bf16 on trn2", "medium"),
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


class Float8(_ReferenceRule):
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
    - shared/torchneuron.md section 4 (FP8: trn2 non-OCP e4m3, trn3 OCP e4m3fn / MX formats; no _scaled_mm)
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


FLEX_MESSAGE = (
    "`{name}`: FlexAttention support on Neuron is limited and not confirmed (its score_mod/block_mask "
    "functions are compiled by Inductor-specific templates): use F.scaled_dot_product_attention with an "
    "explicit mask or is_causal=True where the pattern allows"
)


class FlexAttention(_ReferenceRule):
    """Reports FlexAttention (``torch.nn.attention.flex_attention``).

    ## What it does
    Reports uses of ``flex_attention``, ``create_block_mask``, ``create_mask`` and the other names of
    ``torch.nn.attention.flex_attention``.

    ## Why is this bad?
    FlexAttention generates its kernel from ``score_mod`` / ``mask_mod`` Python functions through
    Inductor's Triton templates. TorchNeuron's source contains a FlexAttention legalisation pass, but
    which patterns work on the current release is **not confirmed**.

    ## Example
    ```python
    block_mask = create_block_mask(causal, B=None, H=None, Q_LEN=S, KV_LEN=S)
    out = flex_attention(q, k, v, block_mask=block_mask)
    ```
    Use instead (for causal and sliding-window style masks):
    ```python
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ```

    ## Fix safety
    No automatic fix: a ``score_mod`` (ALiBi, soft-capping) becomes an explicit additive mask.

    ## References
    - shared/torchneuron.md section 5 (FlexAttention limits: NOT confirmed)
    """

    CODE = "NP810"
    NAME = "flex-attention"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = FLEX_MESSAGE.format(name="flex_attention")
    TRIGGERS = ("flex_attention",)
    TABLE = {"torch.nn.attention.flex_attention": (FLEX_MESSAGE, "medium")}

    VALID = [Valid("import torch.nn.functional as F\nout = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n")]
    INVALID = [
        Invalid(
            "from torch.nn.attention.flex_attention import flex_attention, create_block_mask\n"
            "bm = create_block_mask(causal, None, None, S, S)\nout = flex_attention(q, k, v, block_mask=bm)\n",
            None,
        ),
    ]


DYNAMIC_METHODS = {
    "nonzero": "`nonzero()`",
    "argwhere": "`argwhere()`",
    "masked_select": "`masked_select()`",
    "unique": "`unique()`",
    "unique_consecutive": "`unique_consecutive()`",
}


def _is_mask_index(node: cst.BaseExpression) -> bool:
    """``x[x > 0]``, ``x[mask]``, ``x[self.pad_mask]``, ``x[~mask]``: a boolean mask index (heuristic)."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
        return _is_mask_index(node.expression)
    if isinstance(node, cst.Comparison):
        return True
    if isinstance(node, (cst.Name, cst.Attribute)):
        last = node.value if isinstance(node, cst.Name) else node.attr.value
        return "mask" in last.lower()
    return False


class CompiledDynamicShape(PythonRule):
    """Reports data-dependent output shapes inside code compiled with ``torch.compile``.

    ## What it does
    Inside functions decorated with ``@torch.compile`` (with or without arguments), functions passed to
    ``torch.compile(fn)`` in the same file, and the ``forward`` of classes compiled as
    ``torch.compile(Model(...))`` / ``m = Model(...); torch.compile(m)``, reports ``nonzero``,
    ``argwhere``, ``masked_select``, ``unique`` / ``unique_consecutive``, one-argument
    ``torch.where(cond)`` and boolean-mask indexing (``x[mask]``, ``x[x > 0]``; a heuristic: the index
    is a comparison or a name containing ``mask``). Masked assignment (``x[mask] = 0``) has a static
    shape and is not reported.

    ## Why is this bad?
    These ops produce a tensor whose size depends on the data. Under ``torch.compile`` that is a
    symbolic (dynamic) shape or a graph break; the neuron backend requires static shapes ("Dynamic
    shapes detected in the model, but torch-neuronx requires static shapes").

    ## Example
    ```python
    @torch.compile(backend="neuron")
    def loss_fn(logits, labels):
        valid = labels != -100
        return F.cross_entropy(logits[valid], labels[valid])
    ```
    Use instead (static shapes: weight or mask instead of selecting):
    ```python
    @torch.compile(backend="neuron")
    def loss_fn(logits, labels):
        return F.cross_entropy(logits, labels, ignore_index=-100)
    ```

    ## Fix safety
    No automatic fix: the static formulation (``torch.where``, ``masked_fill``, multiplying by a mask,
    ``ignore_index``) depends on what is done with the selection.

    ## References
    - shared/torchneuron.md sections 3.3 and 5 (dynamic shapes rejected)
    """

    CODE = "NP811"
    NAME = "compiled-dynamic-shape"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = (
        "{what} inside compiled `{where}` has a data-dependent shape: the neuron compile backend requires "
        "static shapes; use a static formulation (torch.where / masked_fill / multiply by the mask)"
    )
    TRIGGERS = ("compile",)

    VALID = [
        Valid("import torch\n@torch.compile\ndef f(x, mask):\n    return torch.where(mask, x, 0).sum()\n"),
        Valid("import torch\ndef f(x):\n    return x[x > 0]\n"),  # not compiled
        Valid("import torch\n@torch.compile\ndef f(x, mask):\n    x[mask] = 0\n    return x\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\n@torch.compile(backend='neuron')\ndef f(x, mask):\n    idx = x.nonzero()\n"
            "    return x[mask].sum() + idx.sum()\n",
            None,
            message_contains="static shapes",
        ),
        Invalid("import torch\ndef step(x):\n    return torch.unique(x)\nstep = torch.compile(step)\n", None),
        Invalid(
            "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x[x > 0]\n"
            "model = Net()\nmodel = torch.compile(model)\n",
            None,
            target="accelerator",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        # (kind, name, compiled-by-decorator) frames of the enclosing defs and classes
        self._frames: list[tuple[str, str, bool]] = []
        self._candidates: list[tuple[cst.CSTNode, str, tuple]] = []
        self._compiled_names: set[str] = set()
        self._compiled_classes: set[str] = set()
        self._instances: dict[str, str] = {}
        self._skip: set[cst.CSTNode] = set()

    def _is_compile(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Call):
            node = node.func
        return self.context.qualname(node) in COMPILE_FUNCS

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        compiled = any(self._is_compile(d.decorator) for d in node.decorators)
        self._frames.append(("def", node.name.value, compiled))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._frames.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._frames.append(("class", node.name.value, False))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._frames.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        if (len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                and isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name)):
            self._instances[node.targets[0].target.value] = node.value.func.value
        for target in node.targets:
            self._skip.add(target.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._skip.add(node.target)

    def _candidate(self, node: cst.CSTNode, what: str) -> None:
        if any(kind == "def" for kind, _, _ in self._frames):
            self._candidates.append((node, what, tuple(self._frames)))

    def visit_Call(self, node: cst.Call) -> None:
        if self._is_compile(node.func) and node.args and node.args[0].keyword is None:
            target = node.args[0].value
            if isinstance(target, cst.Name):
                self._compiled_names.add(target.value)
            elif isinstance(target, cst.Call) and isinstance(target.func, cst.Name):
                self._compiled_classes.add(target.func.value)
            return
        if not self._frames:
            return
        func = node.func
        qualname = self.context.qualname(func) or ""
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        name = qualname[len("torch."):] if qualname.startswith("torch.") else method
        if name in DYNAMIC_METHODS and (qualname.startswith("torch.") or method is not None):
            self._candidate(node, DYNAMIC_METHODS[name])
        elif qualname == "torch.where" and len(node.args) == 1:
            self._candidate(node, "one-argument `torch.where(cond)`")

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if node in self._skip or not self._frames:
            return
        for element in node.slice:
            if isinstance(element.slice, cst.Index) and _is_mask_index(element.slice.value):
                self._candidate(node, f"boolean-mask indexing `{_source(node)}`")
                return

    def leave_Module(self, original_node: cst.Module) -> None:
        classes = set(self._compiled_classes)
        functions = set()
        for name in self._compiled_names:
            if name in self._instances:
                classes.add(self._instances[name])
            else:
                functions.add(name)
                classes.add(name)
        for node, what, frames in self._candidates:
            where = self._compiled_frame(frames, functions, classes)
            if where is not None:
                self.report(node, self.MESSAGE.format(what=what, where=where))

    @staticmethod
    def _compiled_frame(frames: tuple, functions: set[str], classes: set[str]) -> Optional[str]:
        for i, (kind, name, decorated) in enumerate(frames):
            if kind != "def":
                continue
            if decorated or (name in functions and (i == 0 or frames[i - 1][0] != "class")):
                return name
            if name == "forward" and i > 0 and frames[i - 1][0] == "class" and frames[i - 1][1] in classes:
                return f"{frames[i - 1][1]}.forward"
        return None
