"""Steady-state shapes end to end: `neuron-port check --output-format json` on the fixtures, through the
real CLI. Warm-up compiles (layers sharing a line, zero_grad, backward(), init loops) are no NP902;
shapes that keep changing after warm-up are, at their lines; an uneven last batch is NP910."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from conftest import FIXTURES

pytestmark = pytest.mark.slow


def check(cli, schema, tmp_path: Path, fixture: str, *command: str, preview: bool = False) -> dict:
    project = tmp_path / fixture
    shutil.copytree(FIXTURES / fixture, project)
    result = cli("check", str(project), "--output-format", "json", *(["--preview"] if preview else []),
                 "--", "python", *command)
    assert result.stdout, result.stderr
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, schema)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    return doc


def lines(doc: dict, code: str) -> set[tuple[str, int]]:
    return {(f["path"], f["line"]) for f in doc["findings"] if f["code"] == code}


def test_a_static_resnet_has_no_shape_findings(tmp_path, cli, report_schema):
    doc = check(cli, report_schema, tmp_path, "resnet_static", "train.py", "--steps", "5")
    runtime = doc["runtime"]
    assert lines(doc, "NP902") == set() and lines(doc, "NP910") == set()
    assert runtime["shape_variance"] == []
    shapes = runtime["shapes"]
    assert shapes["clock"] == "optimizer" and shapes["warmup_steps"] == 2
    assert shapes["first_run_compiles"] == runtime["ops"]["unique_signatures"] > 20
    assert shapes["after_warmup"] == 0 and shapes["last_step"] == 1
    # the lines that run many shapes are there, all first seen in warm-up, with the layers named
    by_line = {(e["op"], e["site"]["path"], e["site"]["line"]): e for e in runtime["eager_compiles"] if e["site"]}
    residual = by_line[("aten::add.Tensor", "model.py", 24)]
    assert residual["unique_signatures"] == 3 and residual["first_seen"] == [
        {"step": 0, "signatures": 3, "phase": "training", "phase_number": None, "phase_label": "training"}]
    assert residual["modules"] == ["stages.0", "stages.2", "stages.4"]
    zero = by_line[("aten::zero_", "train.py", 38)]  # zero_grad(set_to_none=False): from the second step on
    assert [c["step"] for c in zero["first_seen"]] == [1] and zero["after_warmup"] == 0
    assert by_line[("aten::normal_", "model.py", 51)]["unique_signatures"] > 3  # the init loop, one per shape


def test_gpt_trainer_without_variable_length_has_no_np902_in_training(tmp_path, cli, report_schema):
    doc = check(cli, report_schema, tmp_path, "gpt_trainer", "train.py", "--steps", "6", preview=True)
    assert lines(doc, "NP910") == set()
    assert all(v["phase"] == "generation" for v in doc["runtime"]["shape_variance"])
    # generate() after training (eval(), no KV cache) runs the whole, growing context on every call: each of its
    # 16 calls compiles again, a generation phase of its own (main called it one late step of training)
    generation = [f for f in doc["findings"] if f["code"] == "NP902"]
    assert generation and all("in the generation after optimizer step 6, at steps 2, 3, 4" in f["message"]
                              for f in generation)
    shapes = doc["runtime"]["shapes"]
    assert shapes["last_phase"] == "generation after optimizer step 6" and shapes["last_step"] == 15


def test_gpt_trainer_variable_length_is_np902_at_the_sequence_lines(tmp_path, cli, report_schema):
    doc = check(cli, report_schema, tmp_path, "gpt_trainer", "train.py", "--steps", "6", "--variable-length",
                preview=True)
    reported = {(f["path"], f["line"]) for f in doc["findings"] if f["code"] == "NP902" and "generation" not in
                f["message"]}  # training's; generate() after it is judged in its own phase
    sequence_lines = {("model.py", n) for n in (42, 47, 51, 64, 77, 114, 115, 119, 122)} | {("train.py", 119)}
    assert reported == sequence_lines
    [attention] = [f for f in doc["findings"] if f["code"] == "NP902" and f["line"] == 47 and "generation" not in
                   f["message"]]
    assert "at steps 2: dim 2 of arg 0 (bf16[4,4,*,16]): 8 (step 0), 16 (step 1), 32 (step 2)" in \
        attention["message"]
    entry = next(v for v in doc["runtime"]["shape_variance"]
                 if v["site"]["line"] == 47 and "scaled_dot_product" in v["op"] and v["phase"] == "training")
    # step 6 was generate() after training (main counted it as a late training step)
    assert entry["kind"] == "varying" and entry["late_steps"] == [2]
    assert entry["varying"][0]["first_seen"][:3] == [{"step": 0, "values": [8]}, {"step": 1, "values": [16]},
                                                     {"step": 2, "values": [32]}]
    assert entry["suggested_buckets"] == [8, 16, 32]
    # steady lines of the same run: the optimizer step, zero_grad, the float64 running loss
    assert not reported & {("train.py", 123), ("train.py", 125), ("train.py", 126)}


def test_a_kv_cache_is_np902_at_the_cache_and_attention_lines(tmp_path, cli, report_schema):
    doc = check(cli, report_schema, tmp_path, "kv_cache_generation", "generate.py", "--new-tokens", "12")
    runtime = doc["runtime"]
    assert runtime["shapes"]["clock"] == "forward"
    assert lines(doc, "NP902") == {("model.py", 28), ("model.py", 31), ("model.py", 35)}
    [cat] = [f for f in doc["findings"] if f["code"] == "NP902" and f["line"] == 28]
    assert "dim 2 of arg 0[0] (f32[2,4,*,8])" in cat["message"] and "at steps 2, 3, 4," in cat["message"]
    cache = next(v for v in runtime["shape_variance"] if v["site"]["line"] == 28)
    assert cache["modules"] == ["blocks.0.attn"] and cache["late_steps"] == list(range(2, 13))
    assert all(len(s["values"]) == 1 for s in cache["varying"][0]["first_seen"])  # one new length per step


def test_an_uneven_last_batch_is_np910_at_the_first_line_that_ran_it(tmp_path, cli, report_schema):
    doc = check(cli, report_schema, tmp_path, "uneven_last_batch", "train.py")
    # no shape keeps changing; the default (foreach) AdamW's bias corrections are runtime inputs on
    # TorchNeuron (one signature: docs/sources/scalar-arguments.md), so no NP902 either
    assert lines(doc, "NP902") == set()
    assert not [v for v in doc["runtime"]["shape_variance"] if v["site"]["line"] == 54]
    [finding] = [f for f in doc["findings"] if f["code"] == "NP910"]
    assert (finding["path"], finding["line"], finding["severity"]) == ("train.py", 50, "info")
    assert finding["message"].startswith("the last batch of the DataLoader iterated at train.py:48 is smaller "
                                         "(4 instead of 16, first at step 6)")
    assert "and at 3 other line(s)" in finding["message"] and "drop_last=True" in finding["message"]
    uneven = [v for v in doc["runtime"]["shape_variance"] if v["kind"] == "uneven_last_batch"]
    assert {v["site"]["line"] for v in uneven} == {50, 51, 53, 56}
    assert {p["size"] for v in uneven for p in v["partial_batches"]} == {4}
    assert doc["runtime"]["shapes"]["uneven_batch_sites"] == 4

    dropped = check(cli, report_schema, tmp_path / "drop", "uneven_last_batch", "train.py", "--drop-last")
    assert lines(dropped, "NP910") == set() and lines(dropped, "NP902") == set()
