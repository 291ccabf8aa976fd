"""Phases end to end (issue 21 item 7): `neuron-port check --output-format json` on three fixtures, through
the real CLI, one run each. Training, evaluation and generation are told apart and judged on their own
clocks: a KV-cache decode after training is NP902 in the generation, not one late step of training; NP910
only for a smaller batch that a DataLoader yielded, with advice that fits the loader's phase."""

from __future__ import annotations

import json
import shutil

import jsonschema
import pytest

from conftest import FIXTURES, run_cli

pytestmark = pytest.mark.slow


def _check(tmp_path_factory, schema, fixture: str, *command: str, text: list | None = None) -> dict:
    """One check run: the JSON report (--output), and the text report printed beside it into ``text``."""
    root = tmp_path_factory.mktemp(fixture)
    project, report = root / fixture, root / "report.json"
    shutil.copytree(FIXTURES / fixture, project)
    result = run_cli("check", str(project), "-o", str(report), "--", "python", *command, env={"COLUMNS": "220"})
    assert report.is_file(), result.stderr
    doc = json.loads(report.read_text())
    jsonschema.validate(doc, schema)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    if text is not None:
        text.append(result.stdout)
    return doc


@pytest.fixture(scope="module")
def generate_text() -> list:
    return []


@pytest.fixture(scope="module")
def generate_run(tmp_path_factory, report_schema, generate_text):
    return _check(tmp_path_factory, report_schema, "train_then_generate", "train.py", text=generate_text)


@pytest.fixture(scope="module")
def evaluate_run(tmp_path_factory, report_schema):
    return _check(tmp_path_factory, report_schema, "train_then_evaluate", "train.py")


@pytest.fixture(scope="module")
def bptt_run(tmp_path_factory, report_schema):
    return _check(tmp_path_factory, report_schema, "bptt_language_model", "train.py")


def findings(doc: dict, code: str) -> list[dict]:
    return [f for f in doc["findings"] if f["code"] == code]


def test_training_and_a_generation_after_it_are_two_phases(generate_run):
    shapes = generate_run["runtime"]["shapes"]
    kinds = [(p["kind"], p["start_step"], p["end_step"]) for p in shapes["phases"]]
    assert kinds == [("training", 0, 8), ("generation", 8, 8)]
    generation = shapes["phases"][1]
    assert generation["calls"] == 25 and generation["grad"] is False and generation["loader"] is False
    assert shapes["last_phase"] == "generation after optimizer step 8" and shapes["last_step"] == 24


def test_a_kv_cache_decode_after_training_is_np902_in_the_generation(generate_run):
    reported = {(f["path"], f["line"]) for f in findings(generate_run, "NP902")}
    # not training's optimizer.step(): the default (foreach) AdamW's bias corrections are runtime inputs on
    # TorchNeuron (one signature; docs/sources/scalar-arguments.md)
    assert reported == {("model.py", 22), ("model.py", 26), ("model.py", 30), ("model.py", 56)}
    [cache] = [f for f in findings(generate_run, "NP902") if f["line"] == 22]
    assert "after warm-up in the generation after optimizer step 8, at steps 2, 3, 4," in cache["message"]
    assert "dim 2 of arg 0[0] (f32[2,4,*,8])" in cache["message"]
    entry = next(v for v in generate_run["runtime"]["shape_variance"] if v["site"]["line"] == 22)
    assert entry["phase"] == "generation" and entry["late_steps"] == list(range(2, 25))
    # training compiles nothing new after warm-up (AdamW's changing bias corrections keep one signature)
    late_training = {(e["site"]["path"], e["site"]["line"]) for e in generate_run["runtime"]["eager_compiles"]
                     for s in e["first_seen"] if s["phase"] == "training" and s["step"] >= 2}
    assert late_training == set()


def test_the_text_report_names_the_phases(generate_run, generate_text):
    [text] = generate_text
    assert ("after warm-up (steps 0-1 of each phase: training (optimizer steps 0-8); generation after optimizer "
            "step 8 (25 call(s)), last new one at step 24 of the generation after optimizer step 8)") in text
    rows = [line for line in text.splitlines() if "model.py:22" in line and "│" in line]
    assert rows and "generation after optimizer step 8" in rows[0]


def test_a_generation_prompt_is_not_an_uneven_last_batch(generate_run):
    assert findings(generate_run, "NP910") == []  # main said "5 instead of 32 ... use drop_last=True"


def test_an_evaluation_loaders_last_batch_is_np910_in_the_evaluation(evaluate_run):
    assert findings(evaluate_run, "NP902") == []
    [finding] = findings(evaluate_run, "NP910")  # main: none (the evaluation was one late training step)
    assert (finding["path"], finding["line"]) == ("train.py", 54)  # logits = model(images), in evaluate()
    assert finding["message"].startswith(
        "the last batch of the DataLoader iterated at train.py:52 is smaller (48 instead of 64, first at step 3 in "
        "the evaluation after optimizer step 6)")
    assert "pad it to 64 and mask the padded rows in the metric" in finding["message"]
    [entry, *_] = [v for v in evaluate_run["runtime"]["shape_variance"] if v["kind"] == "uneven_last_batch"]
    assert entry["phase"] == "evaluation" and entry["loader"]["batch_size"] == 64 and entry["loader"]["size"] == 48
    assert entry["loader"]["site"]["line"] == 52
    shapes = evaluate_run["runtime"]["shapes"]
    assert [p["kind"] for p in shapes["phases"]] == ["training", "evaluation"]
    assert shapes["phases"][1]["loader"] is True and shapes["phases"][1]["label"] == "evaluation after optimizer step 6"


def test_a_ragged_bptt_chunk_without_a_dataloader_is_no_np910(bptt_run):
    assert findings(bptt_run, "NP910") == [] and findings(bptt_run, "NP902") == []  # main: NP910, drop_last
    shapes = bptt_run["runtime"]["shapes"]
    assert [p["kind"] for p in shapes["phases"]] == ["training"]
    assert shapes["after_warmup"] > 0  # the shorter last chunk still compiles once: counted, not a finding
