"""DDP with ``init_process_group(..., device_id=...)`` and comm hooks on the simulated device (issue 21,
item 4), 2 ranks under torchrun: PyTorch's allreduce and fp16 hooks, and a hook that combines its future's
value with a tensor it keeps on the device (as error-feedback or scaling hooks do). On a device backend the
future of a collective holds the device tensors it reduced; each hook trains, and the gradients are equal
on both ranks and to a single-process CPU reference."""

from __future__ import annotations

import pytest

from .conftest import torchrun

pytestmark = pytest.mark.slow

SCRIPT = """\
import json, os, torch, torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
def result(**kw): os.write(1, ("RESULT:" + json.dumps(kw) + "\\n").encode())  # one write: ranks share the pipe
dist.init_process_group(backend="neuron", device_id=torch.device("neuron", 0))
rank, world = dist.get_rank(), dist.get_world_size()

class DeviceScale:  # a hook state that lives on the device
    def __init__(self):
        self.scale = torch.full((1,), 1.0 / world, device="neuron")

def scaled_allreduce(state, bucket):
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    return fut.then(lambda done: done.value()[0].mul_(state.scale))  # DEVICE HOOK

def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

data = [torch.randn(4, 9, generator=torch.Generator().manual_seed(100 + r)) for r in range(world)]
hooks = {"allreduce": (None, default_hooks.allreduce_hook), "fp16": (None, default_hooks.fp16_compress_hook),
         "device_state": (DeviceScale(), scaled_allreduce)}
out = {"rank": rank}
for name, (state, hook) in hooks.items():
    model = make().to("neuron")
    ddp = DDP(model)
    ddp.register_comm_hook(state, hook)
    ref = make()
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    try:
        diffs = []
        for step in range(2):
            x, y = data[rank][:, :8].to("neuron"), data[rank][:, 8:].to("neuron")
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            full = torch.cat(data)
            torch.nn.functional.mse_loss(ref(full[:, :8]), full[:, 8:]).backward()
            diffs.append(max((p.grad.cpu() - q.grad).abs().max().item() for p, q in zip(model.parameters(), ref.parameters())))
            opt.step(); opt.zero_grad(); ref_opt.step(); ref_opt.zero_grad()
        out[name] = {"ref_diff": max(diffs), "params": [p.detach().cpu().flatten().tolist() for p in model.parameters()]}
    except Exception as e:
        out[name] = {"error": f"{type(e).__name__}: {e}"[:500]}
result(**out)
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def run(sim_build, tmp_path_factory):
    return torchrun(SCRIPT, tmp_path_factory.mktemp("ddp_comm_hooks"))


@pytest.mark.parametrize("hook, tolerance", [("allreduce", 1e-6), ("fp16", 1e-2), ("device_state", 1e-6)])
def test_ddp_with_a_comm_hook_trains_like_the_cpu_reference(run, hook, tolerance):
    assert run.proc.returncode == 0, run.proc.stderr[-4000:]
    results = run.results()
    assert sorted(results) == [0, 1], run.proc.stdout[-2000:]
    per_rank = [results[r][hook] for r in (0, 1)]
    assert all("error" not in r for r in per_rank), per_rank
    assert all(r["ref_diff"] <= tolerance for r in per_rank), [r["ref_diff"] for r in per_rank]
    assert per_rank[0]["params"] == per_rank[1]["params"]  # both ranks took the same step
