"""``eager_compile`` events: unique signatures per op and line (each one an eager NEFF compile on
Trainium, then served from the cache), when each was first seen on the process's step clock, and the
shapes that keep appearing after warm-up (NP902) or an uneven last batch (NP910).

Steps (neuron_backend/EVENTS.md, "Steps" and "Phases"; ``phases.py``): training is judged on the optimizer
clock (a step ends at each ``optimizer.step()``), each evaluation and generation on its own calls of the
outermost module, a script without modules on the signature clock (the k-th new signature of an op at a
line is step k). Ranks are merged: a signature's first step is the earliest over processes. Shapes are compared per op, line and
module (``blocks.3.attn``), so the layers that share a line are not mistaken for a varying shape; the
classification is in ``shape_timeline.py``.
"""

from __future__ import annotations

import json
from fractions import Fraction
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Optional

from neuron_port.check.aggregate.base import Aggregator
from neuron_port.check.aggregate.findings import rule_message, runtime_finding
from neuron_port.check.aggregate.scalar_args import np902_message
from neuron_port.check.aggregate.shape_timeline import (
    WARMUP_STEPS,
    LateShapes,
    TimedSignature,
    classify,
    padding_buckets,
    parse_signature,
    split_list,
    varying_dims,
)
from neuron_port.check.aggregate.phases import Phase, ProcessPhases, Slot
from neuron_port.check.aggregate.shape_entries import (MAX_MODULES, EagerCompileEntry, LoaderBatch, ShapeSummary,
                                                       ShapeVarianceEntry, StepCount)
from neuron_port.check.events import (DataLoaderEvent, EagerCompileEvent, EagerCompileTruncatedEvent, FirstSeen,
                                      PhaseEvent, SummaryEvent)
from neuron_port.check.sites import SiteKey, SiteMapper, UserSite, site_key
from neuron_port.results import Finding

__all__ = ["ShapeAggregator", "ShapeSummary", "EagerCompileEntry", "ShapeVarianceEntry", "StepCount",
           "padding_buckets", "varying_dims", "split_list", "parse_signature", "WARMUP_STEPS"]


@dataclass
class _Process:
    summary: Optional[SummaryEvent] = None
    compiles: list[EagerCompileEvent] = field(default_factory=list)
    truncated: list[EagerCompileTruncatedEvent] = field(default_factory=list)
    phase_events: list[PhaseEvent] = field(default_factory=list)
    loaders: list[DataLoaderEvent] = field(default_factory=list)

    def phases(self) -> ProcessPhases:
        return ProcessPhases.of(self.summary, self.compiles, self.truncated, self.phase_events)


@dataclass
class _Group:
    """An op at one line and module, over all processes: signature -> first step, calls, seq."""

    op: str
    site: Optional[UserSite]
    module: Optional[str]
    slot: Slot
    sigs: dict[str, TimedSignature] = field(default_factory=dict)
    end: Optional[int] = None  # a training slot: the optimizer steps measured (what comes after is no step)


@dataclass
class _Analysis:
    groups: list[tuple[_Group, Optional[LateShapes]]]
    first_steps: dict[tuple[str, str], tuple[tuple, Slot, int]]  # (op, signature) -> earliest (order, slot, step)
    omitted: int
    omitted_late: int
    clock: Optional[str]
    phases: tuple[Phase, ...] = ()
    loaders: tuple[DataLoaderEvent, ...] = ()


class ShapeAggregator(Aggregator):
    EVENTS = {EagerCompileEvent: "add", EagerCompileTruncatedEvent: "add_truncated", PhaseEvent: "add_phase",
              DataLoaderEvent: "add_loader"}
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

    def add_phase(self, event: PhaseEvent, rank: Optional[int]) -> None:
        self._process(rank).phase_events.append(event)
        self._analysis = None

    def add_loader(self, event: DataLoaderEvent, rank: Optional[int]) -> None:
        self._process(rank).loaders.append(event)
        self._analysis = None

    def process_phases(self) -> list[ProcessPhases]:
        """Per process (in the order they were read): its phases and the clock of each first sighting;
        ``ProcessPhases.kind_of(first_seen)`` says whether a signature belongs to a training step."""
        return [process.phases() for process in self.processes]

    # ------------------------------------------------------------ analysis
    def _analyse(self) -> _Analysis:
        if self._analysis is not None:
            return self._analysis
        groups: dict[tuple, _Group] = {}
        first_steps: dict[tuple[str, str], tuple[tuple, Slot, int]] = {}
        omitted: dict[str, int] = {}
        omitted_late: dict[str, int] = {}
        clocks, phases, loaders = set(), [], []
        for process in self.processes:
            timing = process.phases()
            clock = timing.legacy_clock
            if process.compiles or process.truncated:
                clocks.add(clock)
                phases = phases or [p for p in timing.listed() if p.kind != "setup"]
            loaders.extend(process.loaders)
            per_group: dict[tuple, list[tuple[EagerCompileEvent, int, int]]] = defaultdict(list)
            for order, event in enumerate(process.compiles):
                site = self.mapper(event.site)
                module = event.site.module if event.site is not None else None
                slot, step = timing.slot(event.first_seen)
                key = (event.op, site_key(site), module, slot.kind, slot.phase)
                if key not in groups:
                    groups[key] = _Group(event.op, site, module, slot)
                per_group[key].append((event, order, step))
                if slot.is_training:
                    groups[key].end = max(groups[key].end or 0, timing.final_steps)
            for key, events in per_group.items():
                group = groups[key]
                if group.slot.kind == "signatures":  # the k-th new signature of the op at this line is step k
                    ranked = sorted(events, key=lambda e: (_seq(e[0].first_seen, e[1]), e[1]))
                    events = [(event, order, k) for k, (event, order, _) in enumerate(ranked)]
                for event, order, step in events:
                    text = json.dumps(list(event.signature))
                    seq = _seq(event.first_seen, order)
                    sig = group.sigs.get(text)
                    if sig is None:
                        group.sigs[text] = TimedSignature(tuple(event.signature), event.calls, step, seq)
                    else:
                        sig.calls += event.calls
                        sig.step = min(sig.step, step)
                        sig.seq = seq if sig.seq is None else min(sig.seq, seq)
                    when = (group.slot.order(step), group.slot, step)
                    known = first_steps.get((event.op, text))
                    if known is None or when[0] < known[0]:
                        first_steps[(event.op, text)] = when
            for event in process.truncated:
                omitted[event.op] = max(omitted.get(event.op, 0), event.omitted_signatures)
                late = 0
                for c in event.first_seen:
                    slot, step = timing.slot(FirstSeen(c.optimizer_step, c.forward, None, c.phase, c.phase_forward))
                    late += c.signatures if slot.kind not in ("signatures", "setup") and step >= WARMUP_STEPS else 0
                omitted_late[event.op] = max(omitted_late.get(event.op, 0), late)
        analysed = [(g, classify(list(g.sigs.values()), g.end)) for g in groups.values()]
        clock = None if not clocks else clocks.pop() if len(clocks) == 1 else "mixed"
        self._analysis = _Analysis(analysed, first_steps, sum(omitted.values()), sum(omitted_late.values()), clock,
                                   tuple(phases), tuple(loaders))
        return self._analysis

    @property
    def unique_signatures(self) -> int:
        """Distinct (op, signature) over all sites and ranks (written ones; see summary() for all)."""
        return len(self._analyse().first_steps)

    def summary(self) -> ShapeSummary:
        analysis = self._analyse()
        late = sum(1 for _, _, step in analysis.first_steps.values() if step >= WARMUP_STEPS)
        last = max(analysis.first_steps.values(), key=lambda w: w[0], default=None)
        variance = self.shape_variance()
        return ShapeSummary(
            clock=analysis.clock, warmup_steps=WARMUP_STEPS, last_step=last[2] if last else None,
            first_run_compiles=len(analysis.first_steps) + analysis.omitted,
            after_warmup=late + analysis.omitted_late,
            varying_sites=len({site_key(v.site) for v in variance if v.kind in RECOMPILING}),
            uneven_batch_sites=len({site_key(v.site) for v in variance if v.kind == "uneven_last_batch"}),
            last_phase=last[1].name if last and last[1].named else None, phases=analysis.phases)

    def entries(self) -> list[EagerCompileEntry]:
        """Per op and line (merged over modules and ranks), the most signatures first."""
        by_line: dict[tuple[str, SiteKey], list[_Group]] = defaultdict(list)
        for group, _ in self._analyse().groups:
            by_line[(group.op, site_key(group.site))].append(group)
        out = []
        for (op, _), groups in by_line.items():
            steps: dict[str, tuple[tuple, Slot, int]] = {}
            for group in groups:
                for text, sig in group.sigs.items():
                    when = (group.slot.order(sig.step), group.slot, sig.step)
                    if text not in steps or when[0] < steps[text][0]:
                        steps[text] = when
            counts = Counter((order, slot, step) for order, slot, step in steps.values())
            modules = sorted({g.module for g in groups if g.module is not None})
            out.append(EagerCompileEntry(
                op=op, site=groups[0].site, unique_signatures=len(steps),
                calls=sum(s.calls for g in groups for s in g.sigs.values()),
                after_warmup=sum(n for (_, _, step), n in counts.items() if step >= WARMUP_STEPS),
                first_seen=tuple(StepCount(step, n, slot if slot.named else None)
                                 for (_, slot, step), n in sorted(counts.items(), key=lambda kv: kv[0][0])),
                modules=tuple(modules[:MAX_MODULES])))
        return sorted(out, key=lambda e: (-e.unique_signatures, e.op))

    def _loader_for(self, slot: Slot, late: LateShapes) -> Optional[LoaderBatch]:
        """The DataLoader whose smaller batch these are: one that yielded a batch shrunk by the same factor
        (a generation's inputs come from the program, not from a loader)."""
        if slot.kind == "generation" or not late.partial:
            return None
        factor = Fraction(late.partial[0].size, late.partial[0].normal)
        event = next((e for e in self._analyse().loaders
                      if e.batch_size and Fraction(e.size, e.batch_size) == factor), None)
        return LoaderBatch(self.mapper(event.site), event.batch_size, event.size) if event else None

    def shape_variance(self) -> list[ShapeVarianceEntry]:
        """Per op, line and phase: shapes that kept changing after warm-up, or the smaller last batch of a
        DataLoader."""
        by_line: dict[tuple, list[tuple[_Group, LateShapes, Optional[LoaderBatch]]]] = defaultdict(list)
        for group, late in self._analyse().groups:
            loader = self._loader_for(group.slot, late) if late is not None else None
            if late is not None and (late.kind in RECOMPILING or late.kind == "uneven_last_batch" and loader):
                by_line[(group.op, site_key(group.site), group.slot.kind, group.slot.phase)].append(
                    (group, late, loader))
        out = []
        for (op, *_), items in by_line.items():
            kind = next((k for k in (*RECOMPILING, "uneven_last_batch") if any(late.kind == k for _, late, _ in items)))
            chosen = [(g, late, loader) for g, late, loader in items if late.kind == kind]
            worst_group, worst, loader = max(chosen, key=lambda gl: (
                len(gl[1].varying[0].late_steps) if gl[1].varying else 0, gl[1].late_signatures, len(gl[0].sigs)))
            all_sigs = {text for g, _, _ in items for text in g.sigs}
            partial = sorted({p for _, late, _ in chosen for p in late.partial}, key=lambda p: (p.step, p.normal))
            if kind == "scalar":
                buckets = []  # a value, not a size: a tensor argument, not padding
            elif kind == "varying":
                buckets = padding_buckets(worst.varying[0].values)
            else:
                buckets = sorted({p.normal for p in partial})
            seqs = [late.first_partial_seq for _, late, _ in chosen if late.first_partial_seq is not None]
            out.append(ShapeVarianceEntry(
                op=op, site=worst_group.site, kind=kind, signatures=len(all_sigs),
                after_warmup=sum(late.late_signatures for _, late, _ in items),
                calls=sum(s.calls for g, _, _ in items for s in g.sigs.values()),
                late_steps=tuple(sorted({s for _, late, _ in chosen for s in late.late_steps})),
                varying=worst.varying, partial_batches=tuple(partial), suggested_buckets=tuple(buckets),
                modules=tuple(sorted({g.module for g, _, _ in chosen if g.module is not None})[:MAX_MODULES]),
                first_partial_seq=min(seqs) if seqs else None,
                slot=worst_group.slot if worst_group.slot.named else None, loader=loader))
        return sorted(out, key=lambda v: (v.kind != "varying", -len(v.late_steps), -v.after_warmup, v.op))

    def section(self) -> tuple[tuple[EagerCompileEntry, ...], ShapeSummary, tuple[ShapeVarianceEntry, ...]]:
        return tuple(self.entries()), self.summary(), tuple(self.shape_variance())

    # ------------------------------------------------------------ findings
    def findings(self) -> list[Finding]:
        """One NP902 per line and phase (several ops on one line share the cause; training and a generation
        after it need different fixes); one NP910 per uneven last batch, at the first line that ran it (the
        others are named in the message)."""
        variance = [v for v in self.shape_variance() if v.site is not None]  # no user frame: JSON only
        varying: dict[tuple, list[ShapeVarianceEntry]] = defaultdict(list)
        for v in variance:
            if v.kind in RECOMPILING:
                varying[(site_key(v.site), _slot_key(v.slot))].append(v)
        varying_lines = {line for line, _ in varying}
        out = []
        for items in sorted(varying.values(), key=lambda vs: (vs[0].kind != "varying", -len(vs[0].late_steps),
                                                              site_key(vs[0].site))):
            worst = items[0]
            message = np902_message(worst, _steps, _in_phase(worst.slot))
            if len(items) > 1:
                message += f" (also {len(items) - 1} other op(s) here: {', '.join(sorted({v.op for v in items}))})"
            out.append(runtime_finding("NP902", message, worst.site))
        # One batch shrinks every op by one factor (16 -> 4 rows, 16*T -> 4*T where it is flattened); the
        # ops after optimizer.step() (metrics) see it one step later, so the factor alone groups them.
        uneven: dict[Fraction, list[ShapeVarianceEntry]] = defaultdict(list)
        for v in variance:
            if v.kind == "uneven_last_batch" and site_key(v.site) not in varying_lines:
                p = v.partial_batches[0]
                uneven[Fraction(p.size, p.normal)].append(v)
        for _, items in sorted(uneven.items()):
            first = min(items, key=lambda v: (v.first_partial_seq is None, v.first_partial_seq or 0,
                                              -v.after_warmup))
            batch = first.partial_batches[0]
            lines = {site_key(v.site) for v in items} - {site_key(first.site)}
            here = sum(v.after_warmup for v in items if site_key(v.site) == site_key(first.site))
            where = first.loader.site if first.loader else None
            message = rule_message("NP910", size=batch.size, normal=batch.normal, step=batch.step, n=here,
                                   others=f" and at {len(lines)} other line(s)" if lines else "",
                                   loader=f"{where.path}:{where.line}" if where else "?", phase=_in_phase(first.slot),
                                   advice=_batch_advice(first.slot, batch.normal))
            out.append(runtime_finding("NP910", message, first.site))
        return out


RECOMPILING = ("varying", "scalar")  # the kinds NP902 reports, shapes before scalars


def _slot_key(slot: Optional[Slot]) -> tuple:
    return (slot.kind, slot.phase) if slot is not None else ("", None)


def _in_phase(slot: Optional[Slot]) -> str:
    """`` in the generation after optimizer step 6`` for an evaluation or generation ("" for training)."""
    return f" in the {slot.name}" if slot is not None and slot.phase is not None else ""


def _batch_advice(slot: Optional[Slot], normal: int) -> str:
    if slot is not None and slot.kind == "evaluation":
        return (f"pad it to {normal} and mask the padded rows in the metric (`drop_last=True` would leave samples "
                "out of the evaluation)")
    return "use `drop_last=True` in that DataLoader, or pad the last batch"


def _seq(first_seen: Optional[FirstSeen], order: int) -> int:
    return first_seen.seq if first_seen is not None and first_seen.seq is not None else order


def _steps(steps: tuple[int, ...], limit: int = 8) -> str:
    shown = ", ".join(map(str, steps[:limit]))
    return shown + (f", ... ({len(steps)} steps)" if len(steps) > limit else "")
