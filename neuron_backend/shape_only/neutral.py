"""How a shape-only run reads a bool nobody knows when a known operand is combined with it (values.py reads
every other unknown bool as ``False``).

A loop's condition often joins a test nobody can compute with one the run knows: beam search continues while
``improvement_possible & exists_open_beam & valid_continuations``, where the first compares scores nobody
knows (an early-stopping heuristic) and the last is a length test the run knows (``cur_len < max_length``).
Read as ``False``, the unknown test stopped the loop after one step where a real run went on to its length.

The rule: in ``a & b`` / ``a | b`` of bools where one operand's values are known and the other's are not, the
unknown operand is taken as the operation's identity (``True`` for ``&``, ``False`` for ``|``): it does not
decide, the known operand does. A host read of such a bool (``bool(t)``, ``.item()``) reads that value,
listed as a placeholder (NP911) as before. The values it carries ("neutral values") go on through later ops
whose inputs are known or neutral (``any``, ``all``, ``~``, ``max``, ``== 0``, ``cat``, ``gather``, another
``&`` with an unknown: each computed on the CPU from them, as known values are), so a loop ends when its known
part says so: where a real run's loop ends at the latest. Only host reads see them: sizes, known values and
ranges are not changed by them.

A condition with no known operand (``while not converged`` of values nobody knows) gets no neutral value and
reads ``False`` as before: the rule never makes a loop's end depend on a value nobody knows.
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_leaves, tree_map

NEUTRAL = "_np_neutral"  # a CPU tensor: the fake's values with every unknown operand of a `&` / `|` neutral
MAX_ELEMENTS = 4096
_aten = torch.ops.aten
# the logical joins: an unknown operand beside a known one is taken as their identity
_PURE: dict = {}  # op -> neither writes an argument nor draws
_JOINS = {_aten.logical_and.default, _aten.bitwise_and.Tensor, _aten.logical_or.default, _aten.bitwise_or.Tensor}


def neutral_of(t):
    return t.__dict__.get(NEUTRAL) if isinstance(t, FakeTensor) else None


def note(func, args, kwargs, out, value_of) -> None:
    """After values.py's known values: give ``out`` (values unknown) its neutral value if the rule makes one.
    ``value_of(t)``: t's known values or None. A write forgets a tensor's neutral value (values._forget)."""
    if not isinstance(out, FakeTensor) or value_of(out) is not None or out.numel() > MAX_ELEMENTS:
        return
    pure = _PURE.get(func)
    if pure is None:  # an in-place op would write the stand-ins; a draw would move the host's stream
        pure = _PURE[func] = not func._schema.is_mutable and torch.Tag.nondeterministic_seeded not in func.tags
    if not pure:
        return
    fakes = [a for a in tree_leaves((args, kwargs)) if isinstance(a, FakeTensor)]
    if not fakes:
        return

    def stand_in(x):
        return value_of(x) if value_of(x) is not None else neutral_of(x)

    missing = [a for a in fakes if stand_in(a) is None]
    if func in _JOINS and out.dtype == torch.bool and len(args) >= 2 and len(missing) == 1 and len(fakes) == 2:
        other = args[1] if missing[0] is args[0] else args[0]
        value = stand_in(other)
        if value is not None and value.dtype == torch.bool:
            with _disable_current_modes():
                out.__dict__[NEUTRAL] = value.expand(tuple(out.shape)).clone()
        return
    if missing or not any(neutral_of(a) is not None for a in fakes):
        return

    def swap(x):
        return stand_in(x) if isinstance(x, FakeTensor) else x

    try:
        with _disable_current_modes():
            result = func(*tree_map(swap, args), **{k: ("cpu" if k == "device" else tree_map(swap, v))
                                                    for k, v in kwargs.items()})
            if isinstance(result, torch.Tensor) and tuple(result.shape) == tuple(out.shape):
                out.__dict__[NEUTRAL] = result.to(out.dtype)
    except Exception:  # noqa: BLE001 - an op the CPU cannot run on them: no neutral value
        return


def read(t, placeholder):
    """A host read of ``t`` (one element): its neutral value if it has one, else ``placeholder``."""
    value = neutral_of(t)
    if value is None or value.numel() != 1:
        return placeholder
    with _disable_current_modes():
        return value.item()
