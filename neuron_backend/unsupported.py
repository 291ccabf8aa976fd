"""Python-level checks for unsupported features the dispatcher cannot see cheaply.

Forward-mode AD (dual tensors) and NestedTensor construction on neuron are caught here by wrapping
a handful of public constructors (not per op). Sparse layouts, complex dtypes, memory formats,
sparse embedding / gather(sparse_grad) and the nn.MultiheadAttention fast path are checked in C++.
"""

from __future__ import annotations

import functools

import torch

from . import events, policy

_installed = False


def _is_neuron(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "neuron"


def _msg(feature: str) -> str:
    return policy.unsupported_feature(feature).get("message", feature)


def _wrap_forward_ad() -> None:
    import torch.autograd.forward_ad as fwad

    orig = fwad.make_dual

    @functools.wraps(orig)
    def make_dual(tensor, tangent, *, level=None):
        if _is_neuron(tensor) or _is_neuron(tangent):
            events.unsupported("forward_ad", "torch.autograd.forward_ad.make_dual", _msg("forward_ad"))
        return orig(tensor, tangent, level=level)

    fwad.make_dual = make_dual


def _wrap_nested() -> None:
    import torch.nested as nested

    def wrap(name):
        orig = getattr(nested, name, None)
        if orig is None:
            return

        @functools.wraps(orig)
        def fn(*args, **kwargs):
            dev = kwargs.get("device")
            on_neuron = (dev is not None and torch.device(dev).type == "neuron") or any(
                _is_neuron(a) for a in args
            ) or any(_is_neuron(t) for a in args if isinstance(a, (list, tuple)) for t in a)
            if on_neuron:
                events.unsupported("nested_tensor", f"torch.nested.{name}", _msg("nested_tensor"))
            out = orig(*args, **kwargs)
            if not on_neuron and isinstance(out, torch.Tensor) and out.device.type == "neuron":
                events.unsupported("nested_tensor", f"torch.nested.{name}", _msg("nested_tensor"))
            return out

        setattr(nested, name, fn)

    for name in ("nested_tensor", "as_nested_tensor", "nested_tensor_from_jagged", "narrow"):
        wrap(name)


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    _wrap_forward_ad()
    _wrap_nested()
