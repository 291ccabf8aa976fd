"""Eager NEFF compiles that recur in the steady state, per step: the signatures of NP902's scalar message
(a number argument that TorchNeuron compiles in by value and that keeps changing: ``alpha=-lr`` of
``torch.optim.SGD``'s ``_foreach_add_`` under a scheduler; ``shape_timeline.classify``'s ``scalar`` kind),
first seen in the training steps after warm-up, over the steady steps. A scheduled lr never repeats, so
on a cold or a warm cache alike each step compiles again: a steady step pays them, however long the job.
Numbers TorchNeuron lifts to tensor inputs (most: ``lr`` of a fused AdamW, a foreach Adam's bias
corrections) never make a new signature (docs/sources/scalar-arguments.md).
Shapes that keep changing (``varying``) stay the first run's: their values are bounded (a maximum length,
a maximum box count) and the cache serves each one once seen; one-off late signatures (an uneven last
batch, a phase after training) too.

Also where the eager ops of a step come from (``eager_sites``): the lines that issued the most eager op
calls, for the estimate's next step when part of the step is compiled (the eager ops are then the
optimizer's, the loss's, the metrics': not the model's)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Optional

from neuron_port.check.aggregate.phases import phases_of
from neuron_port.check.aggregate.shape_timeline import WARMUP_STEPS, TimedSignature, classify
from neuron_port.check.events import EagerCompileEvent, ProcessEvents

__all__ = ["steady_compiles_per_step"]

RECURRING = ("scalar",)


def steady_compiles_per_step(process: ProcessEvents) -> float:
    """The recurring eager compiles of ``process`` in a mean steady training step (0 without steady
    steps or without an optimizer clock)."""
    timing = phases_of(process)
    measured = timing.final_steps
    if measured <= WARMUP_STEPS:
        return 0.0
    groups: dict[tuple, dict[str, TimedSignature]] = defaultdict(dict)
    for event in process.events:
        if not isinstance(event, EagerCompileEvent) or event.first_seen is None:
            continue
        slot, step = timing.slot(event.first_seen)
        if not slot.is_training:
            continue
        site = event.site
        key = (event.op, site.file if site else None, site.line if site else None, site.module if site else None)
        text = json.dumps(list(event.signature))
        known: Optional[TimedSignature] = groups[key].get(text)
        if known is None or step < known.step:
            groups[key][text] = TimedSignature(tuple(event.signature), event.calls, step)
    late = 0
    for sigs in groups.values():
        shapes = classify(list(sigs.values()), measured)
        if shapes is not None and shapes.kind in RECURRING:
            late += sum(1 for s in sigs.values() if WARMUP_STEPS <= s.step < measured)
    return late / (measured - WARMUP_STEPS)
