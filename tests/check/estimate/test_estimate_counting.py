"""Counting a step's work (issue 37 item 5), through the CLI on a small GPT with two optimizers (a fused AdamW
on the embeddings and norms, then SGD with momentum on the matrices, both stepped every step):

* every optimizer's step is in the step it belongs to: the step clock moves when the first optimizer of a
  step finishes, so the second one's ops are stamped with the next step's number; with one step they were
  in neither the step nor a phase outside it, with S steps they counted at S/(S-1) of their rate;
* with the whole model under torch.compile, the embedding lookups are inside the graph: the tokens per step
  come from the index tensor at the graph's lookup, named by its module."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import run_cli
from tests.conftest import simulator_env

SCRIPT = Path(__file__).resolve().parent / "two_optimizers" / "train.py"
BATCH, SEQ, D, VOCAB, LAYERS = 4, 16, 32, 64, 2


def _check(root: Path, name: str, *args: str) -> dict:
    project = root / name
    project.mkdir()
    shutil.copy(SCRIPT, project / "train.py")
    report = project / "report.json"
    result = run_cli("check", str(project), "-q", "--exit-zero", "--tokens-per-step", "embedding@wte", "-o",
                     str(report), "--", "python", "train.py", *args, cwd=project, env=simulator_env())
    assert report.exists(), result.stdout[-2000:] + result.stderr[-3000:]
    return json.loads(report.read_text())["estimate"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, sim_build) -> tuple[dict, dict]:
    root = tmp_path_factory.mktemp("counting")
    return _check(root, "one_step_compiled", "--steps", "1", "--compile"), _check(root, "four_steps", "--steps", "4")


def _calls(section: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in section["work"]["work"]:
        out[item["op"]] = out.get(item["op"], 0.0) + item["calls"]
    return out


def _flops(section: dict, op: str) -> float:
    return sum(i["flops"] for i in section["work"]["work"] if i["op"] == op)


MATRICES = LAYERS * 2 * 4 * D * D + D * VOCAB  # the SGD's: the blocks' two Linear weights and the head
REST = VOCAB * D + SEQ * D + LAYERS * (2 * D + 4 * D + D)  # the AdamW's: embeddings, norms, biases


def test_one_step_counts_both_optimizers(runs):
    """One step: the step's optimizer work is the AdamW's (one fused call, 16 FLOPs a parameter) plus the
    SGD's (its first step: the parameters updated from the new momentum buffers, one foreach call)."""
    one, _ = runs
    calls = _calls(one)
    assert one["steps"]["measured"] == 1
    assert calls["aten::_fused_adamw_"] == 1.0
    assert calls.get("aten::_foreach_add_.List") == 1.0  # the SGD's step: absent before (stamped step 1 of 1)
    assert _flops(one, "aten::_fused_adamw_") == 16 * REST
    assert _flops(one, "aten::_foreach_add_.List") == MATRICES


def test_many_steps_count_each_optimizer_once_a_step(runs):
    """Four steps: a steady SGD step is one _foreach_mul_ (momentum), two _foreach_add_ (buffer, parameters),
    one a step each, not 4/3 or 3/2 of it."""
    _, four = runs
    calls = _calls(four)
    assert four["steps"]["measured"] == 4
    assert calls["aten::_fused_adamw_"] == 1.0
    assert calls["aten::_foreach_mul_.Scalar"] == pytest.approx(1.0)
    assert calls["aten::_foreach_add_.List"] == pytest.approx(2.0)
    assert _flops(four, "aten::_foreach_add_.List") == pytest.approx(2 * MATRICES)


def test_tokens_per_step_found_inside_a_compiled_model(runs):
    one, four = runs
    assert one["per_step"]["compiled_ops"] > 0 and not [i for i in one["work"]["work"]
                                                       if i["op"] == "aten::embedding" and not i["compiled"]]
    assert one["steps"]["tokens_per_step"] == four["steps"]["tokens_per_step"] == BATCH * SEQ
    assert one["steps"]["tokens_from"]["module"] == "wte"
    sources = {s["module"]: s["per_step"] for s in one["work"]["token_sources"]}
    assert sources == {"wte": BATCH * SEQ, "wpe": SEQ}
