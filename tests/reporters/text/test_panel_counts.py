"""Issue 35, noise: the check panel's counts say what they count. One compiled function called at two lines
is one function at two call sites, and the panel counts its graphs as the estimate does (the forward and
backward graphs of a training call, the inference graph of a no_grad call: 3, where the panel said "2
compile(s) of 2 function(s)" beside the estimate's "3 graph compile(s)"); a run without CPU fallbacks says
so (it printed "CPU fallbacks 0.0 call(s)"). Through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PROGRAM = '''\
import torch

model = torch.nn.Linear(8, 8).to("neuron")
step = torch.compile(model, backend="neuron")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8, device="neuron")
for _ in range(3):
    step(x).square().mean().backward()  # training: forward and backward graphs
    optimizer.step()
    optimizer.zero_grad()
with torch.no_grad():
    print(step(x).sum().item())  # the same function, another line: an inference graph
'''


def test_compiled_graphs_and_functions_match_the_estimate(tmp_path: Path, cli):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(PROGRAM)
    out = tmp_path / "report.json"
    result = cli("check", str(project), "-o", str(out), "--", "python", "train.py")
    doc = json.loads(out.read_text())
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    panel = " ".join(result.stdout.split())
    graphs = next(r for r in doc["estimate"]["per_device"] if r["device"] == "trn2-chip")["compile"]["graphs"]
    assert graphs == 3
    assert "torch.compile graphs: 3 graph(s) from 2 compile(s) of 1 function(s) at 2 call site(s)" in panel, panel
    assert "and 3 graph compile(s)" in panel
    assert "no CPU fallback" in panel and "CPU fallbacks 0.0" not in panel
