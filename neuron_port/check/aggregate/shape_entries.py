"""The entries of the report's shape part (``runtime.eager_compiles``, ``runtime.shapes``,
``runtime.shape_variance``): what ``shapes.py`` computes, as typed values with their JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from neuron_port.check.aggregate.phases import Phase, Slot
from neuron_port.check.aggregate.shape_timeline import DimTimeline, PartialBatch
from neuron_port.check.sites import UserSite, site_json

MAX_MODULES = 12  # module paths listed per entry


@dataclass(frozen=True)
class LoaderBatch:
    """A DataLoader that yielded a batch smaller than its batch_size, at ``site`` (the line that drew it)."""

    site: Optional[UserSite]
    batch_size: int
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"site": site_json(self.site), "batch_size": self.batch_size, "size": self.size}


@dataclass(frozen=True)
class StepCount:
    step: int
    signatures: int
    slot: Optional[Slot] = None  # the phase whose clock the step is on (None: the process's only clock)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "signatures": self.signatures, **(self.slot.to_json() if self.slot else {})}


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
    slot: Optional[Slot] = None  # the phase judged (late_steps are on its clock)
    loader: Optional[LoaderBatch] = None  # uneven_last_batch: the DataLoader that yielded the smaller batch

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "site": site_json(self.site), "kind": self.kind, "modules": list(self.modules),
                **(self.slot.to_json() if self.slot else {}),
                **({"loader": self.loader.to_json()} if self.loader else {}),
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
    last_phase: Optional[str] = None  # the phase of last_step ("training", "generation after optimizer step 6")
    phases: tuple[Phase, ...] = ()  # the phases in which new signatures appeared (rank 0's, else the first's)

    def to_json(self) -> dict[str, Any]:
        return {"clock": self.clock, "warmup_steps": self.warmup_steps, "last_step": self.last_step,
                "last_phase": self.last_phase, "first_run_compiles": self.first_run_compiles,
                "after_warmup": self.after_warmup, "varying_sites": self.varying_sites,
                "uneven_batch_sites": self.uneven_batch_sites, "phases": [p.to_json() for p in self.phases]}
