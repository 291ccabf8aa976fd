"""The report's ``runtime`` section: the simulator's events of every process (``events.py``) fed to one
aggregator per event kind (``aggregate/``), merged over ranks per (kind, site), plus the NP9xx findings.

The simulator only records; the aggregators judge. ``RuntimeSection.to_json()`` is what the JSON report
holds under ``runtime`` (neuron_port/schema/report.schema.json).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from neuron_port.check.aggregate.command import ProcessFailure, command_failed_finding, process_failures
from neuron_port.check.aggregate.compiles import CompileAggregator, CompileEntry
from neuron_port.check.aggregate.demotions import DemotionAggregator, DemotionEntry
from neuron_port.check.aggregate.distributed import DistributedAggregator, DistributedEntry
from neuron_port.check.aggregate.fallbacks import FallbackAggregator, FallbackEntry
from neuron_port.check.aggregate.neff_cache import NeffCacheAggregator, NeffCacheTotals
from neuron_port.check.aggregate.ops import OpsAggregator, OpTotals
from neuron_port.check.aggregate.shapes import EagerCompileEntry, ShapeAggregator, ShapeSummary, ShapeVarianceEntry
from neuron_port.check.aggregate.unsupported import UnsupportedAggregator, UnsupportedEntry
from neuron_port.check.events import (
    CompileEvent,
    DemotionEvent,
    DistributedEvent,
    EagerCompileEvent,
    EagerCompileTruncatedEvent,
    FallbackEvent,
    NeffCacheEvent,
    OpEvent,
    ProcessEvents,
    UnsupportedEvent,
)
from neuron_port.check.runner import RunStatus
from neuron_port.check.sites import SiteMapper
from neuron_port.results import Finding


@dataclass(frozen=True)
class ProcessEntry:
    rank: Optional[int]
    pid: Optional[int]
    status: Optional[str]  # running | exited | exception | sigterm (None: no process line)
    complete: bool  # the snapshot was written at exit, exception or SIGTERM
    rebuilt: bool = False  # no complete snapshot: the events come from the crash-proof records
    notes: tuple[str, ...] = ()  # what the reader ignored ("file:line: ignored: why") or rebuilt

    @classmethod
    def of(cls, process: ProcessEvents) -> ProcessEntry:
        info = process.process
        return cls(rank=info.rank if info else None, pid=info.pid if info else None,
                   status=info.status if info else None,
                   complete=process.summary.complete if process.summary else False,
                   rebuilt=process.rebuilt, notes=tuple(process.notes))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rank": self.rank, "pid": self.pid, "status": self.status, "complete": self.complete}
        if self.rebuilt:
            out["rebuilt"] = True
        if self.notes:
            out["notes"] = list(self.notes)
        return out


@dataclass(frozen=True)
class RuntimeSection:
    """What the run on the simulated neuron device recorded, merged over processes per site."""

    status: RunStatus
    processes: tuple[ProcessEntry, ...]
    ops: OpTotals
    fallbacks: tuple[FallbackEntry, ...]
    eager_compiles: tuple[EagerCompileEntry, ...]
    shapes: ShapeSummary  # the steady-state view: first-run compiles, how many after warm-up
    shape_variance: tuple[ShapeVarianceEntry, ...]  # ops whose shapes kept changing after warm-up
    compiles: tuple[CompileEntry, ...]
    demotions: tuple[DemotionEntry, ...]  # float64 per op and site, then the int64 aggregates
    unsupported: tuple[UnsupportedEntry, ...]
    distributed: tuple[DistributedEntry, ...]
    neff_cache: NeffCacheTotals
    failures: tuple[ProcessFailure, ...] = ()  # processes that ended with an uncaught exception
    estimate: Optional[dict[str, Any]] = None  # the report's top-level `estimate` (check/estimate/), not in to_json

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.to_json(),
            "processes": [p.to_json() for p in self.processes],
            "ops": self.ops.to_json(),
            "fallbacks": [f.to_json() for f in self.fallbacks],
            "eager_compiles": [e.to_json() for e in self.eager_compiles],
            "shapes": self.shapes.to_json(),
            "shape_variance": [v.to_json() for v in self.shape_variance],
            "compiles": [c.to_json() for c in self.compiles],
            "demotions": [d.to_json() for d in self.demotions],
            "unsupported": [u.to_json() for u in self.unsupported],
            "distributed": [d.to_json() for d in self.distributed],
            "neff_cache": self.neff_cache.to_json(),
            "failures": [f.to_json() for f in self.failures],
        }


def build_runtime(processes: list[ProcessEvents], status: RunStatus,
                  mapper: SiteMapper) -> tuple[RuntimeSection, list[Finding]]:
    """The runtime section and its findings (in the order: fallbacks, shapes (NP902, then NP910),
    compiles, demotions, unsupported features, distributed, the failed command)."""
    ops = OpsAggregator()
    fallbacks = FallbackAggregator(mapper)
    shapes = ShapeAggregator(mapper)
    compiles = CompileAggregator(mapper)
    demotions = DemotionAggregator(mapper)
    unsupported = UnsupportedAggregator(mapper)
    distributed = DistributedAggregator(mapper)
    neff_cache = NeffCacheAggregator()
    # Event kinds without an aggregator (explicit_ops) are not in the report.
    handlers: dict[type, Callable[[Any, Optional[int]], None]] = {
        OpEvent: ops.add,
        FallbackEvent: fallbacks.add,
        EagerCompileEvent: shapes.add,
        EagerCompileTruncatedEvent: shapes.add_truncated,
        DemotionEvent: demotions.add,
        UnsupportedEvent: unsupported.add,
        CompileEvent: compiles.add,
        DistributedEvent: distributed.add,
        NeffCacheEvent: neff_cache.add,
    }
    for process in processes:
        shapes.start_process(process.summary)  # its step clock
        for event in process.events:
            handler = handlers.get(type(event))
            if handler is not None:
                handler(event, process.rank)
        neff_cache.add_summary(process.summary)

    failures = process_failures(processes, status, mapper)
    failed = command_failed_finding(status, failures)
    findings = [*fallbacks.findings(), *shapes.findings(), *compiles.findings(), *demotions.findings(),
                *unsupported.findings(), *distributed.findings(), *([failed] if failed else [])]
    section = RuntimeSection(
        status=status,
        processes=tuple(ProcessEntry.of(p) for p in processes),
        ops=ops.totals(unique_signatures=shapes.unique_signatures),
        fallbacks=tuple(fallbacks.entries()),
        eager_compiles=tuple(shapes.entries()),
        shapes=shapes.summary(),
        shape_variance=tuple(shapes.shape_variance()),
        compiles=tuple(compiles.entries()),
        demotions=tuple(demotions.entries()),
        unsupported=tuple(unsupported.entries()),
        distributed=tuple(distributed.entries()),
        neff_cache=neff_cache.totals(),
        failures=tuple(failures),
    )
    return section, findings
