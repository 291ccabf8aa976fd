"""The lowering check of a compiled ATen graph, after the decompositions of the compile path.

TorchNeuron's compile path lowers an AOTAutograd graph through Torch-MLIR to StableHLO
(torch_neuronx/neuron_dynamo_backend/backend.py: ``aot_autograd(decompositions=...)``, then
fx/fx_transform.py: ``torchdynamo-export-to-torch-backend-pipeline``, whose DecomposeComplexOps pass
rewrites composite ATen ops such as ``rsub``, ``hardswish`` and ``hardsigmoid`` into primitive ones,
then ``torch-backend-to-stablehlo-backend-pipeline``); the graph fails to compile on an op that no
step decomposes and StableHLO cannot express. The simulator judges each op the same way: an op that
is a native op of the op policy (``rules/op_policy.toml`` [native]) or lowers without a kernel of its
own (views, metadata, functionalization copies, shape queries, collectives) lowers; so do the forms
AOTAutograd's functionalization gives what eager runs natively: the functional op of a native in-place
op (``uniform_`` -> ``uniform``, ``normal_`` -> ``normal_functional``) and the write through a view
(``slice_scatter``, ``as_strided_scatter``, ...: TorchNeuron's FX passes functionalize in-place ops and
legalise random ops, torchneuron.md 3.1); any other op is
decomposed with PyTorch's core ATen decompositions (``torch._decomp.core_aten_decompositions()``,
the table Torch-MLIR and every StableHLO exporter lower to) and lowers when every op of its
decomposition does. An op with no decomposition, or one that decomposes into an op without a
lowering, fails the compile (or falls back to eager, see backend.py). The graph itself is not
rewritten: it runs its original ops, so the numbers are the CPU kernels'."""

from __future__ import annotations

import functools

from .rng_wrappers import rng_hops

# FX graph ops that lower without a kernel of their own (views, metadata, functionalization copies,
# shape queries). Everything else must be a native op of the policy to compile.
STRUCTURAL_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "alias", "detach", "t", "transpose", "permute", "expand", "squeeze",
    "unsqueeze", "slice", "select", "split", "split_with_sizes", "chunk", "narrow", "as_strided", "copy",
    "copy_", "clone", "_to_copy", "empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided",
    "new_zeros", "new_ones", "new_full", "full", "full_like", "zeros", "zeros_like", "ones", "ones_like",
    "scalar_tensor", "lift_fresh", "lift_fresh_copy", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size",
    "view_as", "expand_as", "unbind", "_reshape_alias", "contiguous", "resize_", "set_", "diagonal",
})
LOWERED_NAMESPACES = ("_c10d_functional", "c10d_functional", "prims")


def op_name(target) -> str | None:
    """``name`` or ``name.overload`` of an ATen op (None for Python glue such as operator.getitem)."""
    import torch

    if isinstance(target, torch._ops.OpOverload):
        ns, name = target._schema.name.split("::", 1)
        return f"{name}.{target._overloadname}" if target._overloadname != "default" else name
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name.split("::", 1)[1]
    return None


@functools.lru_cache(maxsize=1)
def decomposition_table() -> dict:
    """PyTorch's core ATen decompositions (built once per process)."""
    from torch._decomp import core_aten_decompositions

    return dict(core_aten_decompositions())


def _lowers_directly(target, native: set[str]) -> bool:
    name = op_name(target)
    if name is None:
        return True  # operator.getitem and other Python glue
    ns = target._schema.name.split("::", 1)[0] if hasattr(target, "_schema") else "aten"
    base = name.split(".", 1)[0]
    if ns != "aten":
        return ns in LOWERED_NAMESPACES or base in STRUCTURAL_OPS
    return (name in native or base in native or base in STRUCTURAL_OPS or _view_write(base)
            or _functional_of_native(base, native))


def _view_write(base: str) -> bool:
    """``base`` is functionalization's write through a structural view (``slice_scatter``,
    ``select_scatter``, ``diagonal_scatter``, ``as_strided_scatter``: ``x[:, 1:3] = y``, a gradient
    written into a view of a fresh buffer): a functionalization copy, lowered like the view it inverts
    (torchneuron.md 3.1, "functionalize copy_/inplace")."""
    return base.endswith("_scatter") and base[: -len("_scatter")] in STRUCTURAL_OPS


def _functional_of_native(base: str, native: set[str]) -> bool:
    """``base`` is the functional form that AOTAutograd's functionalization gives a native in-place op
    (``uniform_`` -> ``uniform``, ``normal_`` -> ``normal_functional``, ``_foreach_add_`` ->
    ``_foreach_add``): TorchNeuron's compile path functionalizes in-place ops and legalises random ops
    before lowering (torchneuron.md 3.1), so the eager kernel's lowering serves the functional op."""
    stem = base[: -len("_functional")] if base.endswith("_functional") else base
    return not stem.endswith("_") and f"{stem}_" in native


def _meta_like(value):
    """A meta tensor with the shape, strides and dtype of a graph value (other values unchanged)."""
    import torch

    if isinstance(value, torch.Tensor):
        return torch.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device="meta")
    if isinstance(value, (list, tuple)):
        return type(value)(_meta_like(v) for v in value)
    return value


def decomposed_ops(node) -> list | None:
    """The ops that ``node``'s op decomposes into under the core ATen table (recursively), or None
    when the table has no decomposition for it or the decomposition cannot be traced."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    table = decomposition_table()
    if node.target not in table:
        return None

    def value(arg):
        return _meta_like(arg.meta.get("val"))

    try:
        args = torch.fx.node.map_arg(node.args, value)
        kwargs = torch.fx.node.map_arg(node.kwargs, value)
        traced = make_fx(lambda: node.target(*args, **kwargs), decomposition_table=table)()
    except Exception:  # noqa: BLE001 - an untraceable decomposition counts as no decomposition
        return None
    return [n.target for n in traced.graph.nodes if n.op == "call_function"]


def unlowerable_ops(g) -> list[str]:
    """The ops of graph module ``g`` without a Neuron lowering (``ns::name``, in graph order)."""
    from .. import policy

    native = set(policy.native_ops())
    hops = rng_hops()
    bad: list[str] = []
    judged: dict = {}
    for node in g.graph.nodes:
        if node.op != "call_function":
            continue
        target = node.target
        if target in hops:  # an RNG wrapper of activation checkpointing: the wrapped op is what lowers
            target = node.args[hops[target]] if len(node.args) > hops[target] else None
        if _lowers_directly(target, native):
            continue
        if target is node.target:
            if target not in judged:
                parts = decomposed_ops(node)
                judged[target] = parts is not None and all(_lowers_directly(p, native) for p in parts)
            if judged[target]:
                continue
        ns = target._schema.name.split("::", 1)[0] if hasattr(target, "_schema") else "aten"
        qual = f"{ns}::{op_name(target)}"
        if qual not in bad:
            bad.append(qual)
    return bad
