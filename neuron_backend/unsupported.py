"""Python-level checks for unsupported features the dispatcher cannot see cheaply, and the feature
policy handed to the C++ core.

Forward-mode AD (dual tensors) and NestedTensor construction on neuron are caught here by wrapping
a handful of public constructors (not per op). Sparse layouts, complex dtypes, memory formats,
sparse embedding / gather(sparse_grad) and the nn.MultiheadAttention fast path are checked in C++.

install() also gives the core the complex-decomposition setting (TORCH_NEURONX_COMPLEX_DECOMPOSE and
the op lists of rules/op_policy.toml [complex]) and the memory-format notes ([memory_format]), and
the callback through which the core reports features that do not raise on Trainium (``_note``: once
per new signature, never per call).
"""

from __future__ import annotations

import functools
import sys

import torch

from . import events, policy

_installed = False
_notes: dict[tuple, dict] = {}  # (feature, op, action, site) -> its `unsupported` event


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


def _note(feature: str, op: str, message: str, action: str) -> None:
    """A feature that changes what runs on Trainium without raising ("decomposed", "cpu_fallback",
    "unconfirmed"): one `unsupported` event per feature, op, action and user site, whose `count` is the
    number of signatures first seen there (called once per new signature)."""
    try:
        site = events.user_site(sys._getframe(0))
        key = (feature, op, action, None if site is None else
               (site["file"], site["line"], site["function"], site.get("thread")))
        ev = _notes.get(key)
        if ev is None:
            err = policy.unsupported_feature(feature).get("error", "RuntimeError")
            _notes[key] = events.record("unsupported", site=site, feature=feature, op=op,
                                        message="[neuron-port simulator] " + message, error=err,
                                        action=action, count=1)
        else:
            ev["count"] += 1
    except Exception:  # noqa: BLE001 - never break an op because of reporting
        pass


def configure(c_module) -> None:
    """Hand the feature policy and the note callback to the C++ core (also re-reads the environment)."""
    decomposed, views = policy.complex_decomposed_ops()
    c_module.set_feature_policy(policy.complex_decompose(), decomposed, views, policy.memory_format_note_ops(),
                                policy.static_scalar_args())
    c_module.set_note_callback(_note)


def install() -> None:
    global _installed
    from .device import runtime

    if runtime.C is not None:
        configure(runtime.C)
    if _installed:
        return
    _installed = True
    _wrap_forward_ad()
    _wrap_nested()
