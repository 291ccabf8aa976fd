"""Issue 12: a rank ended with "terminate called without an active exception" (exit code -6) when it
exited while gloo still ran its collectives: gloo's worker thread dropped the last reference to a CPU alias
with a Python object while the interpreter finalised, and CPython ends a thread that takes the GIL then
(neuron_backend/distributed/cpu_aliases.py). Trigger: rank 1 exits right after 40 async all_reduces that rank 0
completes one by one (without the fix: 4 crashes in 4 runs on a loaded 2-core machine)."""

from __future__ import annotations

from .conftest import torchrun

EXIT_DURING_COLLECTIVES = """\
import torch, torch.distributed as dist
dist.init_process_group("neuron")
rank = dist.get_rank()
ts = [torch.ones(1 << 14, device="neuron") for _ in range(40)]
if rank == 0:
    for t in ts:
        dist.all_reduce(t)
else:
    for t in ts:
        dist.all_reduce(t, async_op=True)  # the works are dropped: gloo's worker thread holds their tensors
print(f"rank {rank} leaving", flush=True)
"""


def test_a_rank_exiting_during_its_async_collectives_exits_cleanly(tmp_path, sim_build):
    for attempt in range(2):
        r = torchrun(EXIT_DURING_COLLECTIVES, tmp_path / f"run{attempt}")
        assert "terminate called" not in r.proc.stderr, r.proc.stderr[-3000:]
        assert r.proc.returncode == 0, r.proc.stderr[-3000:]
        assert r.proc.stdout.count("leaving") == 2
