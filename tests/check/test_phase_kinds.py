"""Phases from hand-written events (neuron_port/check/aggregate/phases.py): what each phase is, the clock
a sighting is judged on, and the shape findings that follow. No simulator needed."""

from __future__ import annotations

from pathlib import Path

from neuron_port.check.aggregate.phases import ProcessPhases
from neuron_port.check.aggregate.shapes import ShapeAggregator
from neuron_port.check.events import EagerCompileEvent, FirstSeen, PhaseEvent, Site, SummaryEvent
from neuron_port.check.sites import SiteMapper


def phase(number, event, grad, training, o, f, calls=0, loader=False):
    return PhaseEvent(event, number, grad, training, loader, "Net", o, f, calls)


def seen(o, f, p, pf, seq=0):
    return FirstSeen(o, f, seq, p, pf)


def test_training_a_frozen_teacher_an_evaluation_and_a_generation():
    events = [phase(1, "start", True, True, 0, 1), phase(1, "end", True, True, 4, 4, calls=4),
              phase(2, "start", False, False, 4, 5, loader=True), phase(2, "end", False, False, 4, 12, calls=8,
                                                                        loader=True),
              phase(3, "start", False, False, 5, 13), phase(3, "end", False, False, 5, 13, calls=1),
              phase(4, "start", True, True, 5, 14), phase(4, "end", True, True, 9, 17, calls=4),
              phase(5, "start", False, False, 9, 18)]
    # the generation's later calls keep bringing new signatures (calls 13 and 14 of phase 5)
    firsts = [seen(0, 1, 1, 1), seen(4, 6, 2, 2), seen(5, 13, 3, 1), seen(9, 30, 5, 13), seen(9, 31, 5, 14)]
    phases = ProcessPhases(events, SummaryEvent(optimizer_steps=9, forwards=30), firsts, "optimizer")
    kinds = {n: p.kind for n, p in phases.phases.items()}
    assert kinds == {1: "training", 2: "evaluation", 3: "evaluation", 4: "training", 5: "generation"}
    assert phases.phases[2].label == "evaluation after optimizer step 4"
    # training on the optimizer clock; the evaluation on its own calls; a single no_grad call between two
    # training steps (a frozen teacher) belongs to its training step; the generation after training is its own
    assert [(s.kind, step) for s, step in map(phases.slot, firsts)] == [
        ("training", 0), ("evaluation", 1), ("training", 5), ("generation", 12), ("generation", 13)]
    assert phases.kind_of(firsts[2]) == "training" and phases.kind_of(firsts[3]) == "generation"
    assert list(phases.training_steps()) == list(range(9))


def test_a_no_grad_loop_without_a_dataloader_is_an_evaluation_unless_it_keeps_decoding():
    """An evaluation loop over batches the program holds (no DataLoader) runs its signatures in its first call
    (an uneven last batch adds one later call): an evaluation. A decoding loop brings new signatures call
    after call: a generation. (Both were "generation" before: no DataLoader.)"""
    events = [phase(1, "start", True, True, 0, 1), phase(1, "end", True, True, 4, 4, calls=4),
              phase(2, "start", False, False, 4, 5), phase(2, "end", False, False, 4, 12, calls=8),
              phase(3, "start", True, True, 4, 13), phase(3, "end", True, True, 8, 16, calls=4),
              phase(4, "start", False, False, 8, 17)]
    firsts = [seen(0, 1, 1, 1), seen(4, 5, 2, 1), seen(4, 12, 2, 8),  # the held-out batches, the last one smaller
              seen(8, 17, 4, 1), seen(8, 18, 4, 2), seen(8, 19, 4, 3)]  # decoding: a new length every call
    phases = ProcessPhases(events, SummaryEvent(optimizer_steps=8, forwards=30), firsts, "optimizer")
    assert {n: p.kind for n, p in phases.phases.items()} == {
        1: "training", 2: "evaluation", 3: "training", 4: "generation"}


def test_a_simulator_before_phases_keeps_its_clock():
    phases = ProcessPhases([], SummaryEvent(optimizer_steps=0, forwards=5), [FirstSeen(0, 3, 0)], "forward")
    slot, step = phases.slot(FirstSeen(0, 3, 0))
    assert (slot.kind, step, slot.named) == ("forward", 2, False)


def test_a_generation_after_training_is_judged_on_its_calls(tmp_path: Path):
    shapes = ShapeAggregator(SiteMapper(tmp_path))
    shapes.start_process(SummaryEvent(optimizer_steps=6, forwards=30))
    for event in (phase(1, "start", True, True, 0, 1), phase(1, "end", True, True, 6, 6, calls=6),
                  phase(2, "start", False, False, 6, 7)):
        shapes.add_phase(event, 0)
    site = Site(file=str(tmp_path / "model.py"), line=22, function="forward", code="k = torch.cat(...)")
    seq = 0
    for step in range(2):  # training: one cache-less length
        shapes.add(EagerCompileEvent("aten::cat", ("[f32[2,4,32,8]]", 2), 1, 0, site, seen(step, step + 1, 1,
                                                                                             step + 1, seq)), 0)
        seq += 1
    for call in range(1, 11):  # the generation: the cache grows one position per call
        shapes.add(EagerCompileEvent("aten::cat", (f"[f32[2,4,{4 + call},8], f32[2,4,1,8]]", 2), 1, 0, site,
                                     seen(6, 6 + call, 2, call, seq)), 0)
        seq += 1
    [finding] = shapes.findings()
    assert finding.code == "NP902" and "in the generation after optimizer step 6, at steps 2, 3" in finding.message
    [entry] = shapes.shape_variance()
    assert entry.slot is not None and entry.slot.kind == "generation" and entry.late_steps == tuple(range(2, 10))
    summary = shapes.summary()
    assert summary.last_phase == "generation after optimizer step 6" and summary.last_step == 9


def test_phases_of_a_process_as_read(tmp_path: Path):
    """What the estimate can use: the phases of a process straight from read_events' ProcessEvents."""
    from neuron_port.check.aggregate.phases import phases_of
    from neuron_port.check.events import ProcessEvents

    site = Site(file=str(tmp_path / "train.py"), line=3, function="f", code="y = model(x)")
    training, generation, more = seen(1, 2, 1, 2), seen(4, 9, 2, 3, seq=1), seen(4, 10, 2, 4, seq=2)
    process = ProcessEvents(path=tmp_path / "x.jsonl", events=(
        phase(1, "start", True, True, 0, 1), phase(1, "end", True, True, 4, 4, calls=4),
        phase(2, "start", False, False, 4, 5),
        EagerCompileEvent("aten::mm", ("f32[2,2]", "f32[2,2]"), 1, 0, site, training),
        EagerCompileEvent("aten::mm", ("f32[3,2]", "f32[2,2]"), 1, 0, site, generation),
        EagerCompileEvent("aten::mm", ("f32[4,2]", "f32[2,2]"), 1, 0, site, more)),
        summary=SummaryEvent(optimizer_steps=4, forwards=9))
    phases = phases_of(process)
    assert (phases.kind_of(training), phases.kind_of(generation)) == ("training", "generation")
    assert list(phases.training_steps()) == [0, 1, 2, 3] and phases.legacy_clock == "optimizer"
