"""`check --shape-only --world-size N`: one process as rank 0 of an N-rank job over PyTorch's fake process
group, through the real CLI. FSDP2 (`fully_shard`) shards the model 64 ways: the collectives are
recorded with their group and bytes, and rank 0's memory holds its shards, not the model. DDP, whose
C++ reducer cannot run on fake tensors, is a clear error at the user's line."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow

D, BLOCKS, WORLD = 1024, 4, 64
FSDP = f"""
import torch, torch.nn as nn, torch.distributed as dist
from torch.distributed.fsdp import fully_shard

dist.init_process_group(backend="neuron")
with torch.device("neuron"):
    model = nn.Sequential(*[nn.Sequential(nn.Linear({D}, 4 * {D}), nn.GELU(), nn.Linear(4 * {D}, {D}))
                            for _ in range({BLOCKS})])
for block in model:
    fully_shard(block)
fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(2):
    x = torch.randn(8, 128, {D}, device="neuron")
    loss = model(x).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print("step", step, dist.get_rank(), dist.get_world_size())
dist.destroy_process_group()
"""
DDP = """
import torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group(backend="neuron")
model = DistributedDataParallel(nn.Linear(8, 8).to("neuron"))
"""


def run(cli, tmp_path, script, *options):
    (tmp_path / "train.py").write_text(script)
    result = cli("check", str(tmp_path), "--shape-only", *options, "--output-format", "json",
                 "--", "python", "train.py")
    return json.loads(result.stdout), result


def test_fsdp_over_a_fake_world_records_rank_0s_shards_and_collectives(tmp_path, cli, sim_build):
    doc, result = run(cli, tmp_path, FSDP, "--world-size", str(WORLD))
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    assert f"step 1 0 {WORLD}" in result.stderr  # rank 0 of 64
    raw = json.dumps(doc["runtime"]["distributed"])
    assert '"group_size": 64' in raw
    ops = {e.get("op") for e in doc["runtime"]["distributed"]} | {
        s.get("op") for e in doc["runtime"]["distributed"] for s in e.get("sites", [])}
    assert {"all_gather_into_tensor", "reduce_scatter_tensor"} <= ops, raw[:2000]
    params = BLOCKS * 2 * (D * 4 * D + 4 * D * 0) * 4 + BLOCKS * (4 * D + D) * 4  # float32 weights and biases
    peak = doc["estimate"]["work"]["peak_bytes"]
    # rank 0 holds 1/64 of the parameters, gradients and AdamW states, and at most two blocks unsharded at
    # once (the one running and the one prefetched) with their gradients: far less than the whole model's
    # parameters, gradients and states (4 x params) an unsharded replica would hold
    assert peak < 2 * params, (peak, params)


def test_ddp_in_a_shape_only_run_is_a_clear_error_at_its_line(tmp_path, cli, sim_build):
    doc, _ = run(cli, tmp_path, DDP, "--world-size", "2")
    failed = [f for f in doc["findings"] if f["code"] == "NP909"]
    line = next(i for i, text in enumerate(DDP.splitlines(), 1) if "DistributedDataParallel(" in text)
    assert failed and failed[0]["line"] == line
    assert "DistributedDataParallel cannot run in a shape-only run" in failed[0]["message"]


def test_world_size_needs_shape_only(tmp_path, cli):
    (tmp_path / "train.py").write_text("print('never runs')\n")
    result = cli("check", str(tmp_path), "--world-size", "8", "--", "python", "train.py")
    assert result.returncode == 2 and "add --shape-only" in result.stderr
