"""``eager_compile`` events: unique signatures per op and line (each one an eager NEFF compile on
Trainium, then served from the cache), when each was first seen on the process's step clock, and the
shapes that keep appearing after warm-up (NP902) or an uneven last batch (NP910).

Steps (neuron_backend/EVENTS.md, "Steps"): per process, the optimizer clock when an optimizer stepped
(a step ends at each ``optimizer.step()``), else the forward clock (a step is one call of the outermost
module), else the signature clock (the k-th new signature of an op at a line is step k). Ranks are
merged: a signature's first step is the earliest over processes. Shapes are compared per op, line and
module (``blocks.3.attn``), so the layers that share a line are not mistaken for a varying shape; the
classification is in ``shape_timeline.py``.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from neuron_port.check.aggregate.base import Aggregator
from neuron_port.check.aggregate.findings import rule_message, runtime_finding
from neuron_port.check.aggregate.shape_timeline import (
    WARMUP_STEPS,
    DimTimeline,
    LateShapes,
    PartialBatch,
    TimedSignature,
    classify,
    parse_signature,
    split_list,
)
from neuron_port.check.events import EagerCompileEvent, EagerCompileTruncatedEvent, FirstSeen, SummaryEvent
from neuron_port.check.sites import SiteKey, SiteMapper, UserSite, site_json, site_key
from neuron_port.results import Finding

__all__ = ["ShapeAggregator", "ShapeSummary", "EagerCompileEntry", "ShapeVarianceEntry", "StepCount",
           "padding_buckets", "varying_dims", "split_list", "parse_signature", "WARMUP_STEPS"]

MAX_MODULES = 12  # module paths listed per entry


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


@dataclass(frozen=True)
class StepCount:
    step: int
    signatures: int

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "signatures": self.signatures}


@dataclass(frozen=True)
class EagerCompileEntry:
    op: str
    site: Optional[UserSite]
    unique_signatures: int
    calls: int
    after_warmup: int = 0  # signatures first seen at step >= WARMUP_STEPS
    first_seen: tuple[StepCount, ...] = ()  # new signatures per step, for a plot
    modules: tuple[str, ...] = ()  # the modules that ran the op at this line (at most MAX_MODULES)

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "site": site_json(self.site), "unique_signatures": self.unique_signatures,
                "calls": self.calls, "after_warmup": self.after_warmup,
                "first_seen": [c.to_json() for c in self.first_seen], "modules": list(self.modules)}


@dataclass(frozen=True)
class ShapeVarianceEntry:
    """An op at a line whose shapes kept changing after warm-up (``varying``) or that saw an uneven
    last batch (``uneven_last_batch``), merged over the modules that ran it there."""

    op: str
    site: Optional[UserSite]
    kind: str  # varying | uneven_last_batch
    signatures: int  # at this line, all modules
    after_warmup: int
    calls: int
    late_steps: tuple[int, ...]  # steps after warm-up at which new signatures appeared
    varying: tuple[DimTimeline, ...]  # the positions that kept changing (varying)
    partial_batches: tuple[PartialBatch, ...]  # uneven_last_batch
    suggested_buckets: tuple[int, ...]
    modules: tuple[str, ...] = ()
    first_partial_seq: Optional[int] = None

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "site": site_json(self.site), "kind": self.kind, "modules": list(self.modules),
                "signatures": self.signatures, "after_warmup": self.after_warmup, "calls": self.calls,
                "late_steps": list(self.late_steps), "varying": [d.to_json() for d in self.varying],
                "partial_batches": [p.to_json() for p in self.partial_batches],
                "suggested_buckets": list(self.suggested_buckets)}


@dataclass(frozen=True)
class ShapeSummary:
    """The steady-state view of eager compiles (the report's ``runtime.shapes``)."""

    clock: Optional[str]  # optimizer | forward | signatures | mixed (processes differ); None: no compile
    warmup_steps: int
    last_step: Optional[int]  # the last step at which a new signature appeared
    first_run_compiles: int  # distinct (op, signature): every one compiles once on a cold cache
    after_warmup: int  # of those, first seen at a step >= warmup_steps
    varying_sites: int  # lines with NP902
    uneven_batch_sites: int  # lines with an uneven last batch

    def to_json(self) -> dict[str, Any]:
        return {"clock": self.clock, "warmup_steps": self.warmup_steps, "last_step": self.last_step,
                "first_run_compiles": self.first_run_compiles, "after_warmup": self.after_warmup,
                "varying_sites": self.varying_sites, "uneven_batch_sites": self.uneven_batch_sites}


@dataclass
class _Process:
    summary: Optional[SummaryEvent] = None
    compiles: list[EagerCompileEvent] = field(default_factory=list)
    truncated: list[EagerCompileTruncatedEvent] = field(default_factory=list)

    def clock(self) -> str:
        firsts = [e.first_seen for e in self.compiles if e.first_seen is not None]
        summary = self.summary
        if not firsts and not self.truncated:
            return "signatures"
        if (summary and summary.optimizer_steps) or any(f.optimizer_step for f in firsts) or any(
                c.optimizer_step for t in self.truncated for c in t.first_seen):
            return "optimizer"
        if (summary and summary.forwards) or any(f.forward for f in firsts):
            return "forward"
        return "signatures"


def _step(clock: str, optimizer_step: int, forward: int) -> int:
    return optimizer_step if clock == "optimizer" else max(forward - 1, 0)


@dataclass
class _Group:
    """An op at one line and module, over all processes: signature -> first step, calls, seq."""

    op: str
    site: Optional[UserSite]
    module: Optional[str]
    sigs: dict[str, TimedSignature] = field(default_factory=dict)


@dataclass
class _Analysis:
    groups: list[tuple[_Group, Optional[LateShapes]]]
    first_steps: dict[tuple[str, str], int]  # (op, signature) -> earliest first step
    omitted: int
    omitted_late: int
    clock: Optional[str]


class ShapeAggregator(Aggregator):
    EVENTS = {EagerCompileEvent: "add", EagerCompileTruncatedEvent: "add_truncated"}
    SECTION = ("eager_compiles", "shapes", "shape_variance")

    def __init__(self, mapper: SiteMapper) -> None:
        self.mapper = mapper
        self.processes: list[_Process] = []
        self._by_rank: dict[Optional[int], _Process] = {}
        self._current: Optional[_Process] = None
        self._analysis: Optional[_Analysis] = None

    def start_process(self, summary: Optional[SummaryEvent]) -> None:
        """The events that follow come from one process (its summary gives its step clock)."""
        self._current = _Process(summary)
        self.processes.append(self._current)
        self._analysis = None

    def _process(self, rank: Optional[int]) -> _Process:
        if self._current is not None:
            return self._current
        if rank not in self._by_rank:  # events added without start_process(): one process per rank
            self._by_rank[rank] = _Process()
            self.processes.append(self._by_rank[rank])
        return self._by_rank[rank]

    def add(self, event: EagerCompileEvent, rank: Optional[int]) -> None:
        self._process(rank).compiles.append(event)
        self._analysis = None

    def add_truncated(self, event: EagerCompileTruncatedEvent, rank: Optional[int]) -> None:
        self._process(rank).truncated.append(event)
        self._analysis = None

    # ------------------------------------------------------------ analysis
    def _analyse(self) -> _Analysis:
        if self._analysis is not None:
            return self._analysis
        groups: dict[tuple[str, SiteKey, Optional[str]], _Group] = {}
        first_steps: dict[tuple[str, str], int] = {}
        omitted: dict[str, int] = {}
        omitted_late: dict[str, int] = {}
        clocks = set()
        for process in self.processes:
            clock = process.clock()
            if process.compiles or process.truncated:
                clocks.add(clock)
            per_group: dict[tuple, list[tuple[EagerCompileEvent, int]]] = defaultdict(list)
            for order, event in enumerate(process.compiles):
                site = self.mapper(event.site)
                module = event.site.module if event.site is not None else None
                key = (event.op, site_key(site), module)
                if key not in groups:
                    groups[key] = _Group(event.op, site, module)
                per_group[key].append((event, order))
            for key, events in per_group.items():
                if clock == "signatures":  # the k-th new signature of the op at this line is step k
                    ranked = sorted(events, key=lambda e: (_seq(e[0].first_seen, e[1]), e[1]))
                    steps = {id(event): k for k, (event, _) in enumerate(ranked)}
                else:
                    steps = {id(event): _step(clock, event.first_seen.optimizer_step, event.first_seen.forward)
                             if event.first_seen else 0 for event, _ in events}
                group = groups[key]
                for event, order in events:
                    step = steps[id(event)]
                    text = json.dumps(list(event.signature))
                    seq = _seq(event.first_seen, order)
                    sig = group.sigs.get(text)
                    if sig is None:
                        group.sigs[text] = TimedSignature(tuple(event.signature), event.calls, step, seq)
                    else:
                        sig.calls += event.calls
                        sig.step = min(sig.step, step)
                        sig.seq = seq if sig.seq is None else min(sig.seq, seq)
                    known = first_steps.get((event.op, text))
                    first_steps[(event.op, text)] = step if known is None else min(known, step)
            for event in process.truncated:
                omitted[event.op] = max(omitted.get(event.op, 0), event.omitted_signatures)
                late = sum(c.signatures for c in event.first_seen
                           if clock != "signatures" and _step(clock, c.optimizer_step, c.forward) >= WARMUP_STEPS)
                omitted_late[event.op] = max(omitted_late.get(event.op, 0), late)
        analysed = [(g, classify(list(g.sigs.values()))) for g in groups.values()]
        clock = None if not clocks else clocks.pop() if len(clocks) == 1 else "mixed"
        self._analysis = _Analysis(analysed, first_steps, sum(omitted.values()), sum(omitted_late.values()), clock)
        return self._analysis

    @property
    def unique_signatures(self) -> int:
        """Distinct (op, signature) over all sites and ranks (written ones; see summary() for all)."""
        return len(self._analyse().first_steps)

    def summary(self) -> ShapeSummary:
        analysis = self._analyse()
        late = sum(1 for step in analysis.first_steps.values() if step >= WARMUP_STEPS)
        variance = self.shape_variance()
        return ShapeSummary(
            clock=analysis.clock, warmup_steps=WARMUP_STEPS,
            last_step=max(analysis.first_steps.values(), default=None),
            first_run_compiles=len(analysis.first_steps) + analysis.omitted,
            after_warmup=late + analysis.omitted_late,
            varying_sites=len({site_key(v.site) for v in variance if v.kind == "varying"}),
            uneven_batch_sites=len({site_key(v.site) for v in variance if v.kind == "uneven_last_batch"}))

    def entries(self) -> list[EagerCompileEntry]:
        """Per op and line (merged over modules and ranks), the most signatures first."""
        by_line: dict[tuple[str, SiteKey], list[_Group]] = defaultdict(list)
        for group, _ in self._analyse().groups:
            by_line[(group.op, site_key(group.site))].append(group)
        out = []
        for (op, _), groups in by_line.items():
            steps: dict[str, int] = {}
            for group in groups:
                for text, sig in group.sigs.items():
                    steps[text] = min(steps.get(text, sig.step), sig.step)
            counts = Counter(steps.values())
            modules = sorted({g.module for g in groups if g.module is not None})
            out.append(EagerCompileEntry(
                op=op, site=groups[0].site, unique_signatures=len(steps),
                calls=sum(s.calls for g in groups for s in g.sigs.values()),
                after_warmup=sum(n for step, n in counts.items() if step >= WARMUP_STEPS),
                first_seen=tuple(StepCount(step, n) for step, n in sorted(counts.items())),
                modules=tuple(modules[:MAX_MODULES])))
        return sorted(out, key=lambda e: (-e.unique_signatures, e.op))

    def shape_variance(self) -> list[ShapeVarianceEntry]:
        """Per op and line: shapes that kept changing after warm-up, or an uneven last batch."""
        by_line: dict[tuple[str, SiteKey], list[tuple[_Group, LateShapes]]] = defaultdict(list)
        for group, late in self._analyse().groups:
            if late is not None and late.kind in ("varying", "uneven_last_batch"):
                by_line[(group.op, site_key(group.site))].append((group, late))
        out = []
        for (op, _), items in by_line.items():
            kind = "varying" if any(late.kind == "varying" for _, late in items) else "uneven_last_batch"
            chosen = [(g, late) for g, late in items if late.kind == kind]
            worst_group, worst = max(chosen, key=lambda gl: (
                len(gl[1].varying[0].late_steps) if gl[1].varying else 0, gl[1].late_signatures, len(gl[0].sigs)))
            all_sigs = {text for g, _ in items for text in g.sigs}
            partial = sorted({p for _, late in chosen for p in late.partial}, key=lambda p: (p.step, p.normal))
            if kind == "varying":
                buckets = padding_buckets(worst.varying[0].values)
            else:
                buckets = sorted({p.normal for p in partial})
            seqs = [late.first_partial_seq for _, late in chosen if late.first_partial_seq is not None]
            out.append(ShapeVarianceEntry(
                op=op, site=worst_group.site, kind=kind, signatures=len(all_sigs),
                after_warmup=sum(late.late_signatures for _, late in items),
                calls=sum(s.calls for g, _ in items for s in g.sigs.values()),
                late_steps=tuple(sorted({s for _, late in chosen for s in late.late_steps})),
                varying=worst.varying, partial_batches=tuple(partial), suggested_buckets=tuple(buckets),
                modules=tuple(sorted({g.module for g, _ in chosen if g.module is not None})[:MAX_MODULES]),
                first_partial_seq=min(seqs) if seqs else None))
        return sorted(out, key=lambda v: (v.kind != "varying", -len(v.late_steps), -v.after_warmup, v.op))

    def section(self) -> tuple[tuple[EagerCompileEntry, ...], ShapeSummary, tuple[ShapeVarianceEntry, ...]]:
        return tuple(self.entries()), self.summary(), tuple(self.shape_variance())

    # ------------------------------------------------------------ findings
    def findings(self) -> list[Finding]:
        """One NP902 per line (several ops on one line share the cause); one NP910 per uneven last
        batch, at the first line that ran it (the others are named in the message)."""
        variance = [v for v in self.shape_variance() if v.site is not None]  # no user frame: JSON only
        varying: dict[SiteKey, list[ShapeVarianceEntry]] = defaultdict(list)
        for v in variance:
            if v.kind == "varying":
                varying[site_key(v.site)].append(v)
        out = []
        for items in sorted(varying.values(), key=lambda vs: (-len(vs[0].late_steps), site_key(vs[0].site))):
            worst = items[0]
            dim = worst.varying[0]
            message = rule_message("NP902", op=worst.op, dim=dim.describe(), steps=_steps(dim.late_steps),
                                   n=worst.signatures, late=worst.after_warmup, buckets=list(worst.suggested_buckets))
            if len(items) > 1:
                message += f" (also {len(items) - 1} other op(s) here: {', '.join(sorted({v.op for v in items}))})"
            out.append(runtime_finding("NP902", message, worst.site))
        # One batch shrinks every op by one factor (16 -> 4 rows, 16*T -> 4*T where it is flattened); the
        # ops after optimizer.step() (metrics) see it one step later, so the factor alone groups them.
        uneven: dict[Fraction, list[ShapeVarianceEntry]] = defaultdict(list)
        for v in variance:
            if v.kind == "uneven_last_batch" and site_key(v.site) not in varying:
                p = v.partial_batches[0]
                uneven[Fraction(p.size, p.normal)].append(v)
        for _, items in sorted(uneven.items()):
            first = min(items, key=lambda v: (v.first_partial_seq is None, v.first_partial_seq or 0,
                                              -v.after_warmup))
            batch = first.partial_batches[0]
            lines = {site_key(v.site) for v in items} - {site_key(first.site)}
            here = sum(v.after_warmup for v in items if site_key(v.site) == site_key(first.site))
            message = rule_message("NP910", size=batch.size, normal=batch.normal, step=batch.step, n=here,
                                   others=f" and at {len(lines)} other line(s)" if lines else "")
            out.append(runtime_finding("NP910", message, first.site))
        return out


def _seq(first_seen: Optional[FirstSeen], order: int) -> int:
    return first_seen.seq if first_seen is not None and first_seen.seq is not None else order


def _steps(steps: tuple[int, ...], limit: int = 8) -> str:
    shown = ", ".join(map(str, steps[:limit]))
    return shown + (f", ... ({len(steps)} steps)" if len(steps) > limit else "")
