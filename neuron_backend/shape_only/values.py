"""What a shape-only run cannot compute, made explicit: values the program reads from the device and
output shapes that depend on values. Each site is recorded once as a ``shape_only`` event (EVENTS.md),
so the report lists where control flow or sizes may differ from a real run.

* Placeholders. A host read of a device value (``.item()``, ``bool(t)``, ``if (x > 0).all():``,
  ``.tolist()``, any op whose result is a Python number computed from data) returns ``0``, ``0.0``,
  ``False`` (``0j``) by the result's type, except where the run knows better under its one assumption,
  *every value is finite*: ``x == x`` is all true and ``x != x`` all false (no NaN), a comparison with
  an infinite or NaN scalar is all false (``==``) or all true (``!=``), ``isnan`` / ``isinf`` are all
  false and ``isfinite`` all true, through ``&``, ``|``, ``*``, ``all``, ``any`` and ``logical_not`` (so
  ``if not torch.isfinite(loss): skip`` does not skip: PyTorch computes isfinite as
  ``(x == x) * (x.abs() != inf)``).
  These are the values a NaN check or an overflow flag has when nothing is wrong, so loops take their
  ordinary path. A copy of a device tensor to the CPU
  (``.cpu()``, ``.to("cpu")``, ``.numpy()`` after it, ``cpu_tensor.copy_(t)``) gives a real CPU
  tensor of zeros with the right shape and dtype.
* Known values. A small real CPU tensor copied to the device (at most 4096 elements: sizes, counts,
  flags the program or PyTorch itself sends) keeps its values: copies and all-gathers of it (every rank
  of a fake world holding what rank 0 holds: data-parallel replicas) carry them, and reading it back
  gives them, not a placeholder (DDP compares the ranks' parameter shapes this way); an op whose fake
  inputs all have known values gets its result's by running on them, so a data-dependent size of known
  data is exact. A device factory whose values follow from its arguments (``torch.full``, ``ones``,
  ``arange``; not a random draw, not ``empty``) and an overwrite (``fill_``, ``zero_``, ``copy_`` of a
  known source, an ``out=`` argument) are known too, and ``x & zeros`` / ``x | all_true`` are known
  whatever ``x`` holds: a generation loop's stop flags (``unfinished & ~(eos_test | length_test)``) end
  it when the length says so. An overwrite of a view of a known tensor with known values gives the
  tensor its new values; another in-place write drops what was known of the tensor written and of the
  tensor it is a view of (a view taken before keeps its values). A bool that joins an unknown operand
  with a known one (``&``, ``|``) reads as the known one decides: neutral.py.
* Size rules. An op whose output shape depends on values (``nonzero``, ``masked_select``, boolean-mask
  indexing, ``unique``, ``torch.where(cond)``: PyTorch's ``dynamic_output_shape`` ops) gets its upper
  bound: the op runs on real CPU stand-ins of its inputs whose elements are all nonzero, true and
  distinct (1, 2, 3, ...), so every element is selected and every value unique. A site can set the
  size instead: ``NEURON_PORT_SIZE_RULES='{"train.py:57": 128}'`` (``neuron-port check --size-rule
  train.py:57=128``) makes the data-dependent dimension 128 there (the dimension that is 0 when the
  stand-ins are zero).
* Even splits. A router's choice, ``topk`` of scores nobody knows, is taken as a balanced one (row t's k
  indices ``(t * k + j) mod E``: sizes.balanced_choice), so what is built from it is computed as known
  values (kept up to MAX_ROUTED_ELEMENTS: one-hot masks, ``where`` per expert, expert sizes read with
  ``.tolist()``; a tensor over the usual limit filled with one number, read beside the choice, is made). A histogram of values still unknown (``histc``, ``bincount`` with ``minlength`` and no
  weights: a router's tokens per expert, of an ``argmax`` choice) is taken as even, N values over B
  bins, N // B each and the remainder one each to the first bins (``bincount``'s size is then
  ``minlength``), so its counts are known values and what they size follows: the ``cumsum`` of them that a grouped
  matmul's kernel reads on the host as its group offsets (transformers' grouped-matmul experts). The
  experts' total rows, FLOPs and memory are exact; only the split is assumed (the balanced routing a
  load-balancing loss aims for; on the device each distinct split is another signature). Listed as a
  ``size_rule`` with ``rule: "even_split"``. Known values go on through host work on fakes too (the
  kernel copies the offsets to the host before reading them).
"""

from __future__ import annotations

import math

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_map

from .. import events
from . import bounds, host_stream, neutral

SIZE_RULES_ENV = "NEURON_PORT_SIZE_RULES"  # {"FILE:LINE": size}, set by `neuron-port check --size-rule`

_seen: set[tuple] = set()
_HOST_READS = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default}
_COPIES = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default}


def _placeholder(dtype: torch.dtype):
    if dtype == torch.bool:
        return False
    if dtype.is_complex:
        return 0j
    if dtype.is_floating_point:
        return 0.0
    return 0


def _note(event: str, op: str, **fields) -> dict:
    """Record the site once per (event, op, line); returns the site."""
    site = events.user_site()
    key = (event, op, None if site is None else (site["file"], site["line"]))
    if key not in _seen:
        _seen.add(key)
        events.record("shape_only", site=site, event=event, op=op, **fields)
    return site


note = _note  # for the other shape-only modules (serialization.py)

_aten = torch.ops.aten
_FINITE = {_aten.isfinite.default: True, _aten.isnan.default: False, _aten.isinf.default: False,
           _aten.isposinf.default: False, _aten.isneginf.default: False}
_SAME = {_aten.all.default, _aten.any.default, _aten.all.dim, _aten.any.dim, _aten.all.dims, _aten.any.dims,
         _aten.clone.default, _aten._to_copy.default}
_FLIP = {_aten.logical_not.default, _aten.bitwise_not.default}
_AND = {_aten.mul.Tensor, _aten.logical_and.default, _aten.bitwise_and.Tensor}
_OR = {_aten.add.Tensor, _aten.logical_or.default, _aten.bitwise_or.Tensor}
_SELF_COMPARE = {_aten.eq.Tensor: True, _aten.ne.Tensor: False}  # x == x, x != x
_SCALAR_COMPARE = {_aten.eq.Scalar: False, _aten.ne.Scalar: True}  # x == inf, x != inf
_KNOWN = "_np_known"  # a bool fake tensor whose every element is known under the finite assumption
_VALUE = "_np_value"  # a small fake tensor's values: a real CPU tensor (see "Known values")
_ASSUMED = "_np_assumed"  # its values follow from the finite assumption: a host read of them is still listed
_ROUTED = "_np_routed"  # its values follow from a router's assumed choice (sizes.py: topk of unknown scores)
_FILL = "_np_fill"  # a tensor over the limit filled with one number (zeros, full): that number
MAX_KNOWN_ELEMENTS = 4096
# what follows from a router's choice is kept larger: the one-hot mask of a default-size model's eager experts
# loop (128 tokens x top-12 x 768 experts: 1.2M) sizes every expert's tokens, read per expert on the host
MAX_ROUTED_ELEMENTS = 1 << 22


def value_of(t):
    return t.__dict__.get(_VALUE) if isinstance(t, FakeTensor) else None


def set_value(t, value, routed: bool = False) -> None:
    if isinstance(t, FakeTensor) and value is not None and tuple(value.shape) == tuple(t.shape):
        t.__dict__[_VALUE] = value
        if routed:
            t.__dict__[_ROUTED] = True


def _written_fakes(func, args, kwargs) -> list:
    out = []
    for i, formal in enumerate(func._schema.arguments):
        if formal.alias_info is not None and formal.alias_info.is_write:
            value = args[i] if i < len(args) else kwargs.get(formal.name)
            # a Tensor[] written in place too: the optimizer's `_foreach_add_` on the parameters
            for v in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(v, FakeTensor):
                    out.append(v)
    return out


# In-place ops that replace every element of the tensor they write: its old values are not read.
_OVERWRITES = {_aten.fill_.Scalar, _aten.fill_.Tensor, _aten.zero_.default, _aten.copy_.default}
# ops with an absorbing value: one operand all True (or, bool) / all zero (and) decides the result
_ABSORBING = {_aten.logical_or.default: True, _aten.bitwise_or.Tensor: True,
              _aten.logical_and.default: False, _aten.bitwise_and.Tensor: False}


def _overwritten(func, args, kwargs, written: list) -> list:
    """The written fakes whose old values the op does not read: its ``out=`` arguments, and ``self`` of
    an op that replaces every element (fill_, zero_, copy_)."""
    out = []
    for i, formal in enumerate(func._schema.arguments):
        value = args[i] if i < len(args) else kwargs.get(formal.name)
        if any(value is w for w in written) and (formal.is_out or (i == 0 and func in _OVERWRITES)):
            out.append(value)
    return out


_FILLS = {_aten.fill_.Scalar, _aten.zero_.default}


def _filled(t) -> bool:
    """Known, or filled with one number and small enough to be made beside a router's choice: JetMoE's
    ``zeros(tokens, experts).scatter(1, chosen, 1)`` at a real batch (128k elements at 16k tokens)."""
    return value_of(t) is not None or (_FILL in t.__dict__ and t.numel() <= MAX_ROUTED_ELEMENTS)


def _forget(t) -> None:
    """An in-place or out= write to ``t``: what was known of it (and of the tensor it is a view of, whose
    elements it may have changed) no longer holds."""
    for x in (t, getattr(t, "_base", None)):
        if isinstance(x, FakeTensor):
            for key in (_VALUE, _KNOWN, _ASSUMED, _ROUTED, _FILL, neutral.NEUTRAL):
                x.__dict__.pop(key, None)


def _deterministic_factory(func) -> bool:
    """A device call without tensor inputs whose values follow from its arguments (``full``, ``arange``,
    ``scalar_tensor``): not a random draw, not an uninitialised ``empty*``."""
    return torch.Tag.nondeterministic_seeded not in func.tags and "empty" not in func._schema.name


def _absorbed(func, args, out):
    """``x & zeros`` is zeros (any integer or bool dtype) and ``x | all_true`` all true (bool) whatever
    ``x`` holds: a generation loop's stop flags (``unfinished & ~(eos_unknown | max_length_known)``)."""
    absorbing = _ABSORBING.get(func)
    if absorbing is None or not isinstance(out, FakeTensor):
        return None
    if absorbing and out.dtype != torch.bool:
        return None  # an integer `|` is absorbed only by all bits set: not worth a rule
    with _disable_current_modes():
        for a in args[:2]:
            v = value_of(a)
            if v is None or not v.numel() or v.is_floating_point():
                continue
            if (bool(v.bool().all()) and v.dtype == torch.bool) if absorbing else not bool(v.bool().any()):
                return torch.full(tuple(out.shape), absorbing, dtype=out.dtype)
    return None


def _keep_value(func, args, kwargs, out, run=None) -> None:
    """A small CPU tensor copied to the device keeps its values; an op whose fake inputs all have known
    values gets its result's values by running it on them (constant propagation, on the CPU): a
    deterministic factory and an overwrite (``fill_``, ``zero_``, ``copy_``, an ``out=`` argument) read
    no fake values at all. ``run``: the arguments the fake call ran with (wrapped numbers as 0-dim tensors)."""
    src = args[0] if args else None
    if func is _aten._to_copy.default and isinstance(src, torch.Tensor) and not isinstance(src, FakeTensor):
        if src.numel() <= MAX_KNOWN_ELEMENTS:
            with _disable_current_modes():
                set_value(out, src.detach().to(out.dtype, copy=True))
        return
    written = _written_fakes(func, args, kwargs)
    overwritten = _overwritten(func, args, kwargs, written)
    base = getattr(written[0], "_base", None) if len(written) == 1 else None
    base_value = value_of(base)  # read before the write forgets it: an overwrite of a view of it recomputes it
    for t in written:
        _forget(t)
    if len(overwritten) != len(written):  # a read-modify-write (add_): its result is not propagated
        return
    fakes = [a for a in (*args, *kwargs.values()) if isinstance(a, FakeTensor)]
    read = [a for a in fakes if not any(a is w for w in written)]
    if not fakes and not (isinstance(out, FakeTensor) and _deterministic_factory(func)):
        return
    routed = any(a.__dict__.get(_ROUTED) for a in read)
    if any(value_of(a) is None for a in read) and not (routed and all(_filled(a) for a in read)):
        absorbed = _absorbed(func, args, out)
        if absorbed is not None:
            set_value(out, absorbed)
            if any(a.__dict__.get(_ASSUMED) for a in read):
                out.__dict__[_ASSUMED] = True
        return
    limit = MAX_ROUTED_ELEMENTS if routed else MAX_KNOWN_ELEMENTS
    if base_value is not None and base.numel() <= limit and all(value_of(a) is not None for a in read):
        return _into_view(func, *(run or (args, kwargs)), written[0], base, base_value, routed)
    if any(t.numel() > limit or getattr(t, "_base", None) is not None for t in written):
        if func in _FILLS and len(written) == 1 and getattr(written[0], "_base", None) is None:
            written[0].__dict__[_FILL] = 0 if func is _aten.zero_.default else args[1]
        return  # a write into a view of a base nobody knows: forgotten (above)

    def swap(x):
        if not isinstance(x, FakeTensor):
            return x
        if any(x is w for w in written):  # old values not read: any CPU tensor of its shape
            return torch.zeros(tuple(x.shape), dtype=x.dtype)
        if value_of(x) is None:  # a filled tensor read beside a router's choice
            return torch.full(tuple(x.shape), x.__dict__[_FILL], dtype=x.dtype)
        return value_of(x)

    args, kwargs = run or (args, kwargs)
    try:
        with _disable_current_modes():
            cpu_args = tree_map(swap, args)
            cpu_kwargs = {k: ("cpu" if k == "device" else tree_map(swap, v)) for k, v in kwargs.items()}
            if func is _aten.histc.default and not cpu_args[0].is_floating_point():
                # the CPU's histc counts floating point only, a device's integers too (transformers passes
                # its expert ids as int32 off the CPU): the same counts
                result = func(cpu_args[0].double(), *cpu_args[1:], **cpu_kwargs).to(out.dtype)
            else:
                host_stream.before_host_call(func)  # a random op draws where a real run's stream stands
                result = func(*cpu_args, **cpu_kwargs)
    except Exception:  # noqa: BLE001 - an op the CPU stand-in cannot run: its values stay unknown
        return
    results = result if isinstance(result, (tuple, list)) else (result,)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    assumed = any(a.__dict__.get(_ASSUMED) for a in read)
    for fake, value in zip(outs, results):
        if isinstance(value, torch.Tensor) and value.numel() <= limit:
            set_value(fake, value, routed)
            if assumed and isinstance(fake, FakeTensor):
                fake.__dict__[_ASSUMED] = True


def _into_view(func, args, kwargs, view, base, base_value, routed) -> None:
    """An overwrite (``copy_``, ``fill_``) of a view of a tensor whose values are known, with known values:
    the base's new values, made on a CPU copy of it laid out as the fake is (the view's strides and offset
    address it as they do the fake's storage). A beam search writes each step's known beam ids so."""
    def swap(x):
        return cpu_view if x is view else value_of(x) if isinstance(x, FakeTensor) else x
    try:
        with _disable_current_modes():
            cpu_base = torch.empty_strided(tuple(base.shape), base.stride(), dtype=base.dtype).copy_(base_value)
            cpu_view = cpu_base.as_strided(tuple(view.shape), view.stride(),
                                           view.storage_offset() - base.storage_offset())
            func(*tree_map(swap, args), **{k: ("cpu" if k == "device" else tree_map(swap, v))
                                            for k, v in kwargs.items()})
            set_value(base, cpu_base, routed)
            set_value(view, cpu_view.clone(), routed)
    except Exception:  # noqa: BLE001 - the CPU cannot make it: both stay unknown (forgotten)
        pass


def note_known(func, args, kwargs, out, run=None) -> None:
    """Mark a result whose values are known (the module docstring), then neutral.py's values; ``run``: the
    (args, kwargs) the fake call ran with."""
    decided = bounds.note(func, args, kwargs, out, value_of)  # before _keep_value forgets what a write changes
    _keep_value(func, args, kwargs, out, run)
    neutral.note(func, *(run or (args, kwargs)), out, value_of)
    if not isinstance(out, FakeTensor) or out.dtype != torch.bool:
        return
    value = _known_value(func, args)
    if value is None:
        value = decided  # a comparison its input's range decides (bounds.py)
    if value is not None:
        out.__dict__[_KNOWN] = value
        if value_of(out) is None and out.numel() <= MAX_KNOWN_ELEMENTS:
            # its values too, so what is computed from it is known (`x.isnan().sum() == 0`: I-BERT's check)
            with _disable_current_modes():
                set_value(out, torch.full(tuple(out.shape), value, dtype=torch.bool))
            out.__dict__[_ASSUMED] = True


def _known(x):
    return x.__dict__.get(_KNOWN) if isinstance(x, FakeTensor) else None


def _known_value(func, args):
    if func in _FINITE:
        return _FINITE[func]
    if func in _SELF_COMPARE:
        return _SELF_COMPARE[func] if len(args) > 1 and args[0] is args[1] else None
    if func in _SCALAR_COMPARE:
        scalar = args[1] if len(args) > 1 else None
        return _SCALAR_COMPARE[func] if isinstance(scalar, float) and not math.isfinite(scalar) else None
    first = _known(args[0]) if args else None
    if func in _SAME or func.is_view or func is _aten._unsafe_view.default:
        return first  # every element has the known value: so has every view or reshape of it
    if func in _FLIP:
        return None if first is None else not first
    if func in _AND or func in _OR:
        second = _known(args[1]) if len(args) > 1 else None
        if first is None or second is None:
            return None
        return (first and second) if func in _AND else (first or second)
    return None


def special(func, args, kwargs):
    """A thunk computing the call's result when it reads device values, else None."""
    if func in _HOST_READS and isinstance(args[0], FakeTensor) and value_of(args[0]) is not None:
        known, assumed = value_of(args[0]), args[0].__dict__.get(_ASSUMED)

        def read_known():
            with _disable_current_modes():
                value = known.item()
            if assumed:  # the finite assumption decided it: listed as a placeholder (NP911), as before
                _note("placeholder", "aten::_local_scalar_dense", value=value)
            return value
        return read_known
    if func in _HOST_READS and isinstance(args[0], FakeTensor):
        read = args[0].__dict__.get(_KNOWN, neutral.read(args[0], _placeholder(args[0].dtype)))
        value = bounds.within(args[0], read)
        return lambda: (_note("placeholder", "aten::_local_scalar_dense", value=value), value)[1]
    if func not in _COPIES:
        return None
    if func is torch.ops.aten._to_copy.default:
        target = kwargs.get("device")
        if not isinstance(args[0], FakeTensor) or target is None or torch.device(target).type != "cpu":
            return None
        src = args[0]
        dtype = kwargs.get("dtype") or src.dtype
        if value_of(src) is not None:
            known = value_of(src)

            def known_to_host():
                with _disable_current_modes():
                    return known.to(dtype).clone()
            return known_to_host

        def copy_to_host():
            value = bounds.within(src, _placeholder(dtype))
            _note("placeholder", "aten::_to_copy", value=value, shape=list(src.shape))
            with _disable_current_modes():
                return torch.full(src.shape, value, dtype=dtype, device="cpu")
        return copy_to_host
    dst, src = args[0], args[1]
    if isinstance(dst, FakeTensor) or not isinstance(src, FakeTensor):
        return None
    if value_of(src) is not None:
        known = value_of(src)

        def known_into_host():
            with _disable_current_modes():
                return dst.copy_(known)
        return known_into_host

    def copy_into_host():
        _note("placeholder", "aten::copy_", value=_placeholder(dst.dtype), shape=list(dst.shape))
        with _disable_current_modes():
            return dst.zero_()
    return copy_into_host


def data_dependent_value(func, args, kwargs, error: Exception):
    """A call whose result is a Python number computed from data (``aten::equal``, ``is_nonzero``); ``error``
    (FakeTensorMode's) is raised again when the result is not a number."""
    returns = func._schema.returns
    kind = str(returns[0].type) if len(returns) == 1 else ""
    value = {"bool": False, "int": 0, "float": 0.0, "complex": 0j, "Scalar": 0}.get(kind)
    if value is None:
        raise error
    _note("placeholder", func._schema.name, value=value)
    return value

