"""The RNG wrappers of activation checkpointing in a compiled region, lowered for neuron tensors.

For every recomputed op tagged ``nondeterministic_seeded`` (dropout, rand*, and the fused SDPA ops,
which take a dropout_p) AOTAutograd's partitioner emits ``run_and_save_rng_state`` in the forward
graph and ``run_with_rng_state`` in the backward graph, so that the recompute in backward draws what
the forward drew. PyTorch implements these higher-order ops for cpu/cuda/hpu/xpu only ("Backend not
supported for neuron"); the backend compiler is expected to lower them (Inductor does too). Here they
save and restore the CPU default generator and the neuron device's generator (device/rng.py).
"""

from __future__ import annotations


def rng_hops() -> dict:
    """The higher-order ops AOTAutograd's partitioner puts around recomputed random ops -> the index of
    the wrapped op among their arguments."""
    try:
        from torch._prims import rng_prims
    except Exception:  # noqa: BLE001
        return {}
    return {rng_prims.run_and_save_rng_state: 0, rng_prims.run_with_rng_state: 1}


def _rng_device(args, kwargs):
    """The device whose generator a wrapped random op uses: its first tensor argument's (PyTorch's
    rule in torch/_prims/rng_prims.py), else its ``device=`` argument."""
    import torch
    from torch.utils._pytree import tree_leaves

    for a in tree_leaves((args, kwargs)):
        if isinstance(a, torch.Tensor):
            return a.device
    d = kwargs.get("device")
    return torch.device(d) if d is not None else None


def _rng_state(dev):
    """What a random op on ``dev`` may draw from: the CPU default generator (ops without a generator
    argument, e.g. native_dropout and SDPA's dropout, run CPU kernels with it) and the neuron device's
    generator (ops with one: rand, randn, bernoulli_, ...), as one uint8 tensor."""
    import torch

    return torch.cat([torch.get_rng_state(), torch.neuron.get_rng_state(dev)])


def _set_rng_state(state, dev) -> None:
    import torch

    n = torch.get_rng_state().numel()
    torch.set_rng_state(state[:n].clone())
    torch.neuron.set_rng_state(state[n:].clone(), dev)


def _neuron_run_and_save_rng_state(op, *args, **kwargs):
    """run_and_save_rng_state on neuron tensors: (the generator states, op(*args))."""
    from torch._prims import rng_prims

    dev = _rng_device(args, kwargs)
    if dev is None or dev.type != "neuron":
        return rng_prims.run_and_save_rng_state(op, *args, **kwargs)
    return _rng_state(dev), op(*args, **kwargs)


def _neuron_run_with_rng_state(rng_state, op, *args, **kwargs):
    """run_with_rng_state on neuron tensors: op(*args) with the generators set to the saved states,
    then restored (the recompute in backward draws what the forward drew)."""
    from torch._prims import rng_prims

    dev = _rng_device(args, kwargs)
    if dev is None or dev.type != "neuron":
        return rng_prims.run_with_rng_state(rng_state, op, *args, **kwargs)
    current = _rng_state(dev)
    _set_rng_state(rng_state, dev)
    try:
        return op(*args, **kwargs)
    finally:
        _set_rng_state(current, dev)


def lower_rng_hops(g) -> int:
    """Activation checkpointing (``torch.utils.checkpoint`` in a compiled region): for every recomputed
    op tagged ``nondeterministic_seeded`` (dropout, rand*, and the fused SDPA ops, which take a
    dropout_p) the partitioner emits ``run_and_save_rng_state`` in the forward graph and
    ``run_with_rng_state`` in the backward graph. PyTorch implements these for cpu/cuda/hpu/xpu only
    ("Backend not supported for neuron"); the backend compiler lowers them (Inductor does too): here
    they save and restore the CPU default generator and the neuron device's generator. Returns
    how many nodes were lowered."""
    try:
        from torch._prims import rng_prims
    except Exception:  # noqa: BLE001
        return 0
    lowered = {rng_prims.run_and_save_rng_state: _neuron_run_and_save_rng_state,
               rng_prims.run_with_rng_state: _neuron_run_with_rng_state}
    n = 0
    for node in g.graph.nodes:
        if node.op == "call_function" and node.target in lowered:
            node.target = lowered[node.target]
            n += 1
    if n:
        g.recompile()
    return n
