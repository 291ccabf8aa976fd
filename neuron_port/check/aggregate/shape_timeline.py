"""Shapes over time at one op, line and module: eager signatures parsed into positions (tensor
dimensions and integer arguments), and the signatures first seen after warm-up classified.

On Trainium every distinct (op, signature) compiles a NEFF once; the cache serves it afterwards. So a
new signature in the first steps is warm-up (a one-time cost, however many layers share a line), and
what matters is what keeps appearing later:

- ``varying``: a position (say dim 1, the sequence length) took new values at two or more steps after
  warm-up, or at one step after warm-up when it already changed between the two warm-up steps
  (a length that changes step after step). NP902.
- ``uneven_last_batch``: at one or two steps after warm-up, every new signature is an earlier one
  shrunk by one common factor (a smaller batch: 4 rows instead of 16, and 4*T instead of 16*T where the
  batch was flattened), and nothing else kept changing. NP910.
  Also a position that took ``IN_STEP_VALUES`` or more new values inside one step after warm-up, when the
  line had run at an earlier step (a loop over images whose box counts differ: many compiles in one step;
  a line that first runs late, such as a loop over the parameters that starts at step 5, is its warm-up).
- ``scalar``: no shape kept changing, but a float argument did, by the same test: an argument TorchNeuron
  compiles in by value (``alpha=-lr`` of SGD's ``_foreach_add_`` under a scheduler; rules/op_policy.toml
  [static_scalars]; other numbers are runtime inputs there and keep one signature), so each new value
  compiles again. NP902's scalar message.
- ``other``: new signatures after warm-up that are neither (a one-off phase such as the first evaluation
  or a generation after training); counted, no finding.

Warm-up is the first ``WARMUP_STEPS`` steps (0 and 1): optimizer state is created lazily in the first
``step()``, and gradients accumulated into existing ``.grad`` tensors (or zeroed with
``zero_grad(set_to_none=False)``) first show up in the second step.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterable, Mapping, Optional

WARMUP_STEPS = 2
IN_STEP_VALUES = 3  # new values of one position inside one step after warm-up that count as varying
MAX_PARTIAL_STEPS = 2  # more steps with smaller batches than this is a batch size that varies

Position = tuple[int, Optional[int], Optional[int]]  # (argument, element of a list argument, tensor dim)

TENSOR_RE = re.compile(r"^(?P<dtype>[a-z]+\d*)\[(?P<dims>[0-9,]*)\](?P<suffix>.*)$")
INT_RE = re.compile(r"^-?\d+$")
FLOAT_RE = re.compile(r"^-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?$")  # finite: the report's JSON holds it


def split_list(text: str) -> Optional[list[str]]:
    """The elements of a signature list ``"[f32[2,3], f32[4]]"`` (None if ``text`` is not a list)."""
    if not (text.startswith("[") and text.endswith("]")):
        return None
    inner = text[1:-1].strip()
    if not inner:
        return []
    out, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(inner[start:i].strip())
            start = i + 1
    out.append(inner[start:].strip())
    return out


def _integer(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and INT_RE.match(value):
        return int(value)
    return None


def _float(value: Any) -> Optional[float]:
    number = float(value) if isinstance(value, float) or isinstance(value, str) and FLOAT_RE.match(value) else None
    return number if number is not None and math.isfinite(number) else None


def _parse_item(value: Any, arg: int, element: Optional[int], values: dict[Position, int],
                nested: bool, scalars: dict[Position, float]) -> tuple:
    if isinstance(value, str):
        match = TENSOR_RE.match(value)
        if match:
            dims = [int(d) for d in match.group("dims").split(",") if d]
            for d, size in enumerate(dims):
                values[(arg, element, d)] = size
            return ("t", match.group("dtype"), len(dims), match.group("suffix"))
        items = None if nested else split_list(value)
        if items is not None:
            return ("l", tuple(_parse_item(item, arg, j, values, True, scalars) for j, item in enumerate(items)))
    number = _integer(value)
    if number is not None:
        values[(arg, element, None)] = number
        return ("i",)
    real = _float(value)
    if real is not None:  # a position of its own: a float that changes is judged over time, as a size is
        scalars[(arg, element, None)] = real
        return ("f",)
    return ("o", str(value))


@dataclass(frozen=True)
class ParsedSignature:
    """A signature as structure (dtypes, ranks, list lengths, other arguments) and positions: integers
    (sizes, integer arguments) and floats (scalar arguments)."""

    structure: tuple
    values: Mapping[Position, int]
    scalars: Mapping[Position, float] = field(default_factory=dict)


def parse_signature(signature: Iterable[Any]) -> ParsedSignature:
    values: dict[Position, int] = {}
    scalars: dict[Position, float] = {}
    structure = tuple(_parse_item(arg, i, None, values, False, scalars) for i, arg in enumerate(signature))
    return ParsedSignature(structure, values, scalars)


def position_label(position: Position, scalar: bool = False) -> str:
    arg, element, dim = position
    where = f"arg {arg}" if element is None else f"arg {arg}[{element}]"
    if scalar:
        return f"{where} (a float)"
    return f"{where} (an integer)" if dim is None else f"dim {dim} of {where}"


def position_pattern(signature: Iterable[Any], position: Position) -> Optional[str]:
    """The tensor at ``position`` with the varying dimension as ``*``: ``f32[4,*,64]``."""
    arg, element, dim = position
    args = list(signature)
    if dim is None or arg >= len(args) or not isinstance(args[arg], str):
        return None
    text = args[arg]
    if element is not None:
        items = split_list(text)
        if items is None or element >= len(items):
            return None
        text = items[element]
    match = TENSOR_RE.match(text)
    if not match:
        return None
    dims = [d for d in match.group("dims").split(",") if d]
    if dim >= len(dims):
        return None
    dims[dim] = "*"
    return f"{match.group('dtype')}[{','.join(dims)}]"


@dataclass
class TimedSignature:
    """One signature of an op at one line and module: when it was first seen and how often it ran."""

    args: tuple[Any, ...]
    calls: int
    step: int
    seq: Optional[int] = None
    parsed: ParsedSignature = field(init=False)

    def __post_init__(self) -> None:
        self.parsed = parse_signature(self.args)


@dataclass(frozen=True)
class DimTimeline:
    """A position whose value changed over time: each value with the step it was first seen at."""

    position: Position
    first_seen: tuple[tuple[int, Any], ...]  # (step, value), by step then value
    pattern: Optional[str] = None
    scalar: bool = False  # a float argument, not a size

    @property
    def label(self) -> str:
        return position_label(self.position, self.scalar)

    @property
    def values(self) -> tuple[Any, ...]:
        return tuple(sorted({value for _, value in self.first_seen}))

    @property
    def steps(self) -> tuple[int, ...]:
        """The steps at which this position took a new value."""
        return tuple(sorted({step for step, _ in self.first_seen}))

    @property
    def late_steps(self) -> tuple[int, ...]:
        return tuple(s for s in self.steps if s >= WARMUP_STEPS)

    def describe(self, max_steps: int = 6, max_values: int = 4) -> str:
        """``dim 1 of arg 0 (f32[4,*,64]): 8 (step 0), 16 (step 1), 32 (step 2)``."""
        by_step: dict[int, list[int]] = defaultdict(list)
        for step, value in self.first_seen:
            by_step[step].append(value)
        parts = []
        for step in sorted(by_step)[:max_steps]:
            values = by_step[step]
            shown = ",".join(map(self._text, values[:max_values])) + ("..." if len(values) > max_values else "")
            parts.append(f"{shown} (step {step})")
        more = len(by_step) - max_steps
        text = ", ".join(parts) + (f", ... {more} more step(s)" if more > 0 else "")
        where = self.label + (f" ({self.pattern})" if self.pattern else "")
        return f"{where}: {text}"

    def _text(self, value: Any) -> str:
        return f"{value:.6g}" if self.scalar else str(value)

    def in_step(self, end: Optional[int] = None) -> Optional[tuple[int, int]]:
        """(step, new values) of the first step after warm-up (and before ``end``, the end of the measured
        steps: what runs after the last one is another phase) that brought ``IN_STEP_VALUES`` or more new
        values when the position had a value at an earlier step (many compiles inside one step)."""
        counts = Counter(step for step, _ in self.first_seen)
        first = min(counts, default=0)
        return next(((step, n) for step, n in sorted(counts.items()) if WARMUP_STEPS <= step < (end or step + 1)
                     and step > first and n >= IN_STEP_VALUES), None)

    def to_json(self) -> dict[str, Any]:
        arg, element, dim = self.position
        by_step: dict[int, list[int]] = defaultdict(list)
        for step, value in self.first_seen:
            by_step[step].append(value)
        return {"arg": arg, "element": element, "dim": dim, "label": self.label, "pattern": self.pattern,
                **({"scalar": True} if self.scalar else {}),
                "values": list(self.values),
                "first_seen": [{"step": s, "values": by_step[s]} for s in sorted(by_step)]}


@dataclass(frozen=True)
class PartialBatch:
    """Signatures first seen at ``step`` were earlier ones with ``normal`` shrunk to ``size``."""

    step: int
    normal: int
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "normal": self.normal, "size": self.size}


@dataclass(frozen=True)
class LateShapes:
    kind: str  # varying | scalar | uneven_last_batch | other
    late_steps: tuple[int, ...]  # steps >= WARMUP_STEPS at which new signatures appeared
    late_signatures: int
    varying: tuple[DimTimeline, ...] = ()  # varying, scalar: the positions that kept changing, most late steps first
    partial: tuple[PartialBatch, ...] = ()  # uneven_last_batch
    first_partial_seq: Optional[int] = None  # the earliest partial-batch signature (where the batch came in)


def _shrink(late: ParsedSignature, earlier: ParsedSignature) -> Optional[tuple[int, int]]:
    """(normal, size) when ``late`` is ``earlier`` with every differing position scaled by one factor < 1."""
    if late.structure != earlier.structure:
        return None
    pairs = [(earlier.values[p], v) for p, v in late.values.items() if earlier.values.get(p) != v]
    if not pairs:
        return None
    normal0, size0 = pairs[0]
    for normal, size in pairs:
        if not 0 < size < normal or size * normal0 != size0 * normal:
            return None
    return min(pairs)


def _partial_steps(by_step: dict[int, list[TimedSignature]]) -> dict[int, tuple[int, int]]:
    """Late steps whose new signatures are all earlier ones shrunk by one common factor: step ->
    (normal, size), the most common pair."""
    out: dict[int, tuple[int, int]] = {}
    earlier: dict[tuple, list[ParsedSignature]] = defaultdict(list)
    for step in sorted(by_step):
        sigs = by_step[step]
        if step >= WARMUP_STEPS:
            pairs = []
            for sig in sigs:
                found = next((p for p in (_shrink(sig.parsed, e) for e in earlier[sig.parsed.structure]) if p), None)
                if found is None:
                    break
                pairs.append(found)
            else:  # one batch: one factor for all (16 -> 4 and 16*T -> 4*T), not 5, 6, 7... at one step
                if len({Fraction(size, normal) for normal, size in pairs}) == 1:
                    counts = Counter(pairs)
                    out[step] = min(counts, key=lambda p: (-counts[p], p))
        for sig in sigs:
            earlier[sig.parsed.structure].append(sig.parsed)
    return out


def _timelines(sigs: list[TimedSignature], scalar: bool = False) -> list[DimTimeline]:
    """Positions whose values were first seen at different steps, per class of equal structure (the
    float arguments with ``scalar``, else the sizes and integers)."""
    out = []
    classes: dict[tuple, list[TimedSignature]] = defaultdict(list)
    for sig in sigs:
        classes[sig.parsed.structure].append(sig)
    for members in classes.values():
        if len(members) < 2 or len({m.step for m in members}) < 2:
            continue
        of = (lambda m: m.parsed.scalars) if scalar else (lambda m: m.parsed.values)
        positions = set().union(*(of(m) for m in members))
        for position in sorted(positions, key=_position_order):
            first: dict[Any, int] = {}
            example = None
            for m in members:
                value = of(m).get(position)
                if value is None:
                    continue
                if value not in first or m.step < first[value]:
                    first[value] = m.step
                if m.step >= WARMUP_STEPS and example is None:
                    example = m
            if len(first) < 2 or len(set(first.values())) < 2:
                continue
            timeline = tuple(sorted((step, value) for value, step in first.items()))
            pattern = None if scalar else position_pattern((example or members[0]).args, position)
            out.append(DimTimeline(position, timeline, pattern, scalar))
    return out


def _position_order(position: Position) -> tuple[int, int, int]:
    arg, element, dim = position
    return (arg, -1 if element is None else element, -1 if dim is None else dim)


def keeps_changing(timeline: DimTimeline, end: Optional[int] = None) -> bool:
    """New values at two or more steps after warm-up, or at one when it changed during warm-up too, or
    many inside one step after warm-up (``DimTimeline.in_step``)."""
    late = timeline.late_steps
    warm = [s for s in timeline.steps if s < WARMUP_STEPS]
    return len(late) >= 2 or (len(late) == 1 and len(warm) >= 2) or timeline.in_step(end) is not None


def classify(sigs: list[TimedSignature], end: Optional[int] = None) -> Optional[LateShapes]:
    """What the signatures first seen after warm-up are; None when there are none. ``end``: the steps
    measured on this clock (a training slot's optimizer steps), None when unbounded."""
    late = [s for s in sigs if s.step >= WARMUP_STEPS]
    if not late:
        return None
    by_step: dict[int, list[TimedSignature]] = defaultdict(list)
    for sig in sigs:
        by_step[sig.step].append(sig)
    late_steps = tuple(sorted({s.step for s in late}))
    partial = _partial_steps(by_step)
    if len(partial) > MAX_PARTIAL_STEPS:
        partial = {}  # smaller batches at many steps: a batch size that varies, judged as any other dimension
    steady = [s for s in sigs if s.step not in partial]
    varying = sorted((t for t in _timelines(steady) if keeps_changing(t, end)),
                     key=lambda t: (-len(t.late_steps), -len(t.values), t.position[0]))
    if varying:
        return LateShapes("varying", late_steps, len(late), varying=tuple(varying))
    scalars = sorted((t for t in _timelines(steady, scalar=True) if keeps_changing(t, end)),
                     key=lambda t: (-len(t.late_steps), -len(t.values), _position_order(t.position)))
    if scalars:
        return LateShapes("scalar", late_steps, len(late), varying=tuple(scalars))
    if partial:
        seqs = [s.seq for s in sigs if s.step in partial and s.seq is not None]
        return LateShapes("uneven_last_batch", late_steps, len(late),
                          partial=tuple(PartialBatch(step, *pair) for step, pair in sorted(partial.items())),
                          first_partial_seq=min(seqs) if seqs else None)
    return LateShapes("other", late_steps, len(late))


def varying_dims(signatures: Iterable[list]) -> list[dict]:
    """For signatures of one op at one site: which (argument, dimension) differed, with its values
    (regardless of time; a rank that differs is ``dim: None``)."""
    parsed = [parse_signature(s) for s in signatures if isinstance(s, list)]
    if len(parsed) < 2:
        return []
    width = min(len(p.structure) for p in parsed)
    out = []
    for index in range(width):
        kinds = [p.structure[index] for p in parsed]
        if any(k[0] != "t" for k in kinds):
            continue
        ranks = sorted({k[2] for k in kinds})
        if len(ranks) != 1:
            out.append({"arg": index, "dim": None, "values": ranks})
            continue
        for dim in range(ranks[0]):
            values = sorted({p.values[(index, None, dim)] for p in parsed})
            if len(values) > 1:
                out.append({"arg": index, "dim": dim, "values": values})
    return out


def padding_buckets(values: Iterable[int], limit: int = 4) -> list[int]:
    """Powers of two covering the observed values, at most ``limit`` of them (the largest kept)."""
    values = [v for v in values if v > 0]
    if not values:
        return []
    buckets = sorted({1 << math.ceil(math.log2(v)) for v in values})
    if len(buckets) > limit:
        step = len(buckets) / limit
        buckets = sorted({buckets[min(len(buckets) - 1, math.ceil((i + 1) * step) - 1)] for i in range(limit)})
    return buckets
