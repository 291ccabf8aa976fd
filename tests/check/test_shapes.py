"""The steady-state shape analysis (NP902, NP910) on hand-written eager_compile events: what is
warm-up, what keeps changing after it, what is an uneven last batch. No simulator needed."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from neuron_port.check.aggregate.shape_timeline import (
    WARMUP_STEPS,
    TimedSignature,
    classify,
    parse_signature,
    position_pattern,
    split_list,
)
from neuron_port.check.aggregate.shapes import ShapeAggregator
from neuron_port.check.events import (
    DataLoaderEvent,
    EagerCompileEvent,
    EagerCompileTruncatedEvent,
    FirstSeen,
    FirstSeenCount,
    Site,
    SummaryEvent,
)
from neuron_port.check.sites import SiteMapper


class Run:
    """One process's eager_compile events, written in the order the simulator saw them."""

    def __init__(self, root: Path, optimizer_steps: int = 0, forwards: int = 0) -> None:
        self.root = root
        self.summary = SummaryEvent(optimizer_steps=optimizer_steps, forwards=forwards)
        self.events: list = []
        self.seq = 0

    def sig(self, op: str, signature: tuple, line: int, step: int = 0, forward: int = 0,
            module: Optional[str] = None, calls: int = 1, file: str = "train.py") -> None:
        site = Site(file=str(self.root / file), line=line, function="f", code=f"line {line}", module=module)
        self.events.append(EagerCompileEvent(op, signature, calls, calls - 1, site,
                                             FirstSeen(step, forward, self.seq)))
        self.seq += 1

    def loader(self, batch_size: int, size: int, line: int = 48, step: int = 0, file: str = "train.py") -> None:
        """A DataLoader iterated at ``line`` yielded a batch of ``size`` instead of ``batch_size``."""
        site = Site(file=str(self.root / file), line=line, function="<module>", code="for x, y in loader:")
        self.events.append(DataLoaderEvent("partial_batch", batch_size, size, False, step, 0, 1, site))


def aggregate(root: Path, *runs: Run) -> ShapeAggregator:
    shapes = ShapeAggregator(SiteMapper(root))
    for rank, run in enumerate(runs):
        shapes.start_process(run.summary)
        handler = {EagerCompileTruncatedEvent: shapes.add_truncated, DataLoaderEvent: shapes.add_loader}
        for event in run.events:
            handler.get(type(event), shapes.add)(event, rank)
    return shapes


def codes(shapes: ShapeAggregator) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in shapes.findings()]


def training_step(run: Run, step: int, T: int = 32, B: int = 16, widths=(64, 128, 256)) -> None:
    """What one training step of a small model writes: layers of several widths at one line (an
    nn.Sequential call), the loss, backward ops at the backward() line, the optimizer."""
    for i, width in enumerate(widths):
        run.sig("aten::addmm", (f"f32[{width}]", f"f32[{B * T},64]", f"f32[64,{width}]nc", 1, 1), 10, step,
                module=str(i))
    run.sig("aten::_log_softmax", (f"f32[{B * T},256]", 1, "False"), 11, step)
    for width in widths:
        run.sig("aten::mm", (f"f32[{B * T},{width}]", f"f32[{width},64]"), 12, step)
    run.sig("aten::_foreach_add_.List", ("[f32[64,64], f32[64]]", "[f32[64,64], f32[64]]", "-0.1"), 13, step)
    if step == 1:  # zero_grad(set_to_none=False) and accumulation into .grad appear in the second step
        for width in widths:
            run.sig("aten::zero_", (f"f32[{width},64]",), 14, step)
            run.sig("aten::add_.Tensor", (f"f32[{width},64]", f"f32[{width},64]", 1), 12, step)


def test_layers_sharing_a_line_and_warm_up_ops_are_not_shape_variance(tmp_path):
    # the old analysis reported every line here: 3 widths at one line, 3 shapes at backward(), zero_grad
    run = Run(tmp_path, optimizer_steps=10)
    for step in range(2):
        training_step(run, step)  # steps 2-9 are all cache hits: nothing new is written
    shapes = aggregate(tmp_path, run)
    assert shapes.findings() == [] and shapes.shape_variance() == []
    summary = shapes.summary()
    assert (summary.clock, summary.first_run_compiles, summary.after_warmup, summary.last_step) == (
        "optimizer", 3 + 1 + 3 + 1 + 6, 0, 1)
    [mm] = [e for e in shapes.entries() if e.op == "aten::mm"]
    [accumulate] = [e for e in shapes.entries() if e.op == "aten::add_.Tensor"]
    assert [(c.step, c.signatures) for c in mm.first_seen] == [(0, 3)]
    assert [(c.step, c.signatures) for c in accumulate.first_seen] == [(1, 3)] and accumulate.after_warmup == 0
    [addmm] = [e for e in shapes.entries() if e.op == "aten::addmm"]
    assert addmm.modules == ("0", "1", "2")


def test_a_sequence_length_that_keeps_changing_is_np902_with_its_dimension_and_steps(tmp_path):
    run = Run(tmp_path, optimizer_steps=6)
    lengths = [8, 16, 32, 8, 16, 40]  # new lengths at steps 0, 1, 2 and 5
    for step, T in enumerate(lengths):
        run.sig("aten::bmm", (f"f32[4,{T},16]", f"f32[4,16,{T}]"), 47, step, module="blocks.0.attn")
        run.sig("aten::bmm", (f"f32[4,{T},16]", f"f32[4,16,{T}]"), 47, step, module="blocks.1.attn")
        run.sig("aten::mul.Tensor", ("f32[64,64]", "f32[64,64]"), 60, step)  # steady
    shapes = aggregate(tmp_path, run)
    assert codes(shapes) == [("NP902", 47)]
    [variance] = shapes.shape_variance()
    assert (variance.kind, variance.late_steps, variance.signatures, variance.after_warmup) == (
        "varying", (2, 5), 4, 4)  # 2 modules x 2 late signatures (a signature is deduplicated per line)
    assert variance.modules == ("blocks.0.attn", "blocks.1.attn")
    dim = variance.varying[0]
    assert (dim.label, dim.pattern, dim.values, dim.late_steps) == ("dim 1 of arg 0", "f32[4,*,16]", (8, 16, 32, 40),
                                                                     (2, 5))
    assert variance.suggested_buckets == (8, 16, 32, 64)
    json = variance.to_json()
    assert json["varying"][0]["first_seen"] == [{"step": 0, "values": [8]}, {"step": 1, "values": [16]},
                                                {"step": 2, "values": [32]}, {"step": 5, "values": [40]}]
    assert json["late_steps"] == [2, 5] and json["kind"] == "varying"
    [finding] = shapes.findings()
    assert finding.severity == "warning" and finding.path == "train.py"
    assert finding.message == (
        "`aten::bmm` kept getting new shapes after warm-up, at steps 2, 5: dim 1 of arg 0 (f32[4,*,16]): "
        "8 (step 0), 16 (step 1), 32 (step 2), 40 (step 5); 4 eager NEFF compiles here, 4 after warm-up; "
        "pad to buckets [8, 16, 32, 64]")
    assert shapes.summary().varying_sites == 1


def test_one_late_new_length_is_enough_when_the_length_changed_during_warm_up(tmp_path):
    run = Run(tmp_path, optimizer_steps=6)
    for step, T in enumerate([8, 16, 32, 8, 16, 32]):  # the gpt_trainer fixture's --variable-length cycle
        run.sig("aten::add.Tensor", (f"f32[4,{T},64]", f"f32[4,{T},64]", 1), 77, step)
    assert codes(aggregate(tmp_path, run)) == [("NP902", 77)]
    steady = Run(tmp_path, optimizer_steps=6)
    for step, T in enumerate([32, 32, 64, 32, 64, 32]):  # one new length after warm-up, none during it
        steady.sig("aten::add.Tensor", (f"f32[4,{T},64]", f"f32[4,{T},64]", 1), 77, step)
    assert codes(aggregate(tmp_path, steady)) == []


def test_a_one_off_phase_after_training_is_counted_but_not_reported(tmp_path):
    # generation after training: batch 1 and 16 growing lengths, all at the step after the last one
    run = Run(tmp_path, optimizer_steps=6)
    for step in range(2):
        run.sig("aten::addmm", ("f32[192]", "f32[128,64]", "f32[64,192]nc", 1, 1), 42, step if step == 0 else 0)
    for T in range(5, 21):
        run.sig("aten::addmm", ("f32[192]", f"f32[{T},64]", "f32[64,192]nc", 1, 1), 42, 6)
        run.sig("aten::cat", (f"[i64[1,{T}], i64[1,1]]", 1), 138, 6)
    shapes = aggregate(tmp_path, run)
    assert shapes.findings() == []
    assert shapes.summary().after_warmup == 32 and shapes.summary().last_step == 6


def test_an_uneven_last_batch_is_np910_at_the_first_line_that_ran_it(tmp_path):
    run = Run(tmp_path, optimizer_steps=14)  # 2 epochs of 7 batches: 6 of 16 rows, then one of 4
    for step, B in ((0, 16), (6, 4)):
        run.sig("aten::addmm", ("f32[32]", f"f32[{B},20]", "f32[20,32]nc", 1, 1), 30, step, module="0")
        run.sig("aten::relu", (f"f32[{B},32]",), 30, step, module="1")
        run.sig("aten::_log_softmax", (f"f32[{B},3]", 1, "False"), 31, step)
        run.sig("aten::nll_loss_forward", (f"f32[{B},3]", f"i64[{B}]", "None", 1, -100), 31, step)
        run.sig("aten::mm", (f"f32[32,{B}]nc", f"f32[{B},20]"), 32, step)
        run.sig("aten::sum.dim_IntList", (f"f32[{B},32]", "[0]", "True", "None"), 32, step)
    assert aggregate(tmp_path, run).findings() == []  # smaller inputs that no DataLoader yielded: no NP910
    run.loader(16, 4, line=28, step=6)
    shapes = aggregate(tmp_path, run)
    [finding] = shapes.findings()
    assert (finding.code, finding.line, finding.severity) == ("NP910", 30, "info")
    assert finding.message == (
        "the last batch of the DataLoader iterated at train.py:28 is smaller (4 instead of 16, first at step 6): "
        "2 more eager NEFF compile(s) here and at 2 other line(s); use `drop_last=True` in that DataLoader, or pad "
        "the last batch")
    kinds = {(v.op, v.kind) for v in shapes.shape_variance()}
    assert ("aten::mm", "uneven_last_batch") in kinds and len(kinds) == 6
    [mm] = [v for v in shapes.shape_variance() if v.op == "aten::mm"]
    assert [p.to_json() for p in mm.partial_batches] == [{"step": 6, "normal": 16, "size": 4}]
    assert mm.suggested_buckets == (16,)
    assert shapes.summary().uneven_batch_sites == 3 and shapes.summary().varying_sites == 0


def test_a_flattened_batch_shrinks_by_the_same_factor(tmp_path):
    run = Run(tmp_path, optimizer_steps=8)
    for step, B in ((0, 16), (5, 4)):  # [B, T] and [B*T] in one op: 16 -> 4 and 512 -> 128
        run.sig("aten::nll_loss_forward", (f"f32[{B * 32},256]", f"i64[{B * 32}]", "None", 1, -100), 9, step)
        run.sig("aten::embedding", ("f32[256,64]", f"i64[{B},32]", -1, "False", "False"), 9, step)
    run.loader(16, 4, step=5)
    assert codes(aggregate(tmp_path, run)) == [("NP910", 9)]


def test_train_and_eval_loaders_with_uneven_batches_and_another_eval_batch_size(tmp_path):
    run = Run(tmp_path, optimizer_steps=20)
    run.sig("aten::addmm", ("f32[8]", "f32[32,20]", "f32[20,8]nc", 1, 1), 30, 0)
    run.sig("aten::addmm", ("f32[8]", "f32[4,20]", "f32[20,8]nc", 1, 1), 30, 9)  # last training batch
    run.sig("aten::addmm", ("f32[8]", "f32[64,20]", "f32[20,8]nc", 1, 1), 10 and 30, 10)  # eval batch size
    run.sig("aten::addmm", ("f32[8]", "f32[10,20]", "f32[20,8]nc", 1, 1), 30, 10)  # last eval batch
    run.loader(32, 4, step=9)
    run.loader(64, 10, line=60, step=10)
    shapes = aggregate(tmp_path, run)
    assert codes(shapes) == [("NP910", 30)]
    assert "4 instead of 32, first at step 9" in shapes.findings()[0].message


def test_smaller_batches_at_many_steps_are_a_varying_batch_size(tmp_path):
    run = Run(tmp_path, optimizer_steps=10)
    for step, B in enumerate([32, 31, 32, 28, 30, 25, 32, 27]):  # e.g. a sampler that packs by length
        run.sig("aten::addmm", ("f32[8]", f"f32[{B},20]", "f32[20,8]nc", 1, 1), 30, step)
    shapes = aggregate(tmp_path, run)
    assert codes(shapes) == [("NP902", 30)]
    assert shapes.shape_variance()[0].varying[0].label == "dim 0 of arg 1"


def test_different_shrink_factors_at_one_step_are_not_a_partial_batch(tmp_path):
    run = Run(tmp_path, optimizer_steps=6)
    run.sig("aten::arange.start_out", (0, 32, 1), 114, 0)
    for T in (5, 6, 7):  # three shorter lengths at one step: a new phase, not a smaller batch
        run.sig("aten::arange.start_out", (0, T, 1), 114, 6)
    assert codes(aggregate(tmp_path, run)) == []


def test_a_kv_cache_growing_every_forward_is_np902_without_an_optimizer(tmp_path):
    run = Run(tmp_path, forwards=25)  # a generation loop: one call of the model per token
    for forward in range(1, 26):
        T = 6 + forward - 1
        q = "f32[1,4,6,8]" if forward == 1 else "f32[1,4,1,8]"
        new = "f32[1,4,6,8]" if forward == 1 else "f32[1,4,1,8]"
        if forward > 1:
            run.sig("aten::cat", (f"[f32[1,4,{T - 1},8], {new}]", 2), 21, forward=forward, module="blocks.0.attn")
        run.sig("aten::matmul", (q, f"f32[1,4,8,{T}]nc"), 22, forward=forward, module="blocks.0.attn")
        run.sig("aten::argmax", ("f32[1,64]", -1, "False"), 40, forward=forward)  # steady
    shapes = aggregate(tmp_path, run)
    assert shapes.summary().clock == "forward"
    assert codes(shapes) == [("NP902", 21), ("NP902", 22)]
    cat = next(v for v in shapes.shape_variance() if v.op == "aten::cat")
    assert (cat.varying[0].label, cat.varying[0].pattern) == ("dim 2 of arg 0[0]", "f32[1,4,*,8]")
    assert cat.late_steps[:3] == (2, 3, 4)


def test_without_a_step_clock_the_kth_new_signature_at_a_line_is_step_k(tmp_path):
    run = Run(tmp_path)  # no optimizer, no module: a plain tensor loop
    for n in (8, 16, 32):
        run.sig("aten::mul.Tensor", (f"f32[2,{n}]", "f32[]"), 3)
    shapes = aggregate(tmp_path, run)
    assert shapes.summary().clock == "signatures"
    assert codes(shapes) == [("NP902", 3)]
    assert "dim 1 of arg 0" in shapes.findings()[0].message


def test_files_without_first_seen_use_the_file_order(tmp_path):
    shapes = ShapeAggregator(SiteMapper(tmp_path))
    site = Site(file=str(tmp_path / "old.py"), line=4, function="f", code="y = x * 2")
    for n in (8, 16, 32, 64):
        shapes.add(EagerCompileEvent("aten::mul.Tensor", (f"f32[{n}]", 2), 1, 0, site), None)
    assert codes(shapes) == [("NP902", 4)] and shapes.summary().clock == "signatures"


def test_ranks_merge_with_the_earliest_step(tmp_path):
    rank0, rank1 = Run(tmp_path, optimizer_steps=6), Run(tmp_path, optimizer_steps=6)
    for run in (rank0, rank1):
        for step, T in enumerate([8, 16]):
            run.sig("aten::bmm", (f"f32[4,{T},16]",), 47, step)
    rank0.sig("aten::bmm", ("f32[4,32,16]",), 47, 2)
    rank1.sig("aten::bmm", ("f32[4,32,16]",), 47, 4)  # the same signature, later on this rank
    rank1.sig("aten::bmm", ("f32[4,48,16]",), 47, 5)
    shapes = aggregate(tmp_path, rank0, rank1)
    [variance] = shapes.shape_variance()
    assert variance.late_steps == (2, 5) and variance.signatures == 4
    assert shapes.summary().after_warmup == 2


def test_omitted_signatures_count_after_warm_up(tmp_path):
    run = Run(tmp_path, optimizer_steps=300)
    run.sig("aten::add.Tensor", ("f32[4]", "f32[4]", 1), 5, 0)
    run.events.append(EagerCompileTruncatedEvent("aten::add.Tensor", omitted_signatures=5, omitted_calls=5,
                                                 first_seen=(FirstSeenCount(1, 0, 2), FirstSeenCount(250, 0, 3))))
    summary = aggregate(tmp_path, run).summary()
    assert (summary.first_run_compiles, summary.after_warmup) == (6, 3)


def test_signature_helpers():
    assert split_list("[f32[2,3], f32[4], [1, 2]]") == ["f32[2,3]", "f32[4]", "[1, 2]"]
    assert split_list("[]") == [] and split_list("f32[2]") is None
    parsed = parse_signature(["f32[4,8]nc", "[i64[2], 3]", 7, "1.5", None, "True"])
    assert parsed.values == {(0, None, 0): 4, (0, None, 1): 8, (1, 0, 0): 2, (1, 1, None): 3, (2, None, None): 7}
    # a float is a position of its own (a scalar that changes is judged over time), not structure
    assert parsed.structure[0] == ("t", "f32", 2, "nc") and parsed.structure[3] == ("f",)
    assert parsed.scalars == {(3, None, None): 1.5} and parsed.structure[5] == ("o", "True")
    assert position_pattern(["f32[4,8]nc"], (0, None, 1)) == "f32[4,*]"
    assert position_pattern(["[f32[1,4,5,8], f32[1,4,1,8]]"], (0, 0, 2)) == "f32[1,4,*,8]"
    assert position_pattern([3], (0, None, None)) is None
    assert WARMUP_STEPS == 2


@pytest.mark.parametrize("steps, kind", [
    ([0, 1], None),  # nothing after warm-up
    ([0, 0, 5], "other"),  # one new value once, after warm-up
    ([0, 3, 5], "varying"),
    ([0, 1, 2], "varying"),
])
def test_classify(steps, kind):
    sigs = [TimedSignature((f"f32[{8 * (i + 1)},4]",), 1, step) for i, step in enumerate(steps)]
    late = classify(sigs)
    assert (late.kind if late else None) == kind


def test_the_console_shows_the_steady_state_view(tmp_path):
    import json as _json

    from rich.console import Console

    from neuron_port.check.events import read_events
    from neuron_port.check.runner import RunStatus
    from neuron_port.check.runtime import build_runtime
    from neuron_port.report import Report
    from neuron_port.reporters.text.check import render_check

    events = tmp_path / "events"
    events.mkdir()
    site = {"file": str(tmp_path / "model.py"), "line": 47, "function": "forward", "code": "y = attn(q, k, v)",
            "module": "blocks.0.attn"}
    lines = [{"kind": "process", "schema": 1, "pid": 1, "status": "exited"}]
    for step, T in enumerate([8, 16, 32, 8, 40]):
        lines.append({"kind": "eager_compile", "op": "aten::bmm", "signature": [f"f32[4,{T},16]"], "calls": 1,
                      "cache_hits": 0, "site": site, "first_seen": {"optimizer_step": step, "forward": step + 1,
                                                                    "seq": step}})
    lines.append({"kind": "summary", "optimizer_steps": 5, "forwards": 5, "complete": True})
    (events / "neuron-events-norank-pid1.jsonl").write_text("".join(_json.dumps(x) + "\n" for x in lines))
    section, findings = build_runtime(read_events(events), RunStatus(command=["python", "t.py"], exit_code=0),
                                      SiteMapper(tmp_path))
    assert [(f.code, f.line) for f in findings] == [("NP902", 47)]
    console = Console(record=True, width=160)
    render_check(console, Report(command="check", target="neuron", runtime=section, runtime_findings=findings))
    text = console.export_text()
    assert "Eager NEFF compiles: 4 in the first run (then cached), 2 after warm-up" in text
    assert "f32[4,*,16]: 8@0 16@1 32@2 40@4" in text and "model.py:47" in text
