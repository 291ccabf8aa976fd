"""The host's random stream in a shape-only run (neuron_backend/shape_only/host_stream.py): the draws a real run's
kernels make on the host generator (``native_dropout``'s CPU ``bernoulli_`` mask, one draw per element; SDPA's
dropout seed) are owed and made only when something reads the stream, so a dropout of a real size costs no
host work, and every read sees what a real (simulated) run of the same script sees.

The generator object's own ``get_state()`` is a read the shape-only run does not see (the module docstring):
the script uses it to observe that nothing was drawn while nothing read the stream.
"""

from __future__ import annotations

import pytest

from conftest import run_script, tagged_json

SCRIPT = """
import hashlib, json, os
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint
from torch.utils.data import DataLoader

B, S, D = (int(n) for n in os.environ["SIZES"].split(","))
raw = torch.default_generator  # its own methods: not seen by the shape-only run, so they observe it


def digest(state):
    return hashlib.sha256(state.numpy().tobytes()).hexdigest()[:16]


class Block(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.w = nn.Parameter(torch.ones(D))
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return self.drop(x * self.w)


blocks = nn.Sequential(Block(0.1), Block(0.5), Block(0.1)).to("neuron")
x = torch.zeros(B, S, D, device="neuron", requires_grad=True)
q = torch.zeros(2, 4, 64, 32, device="neuron")


def step():
    h = blocks(x)
    h = F.dropout(h.to(torch.bfloat16), 0.25).float()  # another dtype and p
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)  # a 64-bit seed draw on the host
    (h.sum() + a.sum()).backward()


out = {}
torch.manual_seed(0)
start = raw.get_state()
step()
out["untouched"] = torch.equal(raw.get_state(), start)  # nothing drawn on the host yet
if os.environ.get("READS") == "1":
    out["state"] = digest(torch.get_rng_state())  # a read: what is owed is drawn first
    step()
    out["rand"] = torch.rand(3).tolist()  # a host op's draw
    step()
    torch.manual_seed(5)  # a new state: what was owed before is never seen
    out["after_seed"] = torch.rand(2).tolist()
    step()
    raw.manual_seed(7)  # a reseed through the generator object itself
    out["after_raw_seed"] = torch.rand(2).tolist()
    step()
    with torch.random.fork_rng(devices=[]):
        step()
        out["forked"] = torch.rand(2).tolist()
    out["after_fork"] = torch.rand(2).tolist()
    h = torch.utils.checkpoint.checkpoint(blocks, x, use_reentrant=False)  # reads, restores: recomputes
    h.sum().backward()
    out["after_checkpoint"] = torch.rand(2).tolist()
    step()
    out["batches"] = [b.tolist() for b in DataLoader(list(range(8)), batch_size=4, shuffle=True)]
    step()
    out["randperm"] = torch.randperm(6).tolist()
    step()
    out["final"] = digest(torch.get_rng_state())
print("HOST", json.dumps(out))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory, sim_build):
    out = {}
    for name, shape_only in (("real", False), ("fake", True)):
        tmp = tmp_path_factory.mktemp(name)
        stdout = run_script(tmp, SCRIPT, shape_only, SIZES="8,512,1024", READS="1")
        out[name] = tagged_json(stdout, "HOST")["HOST"]
    return out


@pytest.mark.slow
def test_reads_of_the_host_stream_see_the_real_runs_values(runs):
    real, fake = runs["real"], runs["fake"]
    assert real["untouched"] is False  # the real run's kernels drew on the host
    for key in ("state", "rand", "after_seed", "after_raw_seed", "forked", "after_fork", "after_checkpoint",
                "batches", "randperm", "final"):
        assert fake[key] == real[key], key


@pytest.mark.slow
def test_dropouts_draw_nothing_on_the_host_while_nothing_reads_it(runs):
    assert runs["fake"]["untouched"] is True


@pytest.mark.slow
def test_a_dropout_of_a_real_size_draws_nothing_on_the_host(tmp_path, sim_build):
    # 8 x 2048 x 4096: 67M elements a dropout, four of them in a step (a real run's masks: 268M host draws)
    stdout = run_script(tmp_path, SCRIPT, True, SIZES="8,2048,4096", READS="0")
    assert tagged_json(stdout, "HOST")["HOST"]["untouched"] is True
