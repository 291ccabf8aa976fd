"""The work inside torch.compile graphs reaches the estimate: the compile backend describes each graph's ATen
ops (their accounting is paused while the graph runs) and counts its runs (neuron_backend/compile/graph_work.py);
the matmul FLOPs of a compiled MLP's step match a count by hand, and those ops pay no per-op dispatch."""

from __future__ import annotations

import json
import textwrap

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import torch, torch.nn as nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).to("neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled = torch.compile(model, backend="neuron")
    x, y = torch.randn(64, 256, device="neuron"), torch.randint(0, 10, (64,), device="neuron")
    for _ in range(6):
        loss = nn.functional.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
""")


def test_compiled_graph_work_is_counted_without_dispatch(tmp_path, cli, sim_build):
    (tmp_path / "train.py").write_text(SCRIPT)
    report = tmp_path / "report.json"
    result = cli("check", str(tmp_path), "-q", "-o", str(report), "--compare", "cores", "--", "python", "train.py")
    assert result.returncode == 0, result.stdout + result.stderr
    section = json.loads(report.read_text())["estimate"]
    compiled = [w for w in section["work"]["work"] if w["compiled"]]
    forward = 2 * 64 * 512 * 256 + 2 * 64 * 10 * 512  # the two addmm
    backward = 2 * 10 * 512 * 64 + 2 * 64 * 10 * 512 + 2 * 512 * 256 * 64  # dW2, dX2, dW1 (no dX1)
    assert sum(w["flops"] for w in compiled if w["family"] == "matmul") == pytest.approx(forward + backward)
    assert section["per_step"]["compiled_ops"] > 0 and section["work"]["graphs"] >= 2
    eager = section["per_step"]["eager_ops"]
    a = {x["name"]: x["value"] for x in section["assumptions"]}
    core = next(r for r in section["per_device"] if r["device"] == "trn2-lnc2-core")
    assert core["seconds_by_family"]["dispatch"] == pytest.approx(eager * a["dispatch_seconds_per_op"])
