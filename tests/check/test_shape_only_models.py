"""Models reach the device in a shape-only run the ways programs put them there, through the real CLI:
built on the CPU and moved (tied weights stay one parameter), built under `torch.device("neuron")`,
loaded from a checkpoint (on the CPU then moved, into a device model, with `map_location="neuron"`)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow

SCRIPT = """
import torch, torch.nn as nn

class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.head = nn.Linear(16, 100, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, idx):
        return self.head(self.embed(idx))

def mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

torch.save(mlp().state_dict(), "weights.pt")
tied = TiedLM().to("neuron")
print("tied", tied.head.weight is tied.embed.weight, len(list(tied.parameters())))
with torch.device("neuron"):
    built_there = mlp()
built_there.load_state_dict(torch.load("weights.pt"))
moved = mlp()
moved.load_state_dict(torch.load("weights.pt", map_location="cpu"))
moved = moved.to("neuron")
mapped = mlp().to("neuron")
mapped.load_state_dict(torch.load("weights.pt", map_location="neuron"))
x = torch.randn(2, 16, device="neuron")
out = built_there(x) + moved(x) + mapped(x) + tied(torch.randint(0, 100, (2, 3), device="neuron")).sum()
print("devices", {str(p.device) for m in (built_there, moved, mapped, tied) for p in m.parameters()}, tuple(out.shape))
"""


def test_models_reach_the_device_every_usual_way(tmp_path, cli, sim_build):
    (tmp_path / "train.py").write_text(SCRIPT)
    result = cli("check", str(tmp_path), "--shape-only", "--output-format", "json", "--", "python", "train.py")
    doc = json.loads(result.stdout)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    assert "tied True 1" in result.stderr  # one parameter, as in a real run
    assert "devices {'neuron:0'} (2, 4)" in result.stderr
