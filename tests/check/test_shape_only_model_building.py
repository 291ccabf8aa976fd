"""Real model-building code under `check --shape-only`, through the real CLI: what a model's construction
does on the CPU before it moves (init through `.data`, `nn.init`, `deepcopy`, `clone`, `register_buffer`,
`nn.TransformerEncoder` copying its layer), a module shared by two parents moved once, `.to("neuron:0")`
again on a moved model (accelerate and the HF Trainer do that) and `.half()` after the move, with the
device memory following each; `torch.save` of device tensors (a small placeholder file, listed as NP911),
loaded back and `load_state_dict` of CPU tensors; a transformers model with tied word embeddings
initialised by its own `_init_weights`. Each script failed on 858089d."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow

CPU_INIT = """
import copy
import torch, torch.nn as nn

torch.manual_seed(0)
m = nn.Linear(4, 4)
m.weight.data.normal_(mean=0.0, std=0.02)  # every Hugging Face _init_weights
m.bias.data.zero_()
nn.init.trunc_normal_(m.weight, std=0.02)
nn.init.uniform_(m.bias)
m.register_buffer("scale", torch.ones(4).clone())
twin = copy.deepcopy(m)
m = m.to("neuron")
print("linear", m.weight.device, m.scale.device, twin.weight.device)

encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4), 2)  # deep-copies its layer
encoder = encoder.to("neuron")
out = encoder(torch.randn(5, 2, 64, device="neuron"))
out.sum().backward()
print("encoder", tuple(out.shape), {str(p.device) for p in encoder.parameters()})
"""

TIED = """
import torch, torch.nn as nn

class Stack(nn.Module):
    def __init__(self, embed):
        super().__init__(); self.embed_tokens = embed

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Embedding(100, 8)
        self.encoder = Stack(self.shared); self.decoder = Stack(self.shared)

m = Model().to("neuron")
print("tied", m.encoder.embed_tokens.weight is m.shared.weight, len(list(m.parameters())),
      torch.neuron.memory_allocated())
weight = m.shared.weight
m.to("neuron:0")
m.to("neuron:0")  # a no-op in a real run: the same parameter, no new memory
print("again", m.shared.weight is weight, torch.neuron.memory_allocated())
m.half()
print("half", m.decoder.embed_tokens.weight is m.shared.weight, m.shared.weight.dtype, torch.neuron.memory_allocated())
"""

SAVE = """
import copy, os
import torch, torch.nn as nn

model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 8)).to("neuron")
optimizer = torch.optim.AdamW(model.parameters())
model(torch.randn(4, 512, device="neuron")).sum().backward()
optimizer.step()
torch.save(model.state_dict(), "model.pt")
torch.save({"optimizer": optimizer.state_dict(), "step": 1}, "optimizer.pt")
print("saved", os.path.getsize("model.pt") < 8192, os.path.getsize("optimizer.pt") < 8192)
model.load_state_dict(torch.load("model.pt", map_location="neuron"))
optimizer.load_state_dict(torch.load("optimizer.pt")["optimizer"])
model.load_state_dict({k: torch.zeros(v.shape) for k, v in model.state_dict().items()})  # CPU tensors
copied = copy.deepcopy(model)
assigned = torch.load("model.pt")
model.load_state_dict(assigned, assign=True)
model(torch.randn(4, 512, device="neuron")).sum().backward()
on_cpu = torch.load("model.pt", map_location="cpu")
print("assigned", {str(t.device) for t in assigned.values()}, {str(t.device) for t in on_cpu.values()},
      int(on_cpu["2.bias"].sum()))
print("loaded", {str(p.device) for p in model.parameters()}, {str(p.device) for p in copied.parameters()},
      str(model[0].weight.clone().device))
"""

HF_TIED = """
import torch
from transformers import LlamaConfig, LlamaForCausalLM

config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
torch.manual_seed(0)
model = LlamaForCausalLM(config)  # post_init: _init_weights on the CPU, then the tie
model.to("neuron:0")
model.to("neuron:0")
ids = torch.randint(0, 128, (2, 8)).to("neuron")
loss = model(input_ids=ids, labels=ids).loss
loss.backward()
print("hf", model.lm_head.weight is model.model.embed_tokens.weight, len(list(model.parameters())), tuple(loss.shape))
"""


def shape_only(cli, tmp_path, script: str) -> tuple[dict, str]:
    (tmp_path / "s.py").write_text(script)
    result = cli("check", str(tmp_path), "--shape-only", "--output-format", "json", "--", "python", "s.py")
    doc = json.loads(result.stdout)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    return doc, result.stderr


def test_cpu_init_deepcopy_and_buffers_then_move(tmp_path, cli, sim_build):
    _, output = shape_only(cli, tmp_path, CPU_INIT)
    assert "linear neuron:0 neuron:0 cpu" in output
    assert "encoder (5, 2, 64) {'neuron:0'}" in output


def test_a_shared_module_moves_once_and_a_moved_model_converts_again(tmp_path, cli, sim_build):
    _, output = shape_only(cli, tmp_path, TIED)
    assert "tied True 1 3200" in output  # one 100 x 8 float32 weight
    assert "again True 3200" in output
    assert "half True torch.float16 1600" in output  # the float32 copy freed


def test_torch_save_writes_a_placeholder_and_loads_back(tmp_path, cli, sim_build):
    doc, output = shape_only(cli, tmp_path, SAVE)
    assert "saved True True" in output  # 2 MB of float32 weights and twice that of AdamW state: not written
    assert "loaded {'neuron:0'} {'neuron:0'} neuron:0" in output
    assert "assigned {'neuron:0'} {'cpu'} 0" in output  # fakes where it saved them, CPU zeros where asked
    saves = [p for p in doc["runtime"]["shape_only"]["placeholders"] if p["op"] == "torch.save"]
    assert {p["site"]["line"] for p in saves} == {9, 10}
    assert {f["line"] for f in doc["findings"] if f["code"] == "NP911" and "placeholder file" in f["message"]} == {9, 10}


def test_a_transformers_model_with_tied_embeddings(tmp_path, cli, sim_build):
    pytest.importorskip("transformers")
    _, output = shape_only(cli, tmp_path, HF_TIED)
    assert "hf True 20 ()" in output
