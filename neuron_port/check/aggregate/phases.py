"""Phases of a process: which parts of the run were training steps, an evaluation or a generation, and
the clock each first sighting is judged on (neuron_backend/EVENTS.md, "Phases").

The simulator starts a new phase when an outermost module call runs in another mode (grad enabled,
``module.training``) than the calls before it, and describes every phase in which a new signature
appeared (``phase`` events: its start and end, the optimizer steps and the calls in it, whether
DataLoader batches fed it). Here each phase gets a kind:

- ``training``: optimizer steps completed during it. Judged on the optimizer clock (step k ends at the
  k-th ``optimizer.step()``), over all its phases together (an evaluation between two epochs does not
  restart training's clock).
- ``generation``: no optimizer step and no DataLoader batch during it, and new signatures first seen at two
  or more of its calls after the first (a sampling or decoding loop: its inputs keep changing as it decodes,
  a KV cache or the sequence grows).
- ``evaluation``: any other phase without an optimizer step (its calls took DataLoader batches, or ran the
  same signatures call after call: a loop over held-out batches under ``no_grad``).
- ``setup``: before the first outermost module call (building the model, moving data).

An evaluation or a generation is judged on its own clock: step k is its (k+1)-th outermost call, with its
own warm-up. One made of a single call inside training (a frozen teacher, a target network run under
``no_grad`` in every step) is part of the training step it runs in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

from neuron_port.check.events import (EagerCompileEvent, EagerCompileTruncatedEvent, FirstSeen, PhaseEvent,
                                      ProcessEvents, SummaryEvent)

__all__ = ["Phase", "Slot", "ProcessPhases", "phase_kind_order", "phases_of", "legacy_clock"]

KINDS = ("setup", "training", "evaluation", "generation")


def phase_kind_order(kind: str) -> int:
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


@dataclass(frozen=True)
class Phase:
    number: int
    kind: str  # setup | training | evaluation | generation
    start_step: int  # optimizer steps completed when it began
    end_step: int  # ... when it ended (or at the end of the process)
    calls: int  # outermost calls of its module called most
    grad: Optional[bool] = None
    training: Optional[bool] = None
    loader: bool = False
    module: Optional[str] = None

    @property
    def label(self) -> str:
        """``generation after optimizer step 6``, ``evaluation``, ``training``."""
        if self.kind in ("evaluation", "generation") and self.start_step > 0:
            return f"{self.kind} after optimizer step {self.start_step}"
        return self.kind

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.number, "kind": self.kind, "label": self.label, "start_step": self.start_step,
                "end_step": self.end_step, "calls": self.calls, "grad": self.grad, "training": self.training,
                "loader": self.loader, "module": self.module}


@dataclass(frozen=True)
class Slot:
    """The clock a sighting is judged on: training's optimizer clock, one evaluation or generation's own
    calls, or, for processes without phases, the clock of EVENTS.md "Steps" (``optimizer``, ``forward``,
    ``signatures``)."""

    kind: str  # training | evaluation | generation | setup | optimizer | forward | signatures
    phase: Optional[int] = None  # the phase of an evaluation or generation
    after_step: int = 0  # optimizer steps completed before it began (its place in time)
    label: Optional[str] = None

    def order(self, step: int) -> tuple[int, int, int, int]:
        """Time order of (slot, step): setup first; an evaluation after optimizer step k comes before training
        step k."""
        if self.kind == "setup":
            return (0, -1, 0, step)
        if self.phase is None:
            return (step, 1, 0, 0)
        return (self.after_step, 0, self.phase, step)

    @property
    def name(self) -> str:
        return self.label or self.kind

    @property
    def named(self) -> bool:
        """A phase of the run (not the clock of a simulator before phases)."""
        return self.kind in KINDS

    @property
    def is_training(self) -> bool:
        return self.kind in ("training", "optimizer")

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.kind, "phase_number": self.phase, "phase_label": self.name}


def legacy_clock(summary: Optional[SummaryEvent], firsts: list[FirstSeen]) -> str:
    """The one clock of a process as EVENTS.md "Steps" defines it: ``optimizer`` when an optimizer stepped,
    else ``forward`` when an outermost module ran, else ``signatures`` (also with no sighting at all)."""
    if not firsts:
        return "signatures"
    if (summary and summary.optimizer_steps) or any(f.optimizer_step for f in firsts):
        return "optimizer"
    if (summary and summary.forwards) or any(f.forward for f in firsts):
        return "forward"
    return "signatures"


def phases_of(process: ProcessEvents) -> ProcessPhases:
    """The phases of one process as ``read_events`` gives it (what the estimate uses to tell training
    steps from an evaluation or a generation: ``kind_of(first_seen)``, ``training_steps()``)."""
    compiles = [e for e in process.events if isinstance(e, EagerCompileEvent)]
    truncated = [e for e in process.events if isinstance(e, EagerCompileTruncatedEvent)]
    phases = [e for e in process.events if isinstance(e, PhaseEvent)]
    return ProcessPhases.of(process.summary, compiles, truncated, phases)


class ProcessPhases:
    """The phases of one process and the slot of each first sighting."""

    @classmethod
    def of(cls, summary: Optional[SummaryEvent], compiles: Iterable[EagerCompileEvent],
           truncated: Iterable[EagerCompileTruncatedEvent], events: Iterable[PhaseEvent]) -> "ProcessPhases":
        firsts = [e.first_seen for e in compiles if e.first_seen is not None]
        firsts += [FirstSeen(c.optimizer_step, c.forward, None, c.phase, c.phase_forward)
                   for t in truncated for c in t.first_seen]
        return cls(events, summary, firsts, legacy_clock(summary, firsts))

    def __init__(self, events: Iterable[PhaseEvent], summary: Optional[SummaryEvent],
                 firsts: Iterable[FirstSeen], legacy_clock: str) -> None:
        firsts = list(firsts)
        self.legacy_clock = legacy_clock  # the clock of a simulator before phases (EVENTS.md "Steps")
        starts: dict[int, PhaseEvent] = {}
        ends: dict[int, PhaseEvent] = {}
        for event in events:
            (ends if event.event == "end" else starts).setdefault(event.phase, event)
        numbers = sorted(set(starts) | set(ends) | {f.phase for f in firsts if f.phase is not None})
        self.has_phases = any(f.phase is not None for f in firsts)
        final_steps = summary.optimizer_steps if summary and summary.optimizer_steps is not None else max(
            (f.optimizer_step for f in firsts), default=0)
        self.final_steps = final_steps
        seen_calls: dict[int, int] = {}
        first_step: dict[int, int] = {}
        decoding: dict[int, set[int]] = {}  # the calls after a phase's first that brought new signatures
        for f in firsts:
            if f.phase is not None:
                if f.phase_forward > 1:
                    decoding.setdefault(f.phase, set()).add(f.phase_forward)
                seen_calls[f.phase] = max(seen_calls.get(f.phase, 0), f.phase_forward)
                first_step[f.phase] = min(first_step.get(f.phase, f.optimizer_step), f.optimizer_step)
        self.phases: dict[int, Phase] = {}
        next_start: dict[int, Optional[PhaseEvent]] = {}
        following: Optional[PhaseEvent] = None
        for number in reversed(numbers):  # the start of the next phase that has one (a bound for an end)
            next_start[number] = following
            following = starts.get(number, following)
        for number in numbers:
            start, end = starts.get(number), ends.get(number)
            later = next_start[number]
            begin = start.optimizer_step if start else first_step.get(number, 0)
            finish = end.optimizer_step if end else later.optimizer_step if later else final_steps
            info = end or start
            calls = max(end.calls if end else 0, start.calls if start else 0, seen_calls.get(number, 0))
            if number == 0:
                kind = "setup"
            elif finish > begin:
                kind = "training"
            else:
                loader = info is not None and info.loader
                kind = "generation" if not loader and len(decoding.get(number, ())) >= 2 else "evaluation"
            self.phases[number] = Phase(number, kind, begin, finish, calls, info.grad if info else None,
                                        info.training if info else None, bool(info and info.loader),
                                        info.module if info else None)
        self.has_training = any(p.kind == "training" for p in self.phases.values()) or final_steps > 0

    def slot(self, first: Optional[FirstSeen]) -> tuple[Slot, int]:
        """The clock this sighting is judged on and its step on it (``signatures`` slots: the caller
        numbers the k-th new signature of a line)."""
        if first is None:
            return Slot(self.legacy_clock), 0
        if first.phase is None or not self.has_phases:
            return self._legacy(first)
        phase = self.phases.get(first.phase)
        if phase is None or phase.kind in ("setup", "training") or self._inside_training(phase):
            if self.has_training:
                return Slot("training", label="training"), first.optimizer_step
            if phase is None or phase.kind == "setup":
                only_setup = all(p.kind == "setup" for p in self.phases.values())
                return (Slot("signatures"), 0) if only_setup else (Slot("setup", label="setup"), 0)
        assert phase is not None
        return (Slot(phase.kind, phase.number, phase.start_step, phase.label),
                max(first.phase_forward - 1, 0))

    def _inside_training(self, phase: Phase) -> bool:
        """One call under no_grad or eval() in the middle of training: part of its step."""
        return phase.calls <= 1 and phase.end_step < self.final_steps

    def _legacy(self, first: FirstSeen) -> tuple[Slot, int]:
        clock = self.legacy_clock
        if clock == "optimizer":
            return Slot("optimizer"), first.optimizer_step
        if clock == "forward":
            return Slot("forward"), max(first.forward - 1, 0)
        return Slot("signatures"), 0

    def training_steps(self) -> range:
        """The optimizer steps of the process (the estimate's steady steps are among them)."""
        return range(self.final_steps)

    def kind_of(self, first: Optional[FirstSeen]) -> str:
        """``training``, ``evaluation``, ``generation`` or ``setup`` for a sighting (what the estimate needs
        to count only training steps); ``training`` for a simulator before phases."""
        slot, _ = self.slot(first)
        return "training" if slot.is_training else slot.kind if slot.kind in KINDS else "training"

    def listed(self) -> list[Phase]:
        return [self.phases[n] for n in sorted(self.phases)]
