"""`neuron-port check --model ID_OR_PATH`: a Hugging Face model built from its config.json (folders holding a
config.json the test writes; nothing downloaded), one standard training step shape-only through the normal
`check` path, several models in one table (a local process pool, FSDP2 in a fake world; or Ray tasks), and
the usage errors. Also: `torch.load(..., map_location="cpu")` of a shape-only placeholder checkpoint gives
fake CPU tensors, not gigabytes of real zeros."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

BATCH, SEQ = 2, 32
# config.json as a model's folder holds it (the sizes small; transformers fills in every other default)
CONFIGS = {
    "llama": {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 256, "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2},
    "t5": {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "vocab_size": 256, "d_model": 64,
           "d_ff": 128, "num_layers": 2, "num_heads": 4, "d_kv": 16, "is_encoder_decoder": True},
    "bert": {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 256, "hidden_size": 64,
             "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4},
}
TASKS = {"llama": "causal-lm", "t5": "seq2seq", "bert": "masked-lm"}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("models")
    for name, config in CONFIGS.items():
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(config))
    return root


def three(models) -> list[str]:
    return [arg for name in TASKS for arg in ("--model", str(models / name))]


def check_table(doc: dict, models, world: int = 1) -> None:
    assert [m["model"] for m in doc["models"]] == [str(models / name) for name in TASKS]
    for entry, name in zip(doc["models"], TASKS):
        assert entry["task"] == TASKS[name]  # read from the config's architectures
        row, report = entry["row"], entry["report"]
        assert row["exit_code"] == 0, report["runtime"]["status"]["stderr_tail"]
        assert report["runtime"]["mode"] == "shape_only"  # the same report as `check --shape-only`
        assert row["tokens_per_step"] == BATCH * SEQ * world  # every rank's batch
        if world > 1:  # FSDP2 over a fake world: rank 0's collectives span it
            assert f'"group_size": {world}' in json.dumps(report["runtime"]["distributed"])
        assert row["peak_bytes"] > 0 and row["devices"]
        assert all(d["fits"] is True and d["step_seconds"] > 0 for d in row["devices"])
        assert {d["device"] for d in row["devices"]} == {e["device"] for e in report["estimate"]["per_device"]}
        assert row["fallbacks"] == len(report["runtime"]["fallbacks"])


def test_three_configs_give_one_table(models, cli, sim_build, tmp_path):
    # sharded with FSDP2 as rank 0 of 2 (BERT's tied word embeddings stay in the model's group)
    out = tmp_path / "models.json"
    result = cli("check", *three(models), "--batch", str(BATCH), "--seq", str(SEQ), "--world-size", "2",
                 "--price", "trn2-chip=1.5", "-o", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("check --model: one training step per model") == 1  # one table
    assert result.stdout.count("│ ran ") == 3  # each model's step ran
    doc = json.loads(out.read_text())
    check_table(doc, models, world=2)
    for entry in doc["models"]:  # check's estimate flags reach every worker of the pool
        assert any(d["device"] == "trn2-chip" and d["per_million_tokens_usd"] for d in entry["row"]["devices"])


@pytest.mark.ray
def test_the_same_three_as_ray_tasks_on_a_local_ray_instance(models, cli, sim_build, tmp_path):
    pytest.importorskip("ray", reason="ray is not installed (the `ray` extra): --engine ray cannot be tested")
    result = cli("check", *three(models), "--batch", str(BATCH), "--seq", str(SEQ), "--engine", "ray",
                 "--output-format", "json", cwd=tmp_path, env={"RAY_ADDRESS": "", "RAY_USAGE_STATS_ENABLED": "0"})
    assert result.returncode == 0, result.stderr[-3000:]
    check_table(json.loads(result.stdout), models)


@pytest.mark.parametrize("args, message", [
    (["--model", "{tmp}"], "no config.json in"),
    (["--model", "{models}/llama", "--task", "summarize"], "--task summarize: unknown task"),
    (["--model", "{models}/llama", "--batch", "0"], "--batch 0: expected a whole number of at least 1"),
    (["--model", "{models}/llama", "--", "python", "train.py"], "give no command after `--`"),
    (["{tmp}", "--batch", "4", "--", "python", "train.py"], "--batch is an option of --model"),
    (["--model", "no-such-org/no-such-model"], "its config.json is not in the HF cache (HF_HUB_OFFLINE is set)"),
    (["--model", "{models}/llama", "--model", "{models}/t5", "--html", "{tmp}/r.html"],
     "--html writes one model's report; several models give one table"),
    (["--model", "{models}/llama", "--model", "{models}/t5", "--statistics"],
     "--statistics counts one model's findings; several models give one table"),
])
def test_usage_errors_are_one_line_naming_the_option(models, cli, tmp_path, args, message):
    args = [a.format(tmp=tmp_path, models=models) for a in args]
    result = cli("check", *args, cwd=tmp_path, env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert "Traceback" not in result.stderr


LOAD = """
import torch, torch.nn as nn
with torch.device("neuron"):  # 256 GiB of bf16 weights: more than this machine's memory
    model = nn.Linear(2**18, 2**19, bias=False, dtype=torch.bfloat16)
torch.save({"model": model.state_dict(), "step": 7}, "ckpt.pt")
ckpt = torch.load("ckpt.pt", map_location="cpu")  # the usual resume: load on the CPU, then into the model
model.load_state_dict(ckpt["model"])
w = ckpt["model"]["weight"]
print("loaded", ckpt["step"], str(w.device), tuple(w.shape), int(w.sum()), flush=True)
"""


def test_torch_load_on_the_cpu_of_a_placeholder_checkpoint_holds_no_bytes(cli, sim_build, tmp_path):
    (tmp_path / "resume.py").write_text(LOAD)
    result = cli("check", str(tmp_path), "--shape-only", "--output-format", "json", "--", "python", "resume.py")
    doc = json.loads(result.stdout)
    # real CPU zeros (before): "DefaultCPUAllocator: can't allocate memory: you tried to allocate 274877906944 bytes"
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    assert "loaded 7 cpu (524288, 262144) 0" in result.stderr  # fake CPU tensors; a host read is a placeholder


FROM_CACHE = """
import json
from neuron_port.check.model_run import model_runs
runs = model_runs(["example-org/tiny-llama"], tasks=[], batch=1, seq=8, precision="bf16", world_size=None,
                  compile=False)
print(json.dumps([runs[0].task, runs[0].config["model_type"]]))
"""


def test_a_hub_id_is_found_in_the_users_hf_cache_offline(tmp_path):
    # the HF cache as huggingface_hub lays it out: a snapshot per revision, refs/main naming it
    repo = tmp_path / "hf" / "hub" / "models--example-org--tiny-llama"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(CONFIGS["llama"]))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)
    result = subprocess.run([sys.executable, "-c", FROM_CACHE], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout) == ["causal-lm", "llama"]


def test_models_built_their_own_way_take_the_step(cli, sim_build, tmp_path):
    """PP-LCNet's image classifier takes no labels and returns its logits as ``last_hidden_state``: the step
    computes the task's cross-entropy on them, as a training script would, and says so. XLNet makes its
    attention weights with a legacy constructor (``torch.FloatTensor``), on the host whatever the device
    context: they are moved with the model, as a user's ``.to("neuron")`` moves them."""
    pytest.importorskip("transformers")
    configs = {"pp_lcnet": {"model_type": "pp_lcnet", "architectures": ["PPLCNetForImageClassification"],
                            "num_labels": 10, "image_size": 32},
               "xlnet": {"model_type": "xlnet", "architectures": ["XLNetLMHeadModel"], "vocab_size": 256,
                         "d_model": 64, "n_layer": 1, "n_head": 4, "d_inner": 128}}
    args = []
    for name, config in configs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
        args += ["--model", str(tmp_path / name)]
    out = tmp_path / "models.json"
    result = cli("check", *args, "--batch", "2", "--seq", "16", "-o", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    entries = json.loads(out.read_text())["models"]
    for entry in entries:
        assert entry["row"]["exit_code"] == 0, entry["report"]["runtime"]["status"]["stderr_tail"]
    assert "returns no loss: the step's loss is the cross-entropy" in json.dumps(entries[0]["report"])
