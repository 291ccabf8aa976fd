"""Per-step work from the training steps alone (issue 24, Build 5): a script that evaluates before training
and every 3 optimizer steps on batches of the training shape, and samples after it, runs through the real
CLI twice (eager, and again compiled), with and without the evaluation and the sampling. The simulator tells each signature's calls in
phases that were not training steps apart (EVENTS.md "Phases", ``outside_calls``), so the per-step work and
the tokens per step are the training steps' in both runs, and the rest is a labelled phase of its own."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from conftest import run_cli
from tests.conftest import simulator_env

SCRIPT = Path(__file__).resolve().parent / "phased" / "train.py"
BATCH, SEQ = 4, 32


def _check(tmp_path: Path, name: str, *args: str) -> dict:
    project = tmp_path / name
    project.mkdir()
    shutil.copy(SCRIPT, project / "train.py")
    report = project / "report.json"
    result = run_cli("check", str(project), "--tokens-per-step", "embedding@wte", "--exit-zero", "-o", str(report),
                     "--", "python", "train.py", "--batch", str(BATCH), "--seq", str(SEQ), *args,
                     cwd=project, env=simulator_env())
    assert report.exists(), result.stdout[-2000:] + result.stderr[-3000:]
    return json.loads(report.read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory, sim_build) -> tuple[dict, dict]:
    root = tmp_path_factory.mktemp("phases")
    return _check(root, "with_eval"), _check(root, "train_only", "--eval-every", "0", "--new-tokens", "0")


def _per_step(section: dict, family: str | None = None) -> tuple[float, float]:
    items = [i for i in section["work"]["work"] if family is None or i["family"] == family]
    return sum(i["flops"] for i in items), sum(i["bytes"] for i in items)


def test_tokens_per_step_are_the_training_embeddings_input(runs):
    with_eval, train_only = (r["estimate"]["steps"] for r in runs)
    assert with_eval["tokens_per_step"] == train_only["tokens_per_step"] == BATCH * SEQ


def test_the_per_step_work_is_the_training_steps_alone(runs):
    """The same FLOPs and bytes per step whether or not the script evaluates and samples (before this, the
    evaluation's calls of the training's shapes were counted into the step)."""
    with_eval, train_only = (r["estimate"] for r in runs)
    flops, nbytes = _per_step(with_eval)
    assert flops == pytest.approx(_per_step(train_only)[0], rel=1e-9)
    assert nbytes == pytest.approx(_per_step(train_only)[1], rel=1e-9)
    for device in ("trn2-chip", "h100-sxm"):
        rows = [next(r for r in e["per_device"] if r["device"] == device) for e in (with_eval, train_only)]
        assert rows[0]["device_seconds"] == pytest.approx(rows[1]["device_seconds"], rel=0.02)


def test_evaluation_and_generation_are_labelled_phases_of_their_own(runs, report_schema):
    with_eval, train_only = runs
    jsonschema.validate(with_eval, report_schema)
    phases = {p["kind"]: p for p in with_eval["estimate"]["work"]["outside_phases"]}
    assert {"evaluation", "generation"} <= set(phases)
    # the evaluation ran twice (before steps 0 and 3 of 6) over 4 batches of the training shape through the
    # same model: 8 forwards, each a third of a training step's matmul FLOPs (forward + backward: 1 + 2);
    # with the attention and the rest, less than half a step's FLOPs each
    step_matmul, _ = _per_step(with_eval["estimate"], "matmul")
    step_flops, _ = _per_step(with_eval["estimate"])
    assert 8 * step_matmul / 3 <= phases["evaluation"]["flops"] <= 8 * step_flops / 2
    assert not [p for p in train_only["estimate"]["work"]["outside_phases"] if p["kind"] != "setup"]


def test_a_frozen_teachers_one_call_a_step_is_part_of_the_step(tmp_path, sim_build, runs):
    """A phase of one no_grad call after which training goes on (aggregate/phases.py: part of the step it
    runs in): the teacher, a copy of the student's shape, adds one forward's FLOPs to every step, the third
    of a training step's matmul FLOPs, and makes no phase outside the steps."""
    distilled = _check(tmp_path, "teacher", "--teacher", "--eval-every", "0", "--new-tokens", "0")["estimate"]
    student, _ = _per_step(runs[1]["estimate"], "matmul")
    assert _per_step(distilled, "matmul")[0] == pytest.approx(student * 4 / 3, rel=1e-6)
    assert not [p for p in distilled["work"]["outside_phases"] if p["kind"] != "setup"]


def test_a_compiled_models_graph_runs_in_an_evaluation_are_outside_the_step(tmp_path, sim_build):
    """Under torch.compile the evaluation runs an inference graph of its own, compiled (first seen) before
    the first step: its runs are the evaluation's (``outside_runs``), not the step's."""
    with_eval = _check(tmp_path, "compiled", "--compile")["estimate"]
    train_only = _check(tmp_path, "compiled_train_only", "--compile", "--eval-every", "0", "--new-tokens", "0")
    assert _per_step(with_eval) == pytest.approx(_per_step(train_only["estimate"]), rel=1e-9)
    phases = {p["kind"]: p for p in with_eval["work"]["outside_phases"]}
    assert phases["evaluation"]["flops"] > 0 and phases["generation"]["flops"] > 0
