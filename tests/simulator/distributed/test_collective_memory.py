"""A collective's buffers are device memory for as long as the user holds them, not for the rest of the run:
on the simulator the gloo collectives run over CPU aliases of the neuron tensors, and the aliases are kept
until gloo lets go of them (neuron_backend/distributed/cpu_aliases.py). Kept with their works, every
all-gather output and reduce-scatter input of FSDP2 stayed allocated, and a rank's memory grew by them at
every step. Two ranks under torchrun, as a user runs them: the memory a rank holds between steps is the
same at every step, and the buffer of a collective the user waited on and dropped is freed (by the start of
the next collective: a device backend frees it at once, the simulator when it lets go of the aliases)."""

from __future__ import annotations

import pytest

from .conftest import torchrun

pytestmark = pytest.mark.slow

FSDP_STEPS = """
import json, time, torch, torch.nn as nn, torch.distributed as dist
from torch.distributed.fsdp import fully_shard


def settled():
    # the memory once gloo's worker let go of the finished collectives: the simulator lets go of their CPU
    # aliases when a later collective starts (the same number of barriers on every rank)
    for _ in range(10):
        time.sleep(0.02)
        dist.barrier()
    return torch.neuron.memory_allocated()

dist.init_process_group(backend="neuron")
rank = dist.get_rank()
torch.manual_seed(0)
with torch.device("neuron"):
    model = nn.Sequential(*[nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)) for _ in range(3)])
for block in model:
    fully_shard(block)
fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
between_steps = []
for step in range(5):
    loss = model(torch.randn(4, 64, 256, device="neuron")).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    between_steps.append(settled())

held = torch.empty(1 << 20, device="neuron")  # 4 MiB, gathered from every rank
before = settled()
gathered = torch.empty(2 << 20, device="neuron")
dist.all_gather_into_tensor(gathered, held)
del gathered
after = settled()
print("\\nRESULT:" + json.dumps({"rank": rank, "between_steps": between_steps, "before": before, "after": after}), flush=True)
dist.destroy_process_group()
"""


def test_a_rank_holds_the_same_memory_at_every_step_and_frees_a_dropped_collective_buffer(sim_build, tmp_path):
    run = torchrun(FSDP_STEPS, tmp_path)
    assert run.proc.returncode == 0, run.proc.stderr[-5000:]
    results = run.results()
    assert sorted(results) == [0, 1]
    for r in results.values():
        steady = r["between_steps"][1:]  # the first step creates the optimizer's states
        assert steady == [steady[0]] * len(steady), r["between_steps"]
        assert r["after"] == r["before"], r  # the 8 MiB output of a waited and dropped all-gather is freed
