"""The memory a shape-only run reports, against a computation by hand: a two-layer model of 4096 x 4096
float32 weights (64 MiB each: above the 16 MiB where the Neuron allocator's size classes round, so
every byte is counted exactly), a 1024 x 4096 batch, one AdamW step, at a size a real run would need
about 200 GFLOP for and this run computes nothing of."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.slow

MiB = 2**20
D, B = 4096, 1024
SCRIPT = f"""
import torch, torch.nn as nn

model = nn.Sequential(nn.Linear({D}, {D}, bias=False), nn.ReLU(), nn.Linear({D}, {D}, bias=False)).to("neuron")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn({B}, {D}).to("neuron")
loss = model(x).square().mean()
loss.backward()
print("after backward", torch.neuron.memory_allocated())
optimizer.step()
print("after step", torch.neuron.memory_allocated())
"""


def test_parameters_gradients_adamw_states_and_activations_add_up(tmp_path, cli, sim_build):
    (tmp_path / "train.py").write_text(SCRIPT)
    result = cli("check", str(tmp_path), "--shape-only", "--output-format", "json", "--", "python", "train.py")
    doc = json.loads(result.stdout)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    printed = {k: int(v) for k, v in re.findall(r"after (backward|step) (\d+)", result.stderr)}

    weights = 2 * D * D * 4  # two float32 weights: 128 MiB
    batch = B * D * 4  # the input, kept on the device: 16 MiB
    scalar = 512  # the loss (a 0-d tensor: one 256-byte size class) and the step's scalar
    # after backward: weights + their gradients + the input (activations freed with the graph)
    assert abs(printed["backward"] - (2 * weights + batch)) <= scalar
    # after the step: + AdamW's exp_avg and exp_avg_sq per weight
    assert abs(printed["step"] - (4 * weights + batch)) <= scalar + 1024  # + AdamW's step counters
    # the peak: during the step, one foreach temporary per weight (torch._foreach_sqrt(exp_avg_sq)) on top
    peak = doc["estimate"]["work"]["peak_bytes"]
    assert 4 * weights + batch <= peak <= 5 * weights + batch + 2 * MiB, peak / MiB
