"""Events of the simulator's step clock about what a part of the run was (neuron_backend/EVENTS.md,
"Phases"): ``phase`` (a run of outermost module calls in one grad mode: its start and end) and
``data_loader`` (a DataLoader yielded a batch smaller than its ``batch_size``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from neuron_port.check.events.fields import EventFields, Site, site_field


@dataclass(frozen=True)
class PhaseEvent:
    KIND: ClassVar[str] = "phase"
    event: Optional[str] = None  # start | end
    phase: int = 0  # 0: before any outermost module call
    grad: Optional[bool] = None  # grad mode of its outermost calls (None: phase 0)
    training: Optional[bool] = None  # their module's training flag (None: phase 0)
    loader: Optional[bool] = None  # DataLoader batches fed its outermost calls
    module: Optional[str] = None  # the outermost module whose call began it
    optimizer_step: int = 0  # the step clock at its start (start) or end (end)
    forward: int = 0
    calls: int = 0  # calls of its outermost module called most, so far

    @classmethod
    def from_fields(cls, f: EventFields) -> PhaseEvent:
        return cls(event=f.text("event"), phase=f.integer("phase"), grad=f.flag("grad"), training=f.flag("training"),
                   loader=f.flag("loader"),
                   module=f.text("module"), optimizer_step=f.integer("optimizer_step"), forward=f.integer("forward"),
                   calls=f.integer("calls"))


@dataclass(frozen=True)
class DataLoaderEvent:
    KIND: ClassVar[str] = "data_loader"
    event: Optional[str] = None  # partial_batch
    batch_size: int = 0
    size: int = 0  # the smaller batch's first dimension
    drop_last: Optional[bool] = None
    optimizer_step: int = 0
    forward: int = 0
    phase: int = 0
    site: Optional[Site] = None  # the line that drew the batch (the `for ... in loader` line)

    @classmethod
    def from_fields(cls, f: EventFields) -> DataLoaderEvent:
        return cls(event=f.text("event"), batch_size=f.integer("batch_size"), size=f.integer("size"),
                   drop_last=f.flag("drop_last"), optimizer_step=f.integer("optimizer_step"),
                   forward=f.integer("forward"), phase=f.integer("phase"), site=site_field(f))
