"""The neuron generator's state is TorchNeuron's 16-byte Philox state (seed, offset) (issue 36): DTensor's
random ops on a `neuron` mesh (FSDP2 meta init + reset_parameters, torch.distributed.tensor.randn) set the
offsets, each rank's shard is drawn at the offset DTensor gives it, and saving and restoring the state
reproduces the draws (torch.neuron.get/set_rng_state, fork_rng, torch.utils.checkpoint, torch.save)."""

from __future__ import annotations

import json

import pytest

from ..conftest import PRELUDE
from .conftest import torchrun

pytestmark = pytest.mark.slow

STATE = PRELUDE + """
import io
from torch.utils.checkpoint import checkpoint
out = {}
def state():
    return torch.neuron.get_rng_state().view(torch.int64).tolist()
torch.manual_seed(7)
s = torch.neuron.get_rng_state()
out["size"], out["dtype"], out["seeded"] = s.numel(), str(s.dtype), state()
a = torch.randn(5, device="neuron")
out["after_5"] = state()
torch.rand(2, 3, device="neuron")
out["after_6_more"] = state()
torch.neuron.set_rng_state(s)
out["restored_draw"] = torch.equal(torch.randn(5, device="neuron").cpu(), a.cpu())
# a user's checkpoint: the state saved with torch.save and loaded back
buf = io.BytesIO(); torch.save({"neuron_rng": s}, buf); buf.seek(0)
torch.neuron.set_rng_state(torch.load(buf)["neuron_rng"])
out["loaded_draw"] = torch.equal(torch.randn(5, device="neuron").cpu(), a.cpu())
# an 8-byte state is a seed alone (offset 0), as TorchNeuron accepts
torch.neuron.set_rng_state(torch.tensor([7], dtype=torch.int64).view(torch.uint8))
out["seed_only"] = state()
torch.neuron.set_rng_state(torch.tensor([7, 12], dtype=torch.int64).view(torch.uint8))
out["initial_seed"] = torch.neuron.initial_seed()
try:
    torch.neuron.set_rng_state(torch.get_rng_state())
    out["cpu_state"] = "no error"
except RuntimeError as e:
    out["cpu_state"] = str(e).splitlines()[0]
with torch.random.fork_rng(device_type="neuron"):
    torch.rand(100, device="neuron")
out["after_fork"] = state()
g = torch.Generator(device="neuron").manual_seed(3)
torch.rand(9, generator=g, device="neuron")
out["user_generator"] = g.get_state().view(torch.int64).tolist()
# torch.utils.checkpoint saves and restores the device's RNG state: the recompute draws what the forward drew
x = torch.randn(16, 16, device="neuron", requires_grad=True)
def f(t):
    return (t * torch.rand_like(t)).sin()
torch.manual_seed(1); f(x).sum().backward(); ref = x.grad.cpu().clone(); x.grad = None
for reentrant in (False, True):
    torch.manual_seed(1); checkpoint(f, x, use_reentrant=reentrant).sum().backward()
    out[f"checkpoint_reentrant_{reentrant}"] = torch.equal(x.grad.cpu(), ref); x.grad = None
result(out)
"""


def test_state_is_seed_and_offset_and_restores_the_draws(run_sim):
    r = run_sim(STATE)
    out = r.result
    assert out["size"] == 16 and out["dtype"] == "torch.uint8"
    assert out["seeded"] == [7, 0]
    assert out["after_5"] == [7, 8]  # 5 elements, rounded up to a multiple of 4 as CUDA's Philox does
    assert out["after_6_more"] == [7, 16]
    assert out["restored_draw"] is True and out["loaded_draw"] is True
    assert out["seed_only"] == [7, 0] and out["initial_seed"] == 7
    assert "neuron RNG state is wrong size: expected 16 bytes (seed, offset) or 8 (seed), got 5056" in out["cpu_state"]
    assert out["after_fork"] == [7, 12]
    assert out["user_generator"] == [3, 12]
    assert out["checkpoint_reentrant_False"] is True and out["checkpoint_reentrant_True"] is True


DTENSOR = """\
import json, os, torch, torch.distributed as dist, torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard, randn
def result(**kw): os.write(1, ("RESULT:" + json.dumps(kw) + "\\n").encode())  # one write: ranks share the pipe
def state():
    return torch.neuron.get_rng_state().view(torch.int64).tolist()
def draw_at(seed, offset, *shape):
    # what a single device draws from (seed, offset): the numbers DTensor's offsets define for a shard
    with torch.random.fork_rng(device_type="neuron"):
        torch.neuron.set_rng_state(torch.tensor([seed, offset], dtype=torch.int64).view(torch.uint8))
        return torch.randn(*shape, device="neuron").cpu()
mesh = init_device_mesh("neuron", (2,))
rank = dist.get_rank()
torch.manual_seed(0)
t = randn(8, 4, device_mesh=mesh, placements=[Shard(0)])  # rank r holds rows 4r..4r+3: offset 16 r
local = t.to_local().cpu()
after_sharded = state()
r = randn(4, 4, device_mesh=mesh, placements=[Replicate()])
after_replicated = state()
# FSDP2's meta-device init: parameters become DTensors on the mesh, reset_parameters draws on them
torch.manual_seed(0)
with torch.device("meta"):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
fully_shard(model, mesh=mesh)
model.to_empty(device="neuron")
for m in model:
    if isinstance(m, nn.Linear):
        m.reset_parameters()
w = model[0].weight.full_tensor().cpu()
bound = 1 / 8 ** 0.5  # kaiming_uniform_(a=sqrt(5)) on fan_in 8
result(rank=rank, local=local.tolist(), expected=draw_at(0, 16 * rank, 4, 4).tolist(),
       after_sharded=after_sharded, replicated=r.to_local().cpu().tolist(), after_replicated=after_replicated,
       weight=w.tolist(), weight_in_bound=bool(w.abs().max() <= bound), weight_state=state())
dist.destroy_process_group()
"""


def test_dtensor_random_ops_on_a_two_rank_neuron_mesh(sim_build, tmp_path):
    run = torchrun(DTENSOR, tmp_path)
    assert run.proc.returncode == 0, run.proc.stderr[-5000:]
    res = run.results()
    assert sorted(res) == [0, 1]
    for r in res.values():
        assert r["local"] == r["expected"]  # the shard is the single-device draw at DTensor's offset
        assert r["after_sharded"] == [0, 32]  # every rank ends at the whole tensor's offset
        assert r["after_replicated"] == [0, 48]
        assert r["weight_in_bound"] is True
    assert res[0]["local"] != res[1]["local"]  # two shards, two different draws
    assert res[0]["replicated"] == res[1]["replicated"]
    # FSDP2 init: every rank sees the same full weight; its two shards (rows 0-7, 8-15) are different draws
    assert res[0]["weight"] == res[1]["weight"]
    assert res[0]["weight"][:8] != res[0]["weight"][8:]
    assert res[0]["weight_state"] == res[1]["weight_state"]


FAKE_WORLD = """\
import os, torch, torch.nn as nn, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import randn, Shard

mesh = init_device_mesh("neuron", (int(os.environ["WORLD_SIZE"]),))
torch.manual_seed(0)
with torch.device("meta"):
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
for layer in model:
    if isinstance(layer, nn.Linear):
        fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
model.to_empty(device="neuron")
for m in model:
    if isinstance(m, nn.Linear):
        m.reset_parameters()
nn.init.normal_(model[0].weight, std=0.02)
t = randn(64, 32, device_mesh=mesh, placements=[Shard(0)])
model(torch.randn(8, 64, device="neuron")).square().mean().backward()
print("done", dist.get_rank(), dist.get_world_size(), tuple(t.to_local().shape))
"""


def test_dtensor_random_init_in_a_shape_only_fake_world(tmp_path, cli, sim_build):
    (tmp_path / "train.py").write_text(FAKE_WORLD)
    result = cli("check", str(tmp_path), "--shape-only", "--world-size", "8", "--output-format", "json",
                 "--", "python", "train.py")
    doc = json.loads(result.stdout)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    assert "done 0 8 (8, 32)" in result.stderr
