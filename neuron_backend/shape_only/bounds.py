"""Lower bounds a program puts on values nobody knows, kept so that a placeholder read (values.py) respects
them: torchvision's keypoint head does ``widths.clamp(min=1).ceil()`` and reads each width on the host as an
output size and a divisor (``int(widths_ceil[i].item())``), where a placeholder 0 divided by zero.

A ``clamp`` / ``clamp_min`` with a number as its minimum gives its result that bound (the larger of it and
the input's own); ops that keep "at least m" carry it (views, ``select``, ``index``, ``clone``, copies, and the
monotone roundings, which move it to ``ceil``/``floor``/``round``/``trunc`` of m); any other write to the
tensor drops it. Nothing else is bounded: a value read without a bound is the usual placeholder.
"""

from __future__ import annotations

import math

import torch
from torch._subclasses.fake_tensor import FakeTensor

_LOWER = "_np_lower"
_aten = torch.ops.aten
_CLAMPS = {_aten.clamp.default, _aten.clamp_.default, _aten.clamp_min.default, _aten.clamp_min_.default}
_ROUNDINGS = {_aten.ceil.default: math.ceil, _aten.floor.default: math.floor, _aten.round.default: round,
              _aten.trunc.default: math.trunc}
_KEEPS = {_aten.clone.default, _aten._to_copy.default, _aten.index.Tensor, _aten.contiguous.default,
          _aten.lift_fresh_copy.default}


def lower(t) -> float | None:
    return t.__dict__.get(_LOWER) if isinstance(t, FakeTensor) else None


def note(func, args, kwargs, out) -> None:
    """After a fake call: the bound its result takes, if any."""
    src = args[0] if args else None
    if not isinstance(out, FakeTensor) or not isinstance(src, FakeTensor):
        return
    if func in _CLAMPS:
        m = args[1] if len(args) > 1 else kwargs.get("min")
        if isinstance(m, (int, float)) and not isinstance(m, bool) and math.isfinite(m):
            own = lower(src)
            out.__dict__[_LOWER] = m if own is None else max(own, m)
            return
    bound = lower(src)
    if func._schema.is_mutable:  # another write: what was bounded is not any more
        out.__dict__.pop(_LOWER, None)
        src.__dict__.pop(_LOWER, None)
        return
    if bound is None:
        return
    if func in _ROUNDINGS:
        out.__dict__[_LOWER] = _ROUNDINGS[func](bound)
    elif func.is_view or func in _KEEPS or func is _aten.select.int:
        if func is _aten._to_copy.default and not (kwargs.get("dtype") or out.dtype).is_floating_point:
            bound = math.trunc(bound) if bound >= 0 else math.floor(bound)  # integer casts truncate
        out.__dict__[_LOWER] = bound


def at_least(t, value):
    """``value`` (a placeholder read of ``t``), raised to ``t``'s bound, in the placeholder's type."""
    bound = lower(t)
    if bound is None or isinstance(value, (bool, complex)) or value >= bound:
        return value
    return math.ceil(bound) if isinstance(value, int) else float(bound)
