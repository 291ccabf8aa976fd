"""Checkpoints in `check --shape-only`, through the real CLI (issue 36 item 1): `from_pretrained` builds the
model from its config with placeholder weights and reads no weight file (a local folder whose
`model.safetensors` a real load rejects; the user's HF cache holding only `config.json`, offline; then
sharded with fully_shard; a diffusers UNet, whose peak equals a real check's of a real checkpoint), and
`safetensors.torch.save_file` (and `save_pretrained`, which calls it) of device tensors writes a small
placeholder file, loaded back at its shapes; each such line is an NP911 placeholder."""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.slow

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128, "hidden_size": 32,
          "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 8, "max_position_embeddings": 64, "tie_word_embeddings": True, "dtype": "float32"}

FINE_TUNE = """
import os, torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("model")
print("loaded", {str(p.device) for p in model.parameters()}, model.lm_head.weight is model.model.embed_tokens.weight)
model.to("neuron")
optimizer = torch.optim.AdamW(model.parameters())
ids = torch.randint(0, 128, (2, 16)).to("neuron")
loss = model(input_ids=ids, labels=ids).loss
loss.backward()
optimizer.step()
model.save_pretrained("out")
print("saved", tuple(loss.shape), os.path.getsize("out/model.safetensors") < 4096)
"""

FROM_CACHE = """
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("acme/tiny-llama", dtype=torch.bfloat16, device_map="neuron")
held = {id(t): t for t in (*model.parameters(), *model.buffers())}.values()
print("cache", {str(t.device) for t in held}, model.dtype, torch.neuron.memory_allocated() == sum(t.nbytes for t in held))
"""

FSDP = """
import sys, torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from transformers import AutoConfig, AutoModelForCausalLM

dist.init_process_group("neuron")
if sys.argv[1] == "pretrained":  # on the CPU, as a fine-tuning script loads it: fake CPU weights
    model = AutoModelForCausalLM.from_pretrained("model", dtype=torch.bfloat16)
else:  # the same model built on the device
    with torch.device("neuron"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained("model"), dtype=torch.bfloat16)
for layer in model.model.layers:
    fully_shard(layer)
fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters())
ids = torch.randint(0, 128, (2, 16)).to("neuron")
model(input_ids=ids, labels=ids).loss.backward()
optimizer.step()
print("fsdp", {type(p).__name__ for p in model.parameters()}, torch.neuron.max_memory_allocated())
"""

UNET_CONFIG = {"_class_name": "UNet2DModel", "sample_size": 16, "in_channels": 3, "out_channels": 3,
               "layers_per_block": 1, "block_out_channels": [16, 32], "norm_num_groups": 8,
               "down_block_types": ["DownBlock2D", "AttnDownBlock2D"], "up_block_types": ["AttnUpBlock2D", "UpBlock2D"]}

SAVE_UNET = """
import sys
from diffusers import UNet2DModel

UNet2DModel.from_config(UNet2DModel.load_config(sys.argv[1])).save_pretrained(sys.argv[1])
"""

UNET_STEP = """
import torch, torch.nn.functional as F
from diffusers import UNet2DModel

model = UNet2DModel.from_pretrained("unet")
model.to("neuron").train()
optimizer = torch.optim.AdamW(model.parameters())
x = torch.randn(2, 3, 16, 16, device="neuron")
t = torch.randint(0, 1000, (2,)).to("neuron")
F.mse_loss(model(x, t).sample, x).backward()
optimizer.step()
print("unet", torch.neuron.max_memory_allocated())
"""

SAFETENSORS = """
import os, torch, torch.nn as nn
from safetensors.torch import load, load_file, save, save_file

model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 8)).to("neuron")
state = model.state_dict()
save_file(state, "model.safetensors", metadata={"format": "pt"})
blob = save({"0.weight": state["0.weight"], "step": torch.tensor([3])})
print("sizes", os.path.getsize("model.safetensors") < 4096, len(blob) < 4096)
on_cpu = load_file("model.safetensors")
print("cpu", sorted((k, tuple(v.shape), str(v.device), int(v.abs().sum())) for k, v in on_cpu.items()))
model.load_state_dict({k: v.to("neuron") for k, v in on_cpu.items()})
partial = load(blob)
print("bytes", tuple(partial["0.weight"].shape), partial["step"].tolist())
"""


def write_model(folder, weights: bytes | None) -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    if weights is not None:
        (folder / "model.safetensors").write_bytes(weights)


def check(cli, tmp_path, script: str, *options: str, env: dict | None = None) -> tuple[dict, str]:
    (tmp_path / "s.py").write_text(script)
    result = cli("check", str(tmp_path), *options, "--output-format", "json", "--", "python", "s.py",
                 cwd=tmp_path, env=env)
    assert result.stdout, result.stderr[-3000:]
    return json.loads(result.stdout), result.stderr


def placeholder_lines(doc: dict, op: str) -> set[int]:
    return {p["site"]["line"] for p in doc["runtime"]["shape_only"]["placeholders"] if p["op"] == op}


def test_from_pretrained_reads_no_weight_file_and_says_so(tmp_path, cli, sim_build):
    pytest.importorskip("transformers")
    # a header that claims 2**60 bytes: not a safetensors file a real load can read
    write_model(tmp_path / "model", (1 << 60).to_bytes(8, "little") + b"{}")
    real, _ = check(cli, tmp_path, FINE_TUNE)
    assert real["runtime"]["status"]["exit_code"] != 0  # the real run reads the weights and fails
    assert "safetensor" in "\n".join(real["runtime"]["status"]["stderr_tail"]).lower()

    doc, output = check(cli, tmp_path, FINE_TUNE, "--shape-only")
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    assert "loaded {'cpu'} True" in output  # built from the config on the CPU, weights tied as in a real load
    assert "saved () True" in output  # trained on the device; save_pretrained wrote a placeholder file
    assert placeholder_lines(doc, "from_pretrained") == {5}
    assert placeholder_lines(doc, "safetensors.torch.save_file") == {13}
    messages = {f["line"]: f["message"] for f in doc["findings"] if f["code"] == "NP911"}
    assert "from_pretrained returned placeholder weights" in messages[5]
    assert "weight files were not read" in messages[5]


def test_from_pretrained_from_the_hf_cache_offline_onto_the_device(tmp_path, cli, sim_build):
    pytest.importorskip("transformers")
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf" / "hub" / "models--acme--tiny-llama"
    write_model(repo / "snapshots" / commit, weights=None)  # the cache holds the config only
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    doc, output = check(cli, tmp_path, FROM_CACHE, "--shape-only",
                        env={"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"})
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    # every weight on the device in bfloat16, and the device memory is theirs
    assert "cache {'neuron:0'} torch.bfloat16 True" in output
    assert placeholder_lines(doc, "from_pretrained") == {5}


def test_from_pretrained_then_fully_shard_in_a_fake_world(tmp_path, cli, sim_build):
    """An FSDP fine-tuning script: the model loaded on the CPU, then sharded (fully_shard moves its CPU
    weights to the device): rank 0's memory is the same as for the model built on the device."""
    pytest.importorskip("transformers")
    write_model(tmp_path / "model", weights=None)
    peaks = {}
    for how in ("pretrained", "device"):
        (tmp_path / "s.py").write_text(FSDP)
        result = cli("check", str(tmp_path), "--shape-only", "--world-size", "4", "--output-format", "json", "--",
                     "python", "s.py", how, cwd=tmp_path)
        assert result.stdout, result.stderr[-3000:]
        doc = json.loads(result.stdout)
        assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
        line = next(x for x in result.stderr.splitlines() if x.startswith("fsdp "))
        assert line.startswith("fsdp {'DTensor'} "), line
        peaks[how] = int(line.split()[-1])
    assert peaks["pretrained"] == peaks["device"] > 0, peaks


def test_diffusers_from_pretrained_reads_no_weight_file(tmp_path, cli, sim_build):
    """A diffusers model: a real check of a real checkpoint and a shape-only check of the same config with a
    weight file nobody can read record the same device peak."""
    pytest.importorskip("diffusers")
    import subprocess
    import sys

    real_dir, fake_dir = tmp_path / "real", tmp_path / "fake"
    for folder in (real_dir, fake_dir):
        (folder / "unet").mkdir(parents=True)
        (folder / "unet" / "config.json").write_text(json.dumps(UNET_CONFIG))
    made = subprocess.run([sys.executable, "-c", SAVE_UNET, str(real_dir / "unet")], capture_output=True, text=True,
                          env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    (fake_dir / "unet" / "diffusion_pytorch_model.safetensors").write_bytes((1 << 60).to_bytes(8, "little") + b"{}")
    peaks, docs = {}, {}
    for folder, options in ((real_dir, ()), (fake_dir, ("--shape-only",))):
        docs[folder.name], output = check(cli, folder, UNET_STEP, *options)
        assert docs[folder.name]["runtime"]["status"]["exit_code"] == 0, docs[folder.name]["runtime"]["status"]
        peaks[folder.name] = int(next(x for x in output.splitlines() if x.startswith("unet ")).split()[1])
    assert peaks["fake"] == peaks["real"] > 0, peaks
    assert placeholder_lines(docs["fake"], "from_pretrained") == {5}


def test_safetensors_save_writes_a_placeholder_and_loads_back(tmp_path, cli, sim_build):
    doc, output = check(cli, tmp_path, SAFETENSORS, "--shape-only")
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    assert "sizes True True" in output  # 4 MB of float32 weights: not written as zeros
    assert ("cpu [('0.bias', (1024,), 'cpu', 0), ('0.weight', (1024, 1024), 'cpu', 0), ('2.bias', (8,), 'cpu', 0), "
            "('2.weight', (8, 1024), 'cpu', 0)]") in output
    assert "bytes (1024, 1024) [3]" in output  # a real tensor in the same file keeps its values
    assert placeholder_lines(doc, "safetensors.torch.save_file") == {7}
    assert placeholder_lines(doc, "safetensors.torch.save") == {8}
