"""The lowering check of a compiled ATen graph: every op must be a native op of the simulator's op
policy (``rules/op_policy.toml`` [native]) or lower without a kernel of its own (views, metadata,
functionalization copies, shape queries, collectives); anything else has no Neuron lowering and fails
the compile (or falls back to eager, see backend.py)."""

from __future__ import annotations

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
    "view_as", "expand_as", "unbind", "_reshape_alias", "contiguous", "resize_", "set_",
})


def op_name(target) -> str | None:
    """``name`` or ``name.overload`` of an ATen op (None for Python glue such as operator.getitem)."""
    import torch

    if isinstance(target, torch._ops.OpOverload):
        ns, name = target._schema.name.split("::", 1)
        return f"{name}.{target._overloadname}" if target._overloadname != "default" else name
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name.split("::", 1)[1]
    return None


def unlowerable_ops(g) -> list[str]:
    """The ops of graph module ``g`` without a Neuron lowering (``ns::name``, in graph order)."""
    from .. import policy

    native = set(policy.native_ops())
    hops = rng_hops()
    bad: list[str] = []
    for node in g.graph.nodes:
        if node.op != "call_function":
            continue
        target = node.target
        if target in hops:  # an RNG wrapper of activation checkpointing: the wrapped op is what lowers
            target = node.args[hops[target]] if len(node.args) > hops[target] else None
        name = op_name(target)
        if name is None:
            continue  # operator.getitem and other Python glue
        ns = target._schema.name.split("::", 1)[0] if hasattr(target, "_schema") else "aten"
        base = name.split(".", 1)[0]
        if ns != "aten":
            if ns in ("_c10d_functional", "c10d_functional", "prims") or base in STRUCTURAL_OPS:
                continue
        elif name in native or base in native or base in STRUCTURAL_OPS:
            continue
        qual = f"{ns}::{name}"
        if qual not in bad:
            bad.append(qual)
    return bad
