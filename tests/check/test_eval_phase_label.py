"""Issue 35, noise: an evaluation loop under ``no_grad`` that iterates over batches the program holds (no
DataLoader) is an evaluation, not a "generation": a phase without optimizer steps or DataLoader batches is a
generation only when its later calls keep bringing new signatures (a decoding loop whose inputs grow).
Through the real CLI; the estimate's work outside the training steps is labelled by the simulator
(neuron_backend/events/phase_calls.py) with the reader's rule (neuron_port/check/aggregate/phases.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PROGRAM = '''\
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to("neuron")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
held_out = [torch.randn(4, 8, device="neuron") for _ in range(5)]
for step in range(4):
    model(torch.randn(4, 8, device="neuron")).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad()
model.eval()
with torch.no_grad():
    score = sum(model(x).square().mean().item() for x in held_out)  # an evaluation, no DataLoader
print(score)
'''


def test_an_evaluation_without_a_dataloader_is_not_a_generation(tmp_path: Path, cli):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(PROGRAM)
    out = tmp_path / "report.json"
    cli("check", str(project), "-o", str(out), "--", "python", "train.py")
    doc = json.loads(out.read_text())
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    kinds = {p["kind"]: p for p in doc["estimate"]["work"]["outside_phases"]}
    assert "evaluation" in kinds and "generation" not in kinds, kinds  # was "generation"
    assert kinds["evaluation"]["calls"] > 0
    # a decoding loop (a new length every call) is still a generation: tests/check/test_phases.py
