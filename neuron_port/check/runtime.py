"""The report's ``runtime`` section: the simulator's events of every process (``events/``) fed to the
aggregators (``aggregate/``), merged over ranks per (kind, site), plus the NP9xx findings.

``AGGREGATORS`` is the one list: each aggregator declares the event kinds it takes (``EVENTS``) and the
keys of the section it fills (``SECTION``); the handler table, the order of the section's keys and the
order of the findings follow from the list. The simulator only records; the aggregators judge.
``RuntimeSection.to_json()`` is what the JSON report holds under ``runtime``
(neuron_port/schema/report.schema.json).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from neuron_port.check.aggregate.base import Aggregator
from neuron_port.check.aggregate.command import ProcessFailure, command_failed_finding, process_failures
from neuron_port.check.aggregate.compiles import CompileAggregator
from neuron_port.check.aggregate.demotions import DemotionAggregator
from neuron_port.check.aggregate.distributed import DistributedAggregator
from neuron_port.check.aggregate.fallbacks import FallbackAggregator
from neuron_port.check.aggregate.lost_records import lost_records_findings
from neuron_port.check.aggregate.neff_cache import NeffCacheAggregator
from neuron_port.check.aggregate.ops import OpsAggregator
from neuron_port.check.aggregate.shape_only import ShapeOnlyAggregator
from neuron_port.check.aggregate.shapes import ShapeAggregator
from neuron_port.check.aggregate.unsupported import UnsupportedAggregator
from neuron_port.check.events import LostRecords, ProcessEvents
from neuron_port.check.runner import RunStatus
from neuron_port.check.sites import SiteMapper
from neuron_port.results import Finding

# The order of the section's keys (after status and processes, before failures) and of the findings
# (the failed command's NP909 comes last). Event kinds no aggregator takes (explicit_ops) are not in
# the report.
AGGREGATORS: tuple[type[Aggregator], ...] = (
    OpsAggregator,
    FallbackAggregator,
    ShapeAggregator,  # NP902, then NP910
    CompileAggregator,
    DemotionAggregator,
    UnsupportedAggregator,
    DistributedAggregator,
    NeffCacheAggregator,
    ShapeOnlyAggregator,  # NP911: placeholders, then size rules
)


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
    """What the run on the simulated neuron device recorded, merged over processes per site. The
    aggregators' parts (``ops``, ``fallbacks``, ``eager_compiles``, ``shapes``, ``shape_variance``,
    ``compiles``, ``demotions``, ``unsupported``, ``distributed``, ``neff_cache``, ``shape_only``: ``SECTION``
    of each aggregator) read as attributes too: ``section.ops`` is ``section.parts["ops"]``."""

    status: RunStatus
    processes: tuple[ProcessEntry, ...]
    parts: Mapping[str, Any] = field(default_factory=dict, hash=False)  # in the order of AGGREGATORS
    failures: tuple[ProcessFailure, ...] = ()  # processes that ended with an uncaught exception
    estimate: Optional[dict[str, Any]] = None  # the report's top-level `estimate` (check/estimate/), not in to_json
    mode: str = "real"  # "shape_only": every neuron tensor was fake (check --shape-only)
    lost_records: tuple[LostRecords, ...] = ()  # device work the counts miss (NP912, check/events/lost.py)
    next_step: Optional[str] = None  # a failed run of code not ported yet: what to do first (command.py)
    estimate_withheld: Optional[str] = None  # why the run has no estimate although ops ran (session.py)
    # with a withheld estimate, the most device memory any process held before the failure (an OOM-killed
    # run's peak is what its user needs most; the estimate's memory row is gone with the estimate)
    device_peak_bytes: Optional[int] = None

    def __getattr__(self, name: str) -> Any:
        parts = self.__dict__.get("parts")  # not found as a field: one of the aggregators' parts
        if parts is not None and name in parts:
            return parts[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "status": self.status.to_json(),
            "processes": [p.to_json() for p in self.processes],
            **{key: _json(value) for key, value in self.parts.items()},
            "failures": [f.to_json() for f in self.failures],
            # only when some were lost: a run's JSON is otherwise what it was before the key
            **({"lost_records": [lost.to_json() for lost in self.lost_records]} if self.lost_records else {}),
            **({"next_step": self.next_step} if self.next_step else {}),
            **({"estimate_withheld": self.estimate_withheld} if self.estimate_withheld else {}),
            **({"device_peak_bytes": self.device_peak_bytes} if self.device_peak_bytes is not None else {}),
        }


def _json(value: Any) -> Any:
    """A part of the section: an entry, or a tuple of entries."""
    return [v.to_json() for v in value] if isinstance(value, tuple) else value.to_json()


def build_runtime(processes: list[ProcessEvents], status: RunStatus, mapper: SiteMapper,
                  lost: Sequence[LostRecords] = ()) -> tuple[RuntimeSection, list[Finding]]:
    """The runtime section and its findings (in the order of ``AGGREGATORS``, then the lost records, then the
    failed command)."""
    aggregators = [aggregator(mapper) for aggregator in AGGREGATORS]
    handlers: dict[type, list[Callable[[Any, Optional[int]], None]]] = defaultdict(list)
    for aggregator in aggregators:
        for event_type, method in aggregator.EVENTS.items():
            handlers[event_type].append(getattr(aggregator, method))
    for process in processes:
        for aggregator in aggregators:
            aggregator.start_process(process.summary)  # its step clock, its summary's counts
        for event in process.events:
            for handler in handlers.get(type(event), ()):
                handler(event, process.rank)

    failures = process_failures(processes, status, mapper)
    failed = command_failed_finding(status, failures)
    findings = [*(f for aggregator in aggregators for f in aggregator.findings()), *lost_records_findings(lost),
                *([failed] if failed else [])]
    parts: dict[str, Any] = {}
    for aggregator in aggregators:
        values = aggregator.section()
        if len(values) != len(aggregator.SECTION):
            raise ValueError(f"{type(aggregator).__name__}: section() gives {len(values)} value(s) for "
                             f"{aggregator.SECTION}")
        parts.update(zip(aggregator.SECTION, values))
    mode = next((p.mode for p in processes if p.mode != "real"), "real")  # what the process lines say
    section = RuntimeSection(status=status, processes=tuple(ProcessEntry.of(p) for p in processes), parts=parts,
                             failures=tuple(failures), mode=mode, lost_records=tuple(lost))
    return section, findings
