"""FLOPs and bytes of one call of a recorded op signature (neuron_backend/EVENTS.md, ``eager_compile``).

A signature holds one string per schema argument: tensors as ``bf16[4,32,64]`` (suffix ``nc`` for
non-contiguous, ``@cpu`` for a CPU tensor), lists in brackets truncated after 8 items (``...+20 1536e
6144B``: 20 more items, their tensors' elements and bytes; an older simulator wrote ``...+20`` alone and
those count at the mean of the shown items), scalars as text. Counts follow the usual
conventions (docs/estimate.md): a multiply-add is 2 FLOPs; bytes are every tensor argument read once
plus the result written once, at each tensor's own dtype: one eager call's own traffic (the bytes of ops
inside compiled graphs are recounted under fusion by fusion.py).

``work`` gives all the estimate needs of one call in one answer: its family, FLOPs, bytes and compute
dtype, and for an embedding lookup the tokens it reads (the elements of its integer index tensor).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Iterable, Optional, Sequence

DTYPE_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1,
               "b8": 1, "c64": 8, "c128": 16}
# The compute dtype a peak is looked up under (devices.toml `peak_tflops` keys).
COMPUTE_DTYPE = {"f32": "fp32", "f64": "fp32", "bf16": "bf16", "f16": "f16", "c64": "fp32", "c128": "fp32"}
TENSOR = re.compile(r"^(?P<dtype>[a-zA-Z]+\d*)\[(?P<dims>[\d,\s]*)\](?:nc)?(?P<cpu>@cpu)?$")
# "...+20": 20 more items; "...+20 1536e 6144B": and the omitted tensors' elements and bytes (a newer simulator)
MORE = re.compile(r"^\.\.\.\+(?P<n>\d+)(?: (?P<elements>\d+)e (?P<bytes>\d+)B)?$")

FAMILIES = ("matmul", "convolution", "attention", "elementwise", "reduction", "norm", "softmax", "embedding",
            "copy/view", "other", "fallback")
MATMUL = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot", "addbmm", "_addmm_activation"}
CONVOLUTION = {"convolution", "_convolution", "convolution_overrideable", "conv1d", "conv2d", "conv3d",
               "cudnn_convolution", "mkldnn_convolution"}
CONVOLUTION_BACKWARD = {"convolution_backward", "convolution_backward_overrideable"}
SOFTMAX = {"_softmax", "_log_softmax", "softmax", "log_softmax", "_softmax_backward_data",
           "_log_softmax_backward_data"}
NORM = {"native_layer_norm", "native_layer_norm_backward", "native_group_norm", "native_group_norm_backward",
        "native_batch_norm", "native_batch_norm_backward", "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training", "_fused_rms_norm", "_fused_rms_norm_backward", "rms_norm"}
REDUCTION = {"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "norm", "linalg_vector_norm",
             "_foreach_norm", "var", "std", "var_mean", "std_mean", "prod", "logsumexp", "nll_loss_forward",
             "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward", "any", "all", "cumsum", "topk",
             "sort"}
EMBEDDING = {"embedding", "embedding_dense_backward", "index_select", "gather", "embedding_bag",
             "_embedding_bag", "scatter_add", "index_add"}
COPY = {"_to_copy", "copy_", "clone", "cat", "stack", "fill_", "zero_", "index", "_index_put_impl_",
        "index_put_", "masked_fill_", "contiguous", "empty", "zeros", "ones", "full", "arange", "repeat",
        "constant_pad_nd", "flip", "roll", "where", "masked_scatter_"}
# Views move no bytes (metadata only): in compiled graphs they appear as ops of their own.
VIEWS = {"view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose", "permute", "expand", "narrow",
         "slice", "select", "split", "split_with_sizes", "unbind", "squeeze", "unsqueeze", "detach", "alias",
         "as_strided", "unfold", "diagonal", "view_as_real", "view_as_complex", "_unsafe_split"}
# FLOPs per output element of the other families (a norm: mean, variance, scale and shift).
FLOPS_PER_ELEMENT = {"softmax": 5, "softmax_backward": 4, "norm": 8, "norm_backward": 12, "adam": 16}
TOKEN_OPS = {"embedding", "embedding_bag", "_embedding_bag"}  # argument 1: the indices, one per token
INTEGER_DTYPES = {"i64", "i32", "i16", "i8", "u8"}


@dataclass(frozen=True)
class Tensor:
    dtype: str
    shape: tuple[int, ...]
    on_cpu: bool = False

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES.get(self.dtype, 4)


@dataclass(frozen=True)
class Work:
    """One call: its family, FLOPs, bytes moved and the dtype its FLOPs run in; for an embedding lookup,
    the tokens it reads (``token_count``)."""

    family: str
    flops: float
    bytes: float
    dtype: str  # compute dtype: fp32 | bf16 | f16 ... (devices.toml `peak_tflops` keys)
    tokens: Optional[int] = None  # an embedding lookup's indices (None: not a lookup, or no integer indices)
    gemm: Optional[tuple[int, int, int, int]] = None  # a matmul's (batch, M, N, K): efficiency.py's tiles


def parse_tensor(text: Any) -> Optional[Tensor]:
    if not isinstance(text, str):
        return None
    m = TENSOR.match(text.strip())
    if not m or m.group("dtype") not in DTYPE_BYTES:
        return None
    dims = tuple(int(d) for d in m.group("dims").replace(" ", "").split(",") if d)
    return Tensor(m.group("dtype"), dims, bool(m.group("cpu")))


def split_items(text: str) -> Optional[list[str]]:
    """The items of a list argument ``[f32[2,3], f32[4], ...+20]`` (None when ``text`` is no list)."""
    if not (text.startswith("[") and text.endswith("]")):
        return None
    out, depth, start, inner = [], 0, 0, text[1:-1]
    for i, ch in enumerate(inner):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            out.append(inner[start:i].strip())
            start = i + 1
    if inner.strip():
        out.append(inner[start:].strip())
    return out


@dataclass(frozen=True)
class TensorList:
    """The tensors a list argument shows, and its totals over every item (the omitted ones too)."""

    shown: list[Tensor]
    numel: float
    nbytes: float


def tensor_list(text: Any) -> TensorList:
    """The tensors of a list argument with the elements and bytes of all of its items: the omitted
    items' totals when the signature carries them, else the mean of the shown items (an older simulator)."""
    items = split_items(text) if isinstance(text, str) else None
    if items is None:
        return TensorList([], 0.0, 0.0)
    tensors: list[Tensor] = []
    more = 0
    numel = nbytes = 0.0
    for item in items:
        m = MORE.match(item)
        if m and m.group("elements") is not None:
            numel += int(m.group("elements"))
            nbytes += int(m.group("bytes"))
        elif m:
            more += int(m.group("n"))
        elif (t := parse_tensor(item)) is not None:
            tensors.append(t)
    shown_numel = sum(t.numel for t in tensors)
    shown_bytes = sum(t.nbytes for t in tensors)
    scale = 1 + more / len(tensors) if tensors else 1
    return TensorList(tensors, numel + shown_numel * scale, nbytes + shown_bytes * scale)


def integers(text: Any) -> list[int]:
    items = split_items(text) if isinstance(text, str) else None
    try:
        return [int(i) for i in items] if items is not None else [int(text)]
    except (TypeError, ValueError):
        return []


def base_name(op: str) -> str:
    """``aten::add_.Tensor`` -> ``add_``; ``aten::_foreach_norm.Scalar`` -> ``_foreach_norm``."""
    return op.split("::", 1)[-1].split(".", 1)[0]


def token_count(op: str, signature: Sequence[Any]) -> Optional[int]:
    """The indices one call of an embedding lookup reads (None: not a lookup, or no integer index tensor)."""
    if base_name(op) not in TOKEN_OPS or len(signature) < 2:
        return None
    indices = parse_tensor(signature[1])
    return indices.numel if indices is not None and indices.dtype in INTEGER_DTYPES else None


def compute_dtype(tensors: Iterable[Tensor]) -> str:
    dtypes = [t.dtype for t in tensors if t.dtype in COMPUTE_DTYPE]
    return COMPUTE_DTYPE[dtypes[0]] if dtypes else "fp32"


def _flat(signature: Sequence[Any]) -> tuple[list[Tensor], float]:
    """Every tensor the signature shows (list items too) and the bytes of all of them, the omitted list
    items included (``tensor_list``)."""
    tensors: list[Tensor] = []
    total = 0.0
    for arg in signature:
        t = parse_tensor(arg)
        if t is not None:
            tensors.append(t)
            total += t.nbytes
            continue
        listed = tensor_list(arg)
        tensors.extend(listed.shown)
        total += listed.nbytes
    return tensors, total


def work(op: str, signature: Sequence[Any]) -> Work:
    """FLOPs and bytes of one call of ``op`` with ``signature`` (docs/estimate.md, "Counting")."""
    name = base_name(op)
    tensors, in_bytes = _flat(signature)
    dtype = compute_dtype(tensors)
    biggest = max(tensors, key=lambda t: t.numel, default=None)
    out_elems = biggest.numel if biggest else 0
    out_bytes = biggest.nbytes if biggest else 0
    if name in MATMUL:
        return _matmul(name, [t for t in tensors], in_bytes, dtype)
    if name in CONVOLUTION or name in CONVOLUTION_BACKWARD:
        return _convolution(name, signature, in_bytes, dtype)
    if "scaled_dot_product" in name or "flash_attention" in name or "efficient_attention" in name:
        return _attention(name, signature, in_bytes, dtype)
    if name in SOFTMAX:
        k = FLOPS_PER_ELEMENT["softmax_backward" if "backward" in name else "softmax"]
        return Work("softmax", k * out_elems, in_bytes + out_bytes, dtype)
    if name in NORM:
        k = FLOPS_PER_ELEMENT["norm_backward" if "backward" in name else "norm"]
        return Work("norm", k * out_elems, in_bytes + out_bytes, dtype)
    if name in REDUCTION:
        small = min(tensors, key=lambda t: t.numel, default=None)
        return Work("reduction", float(out_elems), in_bytes + (small.nbytes if small else 0), dtype)
    if name in EMBEDDING:
        return replace(_embedding(name, tensors, in_bytes, dtype), tokens=token_count(op, signature))
    if name in VIEWS:
        return Work("copy/view", 0.0, 0.0, dtype)
    if name in COPY or name.startswith("_to_") or name.startswith("empty"):
        # fill_/zero_ only write; copy_ and an out= overload (FSDP2's cat.out) have the tensor they write
        # among their arguments already; the others write a result the size of their largest tensor
        into_argument = name == "copy_" or op.endswith(".out")
        written = out_bytes if name in ("fill_", "zero_") else in_bytes if into_argument else in_bytes + out_bytes
        return Work("copy/view", 0.0, float(written), dtype)
    if name.startswith("_fused_adam") or name.startswith("_fused_sgd"):
        elems = tensor_list(signature[0]).numel if signature else 0.0
        return Work("elementwise", FLOPS_PER_ELEMENT["adam"] * elems, 2 * in_bytes, dtype)
    if name.startswith("_foreach_"):  # per element of the first list: compute; every list read, the first written
        first = tensor_list(signature[0]) if signature else TensorList([], 0.0, 0.0)
        written = 0.0 if name.startswith("_foreach_norm") else first.nbytes  # a norm writes one scalar per tensor
        return Work("elementwise", first.numel, in_bytes + written, dtype)
    if tensors:  # pointwise: one FLOP per output element; an in-place op writes its first argument
        written = tensors[0].nbytes if name.endswith("_") else out_bytes
        return Work("elementwise", float(out_elems), in_bytes + written, dtype)
    return Work("other", 0.0, 0.0, dtype)


def _matmul(name: str, tensors: list[Tensor], in_bytes: float, dtype: str) -> Work:
    mats = [t for t in tensors if len(t.shape) >= 2]
    if name in ("addmm", "baddbmm", "addbmm", "_addmm_activation"):
        mats = mats[-2:]  # the bias (self) comes first; it may itself be 2-D
    if name in ("dot",) and len(tensors) >= 2:
        n = tensors[0].numel
        return Work("matmul", 2.0 * n, in_bytes + DTYPE_BYTES.get(tensors[0].dtype, 4), dtype)
    if name in ("mv", "addmv"):
        m = mats[0] if mats else None
        flops = 2.0 * m.numel if m else 0.0
        return Work("matmul", flops, in_bytes + (m.shape[0] * DTYPE_BYTES.get(m.dtype, 4) if m else 0), dtype)
    if name == "linear" and len(mats) >= 2:  # input [..., K], weight [N, K]
        a, w = mats[0], mats[1]
        rows = a.numel // a.shape[-1]
        out = rows * w.shape[0]
        return Work("matmul", 2.0 * rows * w.shape[0] * a.shape[-1], in_bytes + out * DTYPE_BYTES.get(a.dtype, 4), dtype,
                    gemm=(1, rows, w.shape[0], a.shape[-1]))
    if len(mats) < 2:
        return Work("matmul", 0.0, in_bytes, dtype)
    a, b = mats[0], mats[1]
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = max(math.prod(a.shape[:-2]), math.prod(b.shape[:-2]))
    out = batch * m * n
    return Work("matmul", 2.0 * batch * m * n * k, in_bytes + out * DTYPE_BYTES.get(a.dtype, 4), dtype,
                gemm=(batch, m, n, k))


def _conv_args(signature: Sequence[Any], first: int) -> tuple[list[int], list[int], list[int], bool, int]:
    """stride, padding, dilation, transposed, groups of a convolution's schema from argument ``first``."""
    def arg(i: int) -> Any:
        return signature[first + i] if first + i < len(signature) else None
    stride, padding, dilation = integers(arg(0)), integers(arg(1)), integers(arg(2))
    transposed = str(arg(3)) == "True"
    groups = integers(arg(5))
    return stride, padding, dilation, transposed, groups[0] if groups else 1


def conv_output(spatial: Sequence[int], kernel: Sequence[int], stride: list[int], padding: list[int],
                dilation: list[int]) -> list[int]:
    def at(values: list[int], i: int, default: int) -> int:
        return values[i] if i < len(values) else (values[0] if values else default)
    return [max((n + 2 * at(padding, i, 0) - at(dilation, i, 1) * (k - 1) - 1) // at(stride, i, 1) + 1, 0)
            for i, (n, k) in enumerate(zip(spatial, kernel))]


def conv_flops(x: Tensor, w: Tensor, stride: list[int], padding: list[int], dilation: list[int],
               transposed: bool, groups: int) -> tuple[float, int]:
    """FLOPs of a forward convolution and its output's element count. Transposed: the input of the
    equivalent forward convolution is the output (weight [C_in, C_out/groups, k...])."""
    kernel = w.shape[2:]
    if transposed:
        c_out = w.shape[1] * groups
        macs_per_input = (w.shape[1]) * math.prod(kernel)
        spatial_out = [(n - 1) * (stride[i] if i < len(stride) else 1) - 2 * (padding[i] if i < len(padding) else 0)
                       + (dilation[i] if i < len(dilation) else 1) * (k - 1) + 1
                       for i, (n, k) in enumerate(zip(x.shape[2:], kernel))]
        return 2.0 * x.numel * macs_per_input, x.shape[0] * c_out * math.prod(spatial_out)
    out = conv_output(x.shape[2:], kernel, stride, padding, dilation)
    c_out = w.shape[0]
    out_elems = x.shape[0] * c_out * math.prod(out)
    return 2.0 * out_elems * w.shape[1] * math.prod(kernel), out_elems


def _convolution(name: str, signature: Sequence[Any], in_bytes: float, dtype: str) -> Work:
    backward = name in CONVOLUTION_BACKWARD
    # forward: input, weight, bias, stride, padding, dilation, transposed, output_padding, groups
    # backward: grad_output, input, weight, [bias_sizes,] stride, ..., groups, output_mask
    x = parse_tensor(signature[1] if backward else signature[0]) if len(signature) > 1 else None
    w = parse_tensor(signature[2] if backward else signature[1]) if len(signature) > 2 else None
    if x is None or w is None or len(w.shape) < 3:
        return Work("convolution", 0.0, in_bytes, dtype)
    # convolution_backward has bias_sizes after weight; convolution_backward_overrideable does not
    first = 4 if name == "convolution_backward" else 3
    stride, padding, dilation, transposed, groups = _conv_args(signature, first)
    flops, out_elems = conv_flops(x, w, stride, padding, dilation, transposed, groups)
    if backward:  # grad_input and grad_weight each cost one forward (output_mask says which ran)
        at = first + 6
        mask = [m.strip() == "True" for m in (split_items(str(signature[at])) or [])] if len(signature) > at else []
        passes = (mask[0] if mask else True) + (mask[1] if len(mask) > 1 else True)
        return Work("convolution", flops * passes, in_bytes + x.nbytes + w.nbytes, dtype)
    return Work("convolution", flops, in_bytes + out_elems * DTYPE_BYTES.get(x.dtype, 4), dtype)


# Where each SDPA entry point's schema has ``is_causal`` (signatures are in schema order; checked against
# torch 2.13's schemas by tests/check/estimate/test_estimate_cost_model.py)
IS_CAUSAL_ARG = {"scaled_dot_product_attention": 5, "_scaled_dot_product_fused_attention_overrideable": 5,
                 "_scaled_dot_product_fused_attention_overrideable_backward": 13,
                 "_scaled_dot_product_flash_attention": 4, "_scaled_dot_product_flash_attention_backward": 11,
                 "_scaled_dot_product_flash_attention_for_cpu": 4,
                 "_scaled_dot_product_flash_attention_for_cpu_backward": 7,
                 "_scaled_dot_product_efficient_attention": 6,
                 "_scaled_dot_product_efficient_attention_backward": 11,
                 "_scaled_dot_product_cudnn_attention": 6, "_scaled_dot_product_cudnn_attention_backward": 14}


def causal_fraction(queries: int, keys: int) -> float:
    """The share of the L x S score matrix a causal mask keeps (PyTorch's ``is_causal``: query i sees keys
    0..i, top-left aligned): sum over i < L of min(i + 1, S), over L * S."""
    if queries <= 0 or keys <= 0:
        return 1.0
    full = min(queries, keys)  # rows 0..full-1 keep i + 1 keys; the rest keep all S
    kept = full * (full + 1) / 2 + (queries - full) * keys
    return kept / (queries * keys)


def is_causal(name: str, signature: Sequence[Any]) -> bool:
    at = IS_CAUSAL_ARG.get(name)
    return at is not None and at < len(signature) and str(signature[at]).strip() == "True"


def _attention(name: str, signature: Sequence[Any], in_bytes: float, dtype: str) -> Work:
    """SDPA: Q [..., L, E], K [..., S, E], V [..., S, Ev]: Q K^T and P V, 2 L S (E + Ev) FLOPs per batch
    and head, times the share of scores a causal mask keeps when the signature says ``is_causal``
    (a flash kernel skips the masked blocks); the backward recomputes P and takes 4 more products: 2.5x
    the forward."""
    backward = "backward" in name
    args = [parse_tensor(a) for a in signature]
    start = 1 if backward else 0  # the backward takes grad_out first
    qkv = [t for t in args[start:start + 3] if t is not None]
    if len(qkv) < 3 or min(len(t.shape) for t in qkv) < 2:
        return Work("attention", 0.0, in_bytes, dtype)
    q, k, v = qkv
    heads = math.prod(q.shape[:-2])
    forward = 2.0 * heads * q.shape[-2] * k.shape[-2] * (q.shape[-1] + v.shape[-1])
    if is_causal(name, signature):
        forward *= causal_fraction(q.shape[-2], k.shape[-2])
    out = heads * q.shape[-2] * v.shape[-1] * DTYPE_BYTES.get(q.dtype, 4)
    if backward:
        return Work("attention", 2.5 * forward, in_bytes + q.nbytes + k.nbytes + v.nbytes, dtype)
    return Work("attention", forward, in_bytes + out, dtype)


def _embedding(name: str, tensors: list[Tensor], in_bytes: float, dtype: str) -> Work:
    """A lookup reads the indices and the rows it gathers (not the whole table) and writes the rows."""
    if name == "embedding" and len(tensors) >= 2:
        table, idx = tensors[0], tensors[1]
        row = (table.nbytes // table.shape[0]) if table.shape else 0
        rows = idx.numel * row
        return Work("embedding", 0.0, float(idx.nbytes + 2 * rows), dtype)
    if name == "embedding_dense_backward" and len(tensors) >= 2:  # scatter-add of the gradient rows
        grad = tensors[0]
        return Work("embedding", float(grad.numel), float(in_bytes + grad.nbytes), dtype)
    biggest = max(tensors, key=lambda t: t.numel, default=None)
    return Work("embedding", 0.0, float(in_bytes + (biggest.nbytes if biggest else 0)), dtype)
