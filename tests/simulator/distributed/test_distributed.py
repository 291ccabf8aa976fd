"""torch.distributed with backend="neuron" on the simulated device (issue 3, item 9): 2-rank torchrun runs."""

from __future__ import annotations

import pytest

from .conftest import torchrun

pytestmark = pytest.mark.slow

DDP = """\
import json, os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
def result(**kw): os.write(1, ("RESULT:" + json.dumps(kw) + "\\n").encode())  # one write: ranks share the pipe
dist.init_process_group(backend="neuron")  # INIT
rank, world = dist.get_rank(), dist.get_world_size()
def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
data = [torch.randn(4, 9, generator=torch.Generator().manual_seed(100 + r)) for r in range(world)]
model = make().to("neuron")
ddp = DDP(model)  # DDP WRAP
x, y = data[rank][:, :8].to("neuron"), data[rank][:, 8:].to("neuron")
loss = torch.nn.functional.mse_loss(ddp(x), y)
loss.backward()  # BACKWARD
grads = [p.grad.cpu() for p in model.parameters()]
# single-process reference on the CPU: the whole global batch, no DDP
ref = make()
full = torch.cat(data)
torch.nn.functional.mse_loss(ref(full[:, :8]), full[:, 8:]).backward()
ref_match = all(torch.allclose(g, p.grad, atol=1e-6) for g, p in zip(grads, ref.parameters()))
gathered = [None] * world
dist.all_gather_object(gathered, [g.tolist() for g in grads])
t = torch.full((3,), float(rank + 1), device="neuron")
dist.all_reduce(t)  # ALL_REDUCE
dist.barrier()
errors = {}
checks = {
    "send": lambda: dist.send(torch.ones(2, device="neuron"), dst=1 - rank),  # SEND
    "recv": lambda: dist.recv(torch.ones(2, device="neuron"), src=1 - rank),
    "isend": lambda: dist.isend(torch.ones(2, device="neuron"), dst=1 - rank),
    "irecv": lambda: dist.irecv(torch.ones(2, device="neuron"), src=1 - rank),
    "a2a_uneven": lambda: dist.all_to_all_single(torch.empty(3, device="neuron"), torch.ones(3, device="neuron"), [1, 2], [2, 1]),  # UNEVEN
    "a2a_world2": lambda: dist.all_to_all([torch.empty(1, device="neuron")] * 2, [torch.ones(1, device="neuron")] * 2),
    "barrier_subgroup": lambda: dist.barrier(group=dist.new_group([0, 1])),  # SUBGROUP BARRIER
}
for name, fn in checks.items():
    try:
        fn()
        errors[name] = None
    except Exception as e:
        errors[name] = [type(e).__name__, str(e)]
result(rank=rank, ranks_equal=gathered[0] == gathered[1], ref_match=ref_match, allreduce=t.tolist(),
       grad_device=str(model[0].weight.grad.device), errors=errors)
dist.destroy_process_group()
"""

FSDP_DTENSOR = """\
import json, os, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
def result(**kw): os.write(1, ("RESULT:" + json.dumps(kw) + "\\n").encode())  # one write: ranks share the pipe
mesh = init_device_mesh("neuron", (2,))
rank = dist.get_rank()
def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
model = make().to("neuron")
for layer in model:
    if isinstance(layer, torch.nn.Linear):
        fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
ref = make()
ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
x = torch.randn(6, 8, generator=torch.Generator().manual_seed(7))
for _ in range(2):
    model(x.to("neuron")).pow(2).mean().backward()
    opt.step(); opt.zero_grad()
    ref(x).pow(2).mean().backward()
    ref_opt.step(); ref_opt.zero_grad()
sharded = model[0].weight
full = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}
fsdp_match = all(torch.allclose(full[k], v, atol=1e-5) for k, v in ref.state_dict().items())
big = torch.arange(16., device="neuron").view(4, 4)
d = distribute_tensor(big, mesh, [Shard(0)])
result(rank=rank, fsdp_match=fsdp_match, shard_shape=list(sharded.to_local().shape),
       shard_device=str(sharded.to_local().device), local=d.to_local().cpu().tolist(),
       total=(d * 2).sum().full_tensor().item(),
       replicated=torch.equal(d.redistribute(mesh, [Replicate()]).to_local().cpu(), big.cpu()))
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def ddp_run(sim_build, tmp_path_factory):
    return torchrun(DDP, tmp_path_factory.mktemp("ddp"))


def test_ddp_gradients_match_across_ranks_and_reference(ddp_run):
    assert ddp_run.proc.returncode == 0, ddp_run.proc.stderr[-5000:]
    res = ddp_run.results()
    assert sorted(res) == [0, 1]
    for r in res.values():
        assert r["ranks_equal"] and r["ref_match"]
        assert r["grad_device"] == f"neuron:{r['rank']}"  # each process's core is neuron:<LOCAL_RANK>
        assert r["allreduce"] == [3.0, 3.0, 3.0]


def test_torchneuron_process_group_limits_raise(ddp_run):
    for r in ddp_run.results().values():
        e = r["errors"]
        for p2p in ("send", "recv", "isend", "irecv"):
            assert e[p2p][0] == "NotImplementedError" and "point-to-point" in e[p2p][1], e[p2p]
        assert e["a2a_uneven"][0] == "RuntimeError"
        assert "alltoall_base: Only even split sizes are supported." in e["a2a_uneven"][1]
        assert "unsupported world size 2, supported sizes: 4, 8, 16, or multiples of 32" in e["a2a_world2"][1]
        assert "Barrier is implemented only for default group" in e["barrier_subgroup"][1]
        assert all(msg[1].startswith("[neuron-port simulator] ") for msg in e.values())


def test_per_rank_events_record_collectives_and_limits(ddp_run):
    run = ddp_run
    for rank in (0, 1):
        evs = run.rank_events(rank)
        proc, = [e for e in evs if e["kind"] == "process"]
        assert proc["rank"] == rank and proc["world_size"] == 2 and proc["status"] == "exited"
        dist_evs = [e for e in evs if e["kind"] == "distributed"]
        coll = {(e["op"], e["site"]["line"]): e for e in dist_evs if e["event"] == "collective"}
        ar = coll[("all_reduce", run.line_of("# ALL_REDUCE"))]
        assert ar["count"] == 1 and ar["bytes"] == 12 and ar["group_size"] == 2
        grad_ar = [e for e in dist_evs if e["event"] == "collective" and e["op"] == "all_reduce"
                   and e["site"]["line"] == run.line_of("# BACKWARD")]
        assert grad_ar and grad_ar[0]["bytes"] == (8 * 16 + 16 + 16 + 1) * 4  # DDP's gradient bucket
        assert ("broadcast", run.line_of("# DDP WRAP")) in coll  # DDP's initial parameter broadcast
        unsup = {e["op"]: e for e in dist_evs if e["event"] == "unsupported"}
        assert set(unsup) == {"send", "recv", "isend", "irecv", "all_to_all_single", "all_to_all", "barrier"}
        assert unsup["send"]["error"] == "NotImplementedError" and unsup["send"]["site"]["line"] == run.line_of("# SEND")
        assert unsup["all_to_all_single"]["site"]["line"] == run.line_of("# UNEVEN")
        assert unsup["barrier"]["site"]["line"] == run.line_of("# SUBGROUP BARRIER")
        assert all(e["action"] == "raised" for e in unsup.values())


def test_fsdp2_and_dtensor_on_two_ranks(sim_build, tmp_path):
    run = torchrun(FSDP_DTENSOR, tmp_path)
    assert run.proc.returncode == 0, run.proc.stderr[-5000:]
    res = run.results()
    assert sorted(res) == [0, 1]
    for rank, r in res.items():
        assert r["fsdp_match"] is True
        assert r["shard_shape"] == [8, 8] and r["shard_device"] == f"neuron:{rank}"
        assert r["local"] == [[float(8 * rank + i + 4 * j) for i in range(4)] for j in range(2)]
        assert r["total"] == 240.0 and r["replicated"] is True
    for rank in (0, 1):
        ops = {e["op"] for e in run.rank_events(rank) if e["kind"] == "distributed" and e["event"] == "collective"}
        assert {"all_gather_into_tensor", "reduce_scatter_tensor"} <= ops, ops
