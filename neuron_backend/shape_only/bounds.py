"""Ranges a program puts on values nobody knows, kept so that host reads (values.py) respect them.

* ``clamp`` / ``clamp_min`` / ``clamp_max`` with numbers bound their result (within the input's own range);
  a draw whose range its arguments fix does too: ``multinomial`` of n categories (0 .. n-1: a
  ``Categorical`` sample), ``argmax`` / ``argmin`` over a dimension of n, ``randint(low, high)``; an
  integer's ``% m`` is in 0 .. m-1.
* Views, ``select``, ``index``, ``clone``, copies and the monotone roundings (``ceil``, ``floor``,
  ``round``, ``trunc``) carry a range; in-place draws (``random_``, ``uniform_``, ``bernoulli_``) set their
  own; ``copy_`` gives its destination the source's range (or known values' min and max) and the tensor the
  destination is a view of the hull of both (samples written into a rollout buffer of zeros); any other
  write to the tensor, or to one it is a view of, drops it.
* A placeholder read is raised into its range: torchvision's keypoint head reads
  ``int(widths.clamp(min=1).ceil()[i].item())`` as an output size and a divisor: 1, not 0.
* A comparison with a number that the range decides is a known bool (values.py's ``_KNOWN``, through
  ``&``, ``all`` and the rest): ``torch.distributions``' support check of a sample,
  ``(v % 1 == 0) & (0 <= v) & (v <= n - 1)``, is true, where a placeholder ``False`` raised
  ``ValueError: Expected value argument ... to be within the support`` (cleanrl's PPO).
* A value nobody knows is finite (its placeholder is): a comparison with ``float("inf")`` or ``-inf`` is decided
  (a best-so-far loss that starts at infinity: the first ``loss < best`` is true).
Nothing else is bounded: a value without a range reads the usual placeholder.
"""

from __future__ import annotations

import math
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import _disable_current_modes

_RANGE = "_np_range"  # (low, high), either None: every element within
_aten = torch.ops.aten
_CLAMPS = {_aten.clamp.default, _aten.clamp_.default, _aten.clamp_min.default, _aten.clamp_min_.default,
           _aten.clamp_max.default, _aten.clamp_max_.default}
_ROUNDINGS = {_aten.ceil.default: math.ceil, _aten.floor.default: math.floor, _aten.round.default: round,
              _aten.trunc.default: math.trunc}
_KEEPS = {_aten.clone.default, _aten._to_copy.default, _aten.index.Tensor, _aten.contiguous.default,
          _aten.lift_fresh_copy.default, _aten.select.int, _aten._unsafe_view.default}
_INDICES = {_aten.argmax.default, _aten.argmin.default}
_RANDINTS = {_aten.randint.low, _aten.randint.low_generator}
# in-place draws (``randint`` is ``empty`` + ``random_.from``): their range, from their arguments
_RANDOM_FROM = getattr(_aten.random_, "from")
_DRAWS = {_RANDOM_FROM, _aten.random_.to, _aten.random_.default, _aten.uniform_.default, _aten.bernoulli_.float,
          _aten.bernoulli_.Tensor}


def _drawn(func, args, kwargs) -> tuple:
    def arg(i, name, default=None):
        value = args[i] if len(args) > i else kwargs.get(name, default)
        return value if _number(value) else None

    if func is _RANDOM_FROM:
        high = arg(2, "to")
        return arg(1, "from"), (None if high is None else high - 1)
    if func is _aten.random_.to:
        high = arg(1, "to")
        return 0, (None if high is None else high - 1)
    if func is _aten.uniform_.default:
        return arg(1, "from", 0.0), arg(2, "to", 1.0)
    return (0, 1) if func in (_aten.bernoulli_.float, _aten.bernoulli_.Tensor) else (0, None)


# comparisons with a number: (always true if, always false if), each a test of (low, high, c)
_COMPARE = {
    _aten.ge.Scalar: (lambda lo, hi, c: lo is not None and lo >= c, lambda lo, hi, c: hi is not None and hi < c),
    _aten.gt.Scalar: (lambda lo, hi, c: lo is not None and lo > c, lambda lo, hi, c: hi is not None and hi <= c),
    _aten.le.Scalar: (lambda lo, hi, c: hi is not None and hi <= c, lambda lo, hi, c: lo is not None and lo > c),
    _aten.lt.Scalar: (lambda lo, hi, c: hi is not None and hi < c, lambda lo, hi, c: lo is not None and lo >= c),
    _aten.eq.Scalar: (lambda lo, hi, c: lo == hi == c, lambda lo, hi, c: (lo is not None and c < lo)
                      or (hi is not None and c > hi)),
}
_COMPARE[_aten.ne.Scalar] = tuple(reversed(_COMPARE[_aten.eq.Scalar]))
# a Python number beside a tensor can reach the Tensor overloads too (``v % 1`` is ``remainder.Tensor``)
_COMPARE.update({getattr(_aten, f._schema.name.split("::")[1]).Tensor: tests for f, tests in list(_COMPARE.items())})
_REMAINDERS = {_aten.remainder.Scalar, _aten.remainder.Tensor}
_MUTABLE: dict = {}  # op -> whether it writes an argument


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def range_of(t) -> tuple | None:
    return t.__dict__.get(_RANGE) if isinstance(t, FakeTensor) else None


def _set(out, lo, hi) -> None:
    if lo is not None or hi is not None:
        out.__dict__[_RANGE] = (lo, hi)


def _both(f, lo, hi):
    return (None if lo is None else f(lo)), (None if hi is None else f(hi))


def note(func, args, kwargs, out, known=lambda t: None):
    """The range a fake call's result takes, if any; returns the bool a comparison's range decides (every
    element of the result), else None. ``known(t)``: t's values where they are known (values.value_of), read
    before the call forgets them (a write into a view: the base's range is the hull of both)."""
    if not isinstance(out, FakeTensor):
        return None
    src = args[0] if args else None
    if func in _RANDINTS:
        low, high = args[0], args[1]
        if _number(low) and _number(high):
            _set(out, low, high - 1)
        return None
    if not isinstance(src, FakeTensor):
        return None
    if func is _aten.multinomial.default and src.dim() > 0:
        _set(out, 0, src.shape[-1] - 1)
        return None
    if func in _INDICES:
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        n = src.numel() if dim is None else (src.shape[dim] if src.dim() else 1)
        _set(out, 0, max(n - 1, 0))
        return None
    if func in _DRAWS:  # a draw in place: its arguments' range, whatever was there
        src.__dict__.pop(_RANGE, None)
        _set(src, *_drawn(func, args, kwargs))
        return None
    own = range_of(src) or (None, None)
    if func in _CLAMPS:
        name = func._schema.name
        lo = args[1] if len(args) > 1 and not name.endswith("clamp_max") else kwargs.get("min")
        hi = (args[1] if name.endswith("clamp_max") and len(args) > 1 else
              args[2] if len(args) > 2 else kwargs.get("max"))
        lo = lo if _number(lo) else None
        hi = hi if _number(hi) else None
        new_lo = own[0] if lo is None else (lo if own[0] is None else max(own[0], lo))
        new_hi = own[1] if hi is None else (hi if own[1] is None else min(own[1], hi))
        out.__dict__.pop(_RANGE, None)
        _set(out, new_lo, new_hi)
        return None
    if func is _aten.copy_.default and len(args) > 1:
        _copied(src, args[1], known)
        return None
    mutable = _MUTABLE.get(func)
    if mutable is None:  # per op, once (this runs at every fake call)
        mutable = _MUTABLE[func] = func._schema.is_mutable
    if mutable:  # another write: what was bounded is not any more (nor the base it is a view of)
        for t in (out, src, src._base):
            if isinstance(t, FakeTensor):
                t.__dict__.pop(_RANGE, None)
        return None
    if func in _REMAINDERS and len(args) > 1 and _number(args[1]) and args[1] > 0 and not src.is_floating_point():
        _set(out, 0, args[1] - 1)
        return None
    if func in _COMPARE and len(args) > 1 and isinstance(args[1], float) and math.isinf(args[1]):
        # a value nobody knows is finite, as its placeholder is: a comparison with an infinity is decided (a
        # best-so-far that starts at float("inf"): `if loss < best:` is true, and the checkpoint is saved)
        always, never = _COMPARE[func]
        lo, hi = (-sys.float_info.max if own[0] is None else own[0]), (sys.float_info.max if own[1] is None else own[1])
        return True if always(lo, hi, args[1]) else False if never(lo, hi, args[1]) else None
    if own == (None, None):
        return None
    if func in _COMPARE and len(args) > 1 and _number(args[1]):
        always, never = _COMPARE[func]
        lo, hi = own
        return True if always(lo, hi, args[1]) else False if never(lo, hi, args[1]) else None
    if func in _ROUNDINGS:
        _set(out, *_both(_ROUNDINGS[func], *own))
    elif func.is_view or func in _KEEPS:
        if func is _aten._to_copy.default and not out.is_floating_point():
            own = _both(math.trunc, *own) if (own[0] or 0) >= 0 else _both(math.floor, *own)  # integer casts
        _set(out, *own)
    return None


def _range_or_values(t, known) -> tuple | None:
    bounds = range_of(t)
    if bounds is not None:
        return bounds
    value = known(t) if isinstance(t, FakeTensor) else t if isinstance(t, torch.Tensor) else None
    if value is None or value.numel() == 0 or value.dtype == torch.bool or value.is_complex():
        return None
    with _disable_current_modes():  # a real CPU tensor's values, read outside the recording modes
        return value.min().item(), value.max().item()


def _copied(dst, src, known) -> None:
    """``dst.copy_(src)``: dst takes src's range; a base dst is a view of takes the hull of its own and src's
    (a sample written into a rollout buffer's slice: the buffer's zeros and the sample's range)."""
    new = _range_or_values(src, known) if isinstance(src, torch.Tensor) else None
    base = dst._base if isinstance(dst._base, FakeTensor) else None
    before = _range_or_values(base, known) if base is not None else None
    dst.__dict__.pop(_RANGE, None)
    if new is None:
        if base is not None:
            base.__dict__.pop(_RANGE, None)
        return
    _set(dst, *new)
    if base is not None:
        base.__dict__.pop(_RANGE, None)
        if before is not None:
            _set(base, *(None if a is None or b is None else f(a, b)
                         for a, b, f in ((before[0], new[0], min), (before[1], new[1], max))))


def within(t, value):
    """``value`` (a placeholder read of ``t``) moved into ``t``'s range, in the placeholder's type."""
    bounds = range_of(t)
    if bounds is None or isinstance(value, (bool, complex)):
        return value
    lo, hi = bounds
    if lo is not None and value < lo:
        value = math.ceil(lo) if isinstance(value, int) else float(lo)
    elif hi is not None and value > hi:
        value = math.floor(hi) if isinstance(value, int) else float(hi)
    return value


