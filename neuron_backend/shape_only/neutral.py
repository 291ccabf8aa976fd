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
reads ``False`` as before. A known operand decides a loop's condition only if it is new: a neutral value
carries the newest known value it was computed from, and a read at a line reads it only if that known value
was made since the line's previous read (a length test is made again each step: ``torch.full(..., cur_len >=
max_length)``). A mask made once before the loop (``active = ones; while (active := active & (err > tol)).any()``)
decides the first read only: the loop then ends where nothing known has changed, at its second read, instead
of running forever on a ``True`` nobody computed. As a last guard a line read so ``MAX_READS`` times in a row
reads ``False`` after.
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_leaves, tree_map

from .. import events

# (CPU tensor, made): the fake's values with every unknown operand of a `&` / `|` neutral, and the serial of the
# newest known value they were computed from
NEUTRAL = "_np_neutral"
_MADE = "_np_made"  # a fake with known values: the serial of when they were made
MAX_ELEMENTS = 4096
MAX_READS = 100_000  # reads of one line decided by neutral values in a row: then False (a loop's last guard)
_serial = [0]
_reads: dict = {}  # line -> (serial at its last read decided by a neutral value, such reads in a row)
_aten = torch.ops.aten
# the logical joins: an unknown operand beside a known one is taken as their identity
_PURE: dict = {}  # op -> neither writes an argument nor draws
_JOINS = {_aten.logical_and.default, _aten.bitwise_and.Tensor, _aten.logical_or.default, _aten.bitwise_or.Tensor}


def neutral_of(t):
    entry = t.__dict__.get(NEUTRAL) if isinstance(t, FakeTensor) else None
    return None if entry is None else entry[0]


def _made(t, value_of) -> int:
    if value_of(t) is not None:
        return t.__dict__.get(_MADE, 0)
    return t.__dict__[NEUTRAL][1]


def note(func, args, kwargs, out, value_of) -> None:
    """After values.py's known values: give ``out`` (values unknown) its neutral value if the rule makes one.
    ``value_of(t)``: t's known values or None. A write forgets a tensor's neutral value (values._forget)."""
    if not isinstance(out, FakeTensor) or out.numel() > MAX_ELEMENTS:
        return
    if value_of(out) is not None:
        _serial[0] += 1
        out.__dict__[_MADE] = _serial[0]
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
                out.__dict__[NEUTRAL] = (value.expand(tuple(out.shape)).clone(), _made(other, value_of))
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
                out.__dict__[NEUTRAL] = (result.to(out.dtype), max(_made(a, value_of) for a in fakes))
    except Exception:  # noqa: BLE001 - an op the CPU cannot run on them: no neutral value
        return


def read(t, placeholder):
    """A host read of ``t`` (one element): its neutral value if it has one made from a known value newer than
    this line's previous such read (and not MAX_READS in a row), else ``placeholder``."""
    entry = t.__dict__.get(NEUTRAL) if isinstance(t, FakeTensor) else None
    if entry is None or entry[0].numel() != 1:
        return placeholder
    site = events.user_site()
    line = None if site is None else (site["file"], site["line"])
    last, in_a_row = _reads.get(line, (-1, 0))
    if entry[1] <= last or in_a_row >= MAX_READS:
        _reads[line] = (_serial[0], 0)
        return placeholder
    _reads[line] = (_serial[0], in_a_row + 1)
    with _disable_current_modes():
        return entry[0].item()
