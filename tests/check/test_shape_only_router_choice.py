"""A router's choice in a shape-only run: ``topk`` of scores nobody knows gives indices taken as a balanced
assignment (sizes.balanced_choice; NP911 "data-dependent split", ``even_split``), so what the program builds
from them is computed, not sized at an upper bound or read as placeholders. Run as a user's script, real run
vs shape-only (NEURON_PORT_SIMULATE=1 and NEURON_PORT_SHAPE_ONLY=1):

- an eager experts loop, as transformers' ``experts_implementation="eager"`` and LongCat-Flash's: a one-hot
  mask, ``expert_hit = mask.sum(...).nonzero()``, then ``torch.where(mask[e])`` per expert. It used to take
  the upper bound at every ``where``: every expert got every (token, slot) pair, E times a real run's rows
  (LongCat-Flash at its default size timed out);
- expert sizes from ``scatter`` + ``sum(0)`` + ``.tolist()`` of the choice, then ``split``, as JetMoE's and
  ScatterMoE's gating: the sizes used to be placeholders (0) and ``split_with_sizes`` refused them;
- both above the 4,096 elements other known values are kept to (a one-hot mask of 40 x 2 x 64, zeros of
  1,100 x 4 the choice is scattered into: values that follow from the choice are kept up to 4M, and a
  filled tensor read beside it is made).
"""

from __future__ import annotations

import json

import pytest

from conftest import run_script

pytestmark = pytest.mark.slow

ROUTERS = """
import json
import torch
import torch.nn as nn
import neuron_backend

E, K, DIM = 4, 2, 8

class EagerLoop(nn.Module):
    def __init__(self, hidden=12, experts=E):
        super().__init__()
        self.router = nn.Linear(DIM, experts, bias=False)
        self.up = nn.Parameter(torch.randn(experts, DIM, hidden) * 0.1)

    def forward(self, x):
        weights, chosen = self.router(x).softmax(-1).topk(K, dim=-1)
        mask = torch.nn.functional.one_hot(chosen, num_classes=self.up.shape[0]).permute(2, 1, 0)
        out = torch.zeros(x.shape[0], self.up.shape[-1], device=x.device)
        for e in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero():
            slot, token = torch.where(mask[int(e.item())])
            h = x[token] @ self.up[int(e.item())]
            out = out.index_add(0, token, h * weights[token, slot, None])
        return out

class ScatterSizes(nn.Module):
    def __init__(self, hidden=14):
        super().__init__()
        self.router = nn.Linear(DIM, E, bias=False)
        self.up = nn.Parameter(torch.randn(E, DIM, hidden) * 0.1)

    def forward(self, x):
        logits, chosen = self.router(x).topk(K, dim=1)
        gates = torch.zeros(x.shape[0], E, device=x.device).scatter(1, chosen, 1)
        sizes = gates.long().sum(0).tolist()
        order = chosen.flatten().sort(0)[1]
        rows = x[order // K].split(sizes, dim=0)
        return torch.cat([r @ self.up[e] for e, r in enumerate(rows)])

torch.manual_seed(0)
x = torch.randn(10, DIM, device="neuron")  # made on the device: values a shape-only run does not know
with torch.no_grad():  # the forward's expert matmuls: the rows each expert got
    EagerLoop().to("neuron")(x)
    ScatterSizes().to("neuron")(x)
    # 40 tokens x top-2 over 64 experts: a one-hot mask of 5,120 elements, over the 4,096 of other known values
    EagerLoop(hidden=10, experts=64).to("neuron")(torch.randn(40, DIM, device="neuron"))
    # 1,100 tokens: the zeros the choice is scattered into (4,400 elements) are over that limit too
    ScatterSizes(hidden=6).to("neuron")(torch.randn(1100, DIM, device="neuron"))
stats = neuron_backend.stats()
print("STATS", json.dumps({"eager": [[e["op"], e["site"]["line"], e["signature"], e["calls"]]
                                     for e in stats["eager_compiles"] if e["site"]["file"].endswith(".py")],
                           "shape_only": [e for e in stats["events"] if e.get("kind") == "shape_only"]}))
"""
# each block's expert weight (a signature's site is its first call's)
LOOP, SPLIT, WIDE, WIDE_SPLIT = "f32[8,12]", "f32[8,14]", "f32[8,10]", "f32[8,6]"


def _rows(signature: str) -> int:
    return int(signature[0].split("[", 1)[1].split(",")[0])


def expert_rows(stats: dict, weight: str) -> tuple[list[int], int]:
    """A block's expert matmuls (by their weight): rows of each call (one per expert visited), and the
    nonzero calls of the run (the loop's data-dependent sizes)."""
    rows = []
    for op, _, signature, calls in stats["eager"]:
        if op == "aten::mm" and signature[1] == weight:
            rows += [_rows(signature)] * calls
    nonzero = sum(calls for op, _, _, calls in stats["eager"] if op == "aten::nonzero")
    return sorted(rows), nonzero


def test_an_eager_experts_loop_and_scattered_sizes_follow_the_assumed_choice(tmp_path, sim_build):
    real = json.loads(run_script(tmp_path, ROUTERS, shape_only=False).split("STATS ", 1)[1])
    fake = json.loads(run_script(tmp_path, ROUTERS, shape_only=True).split("STATS ", 1)[1])
    # 10 tokens x top-2 = 20 (token, slot) pairs over 4 experts: 5 each, as many rows in all as the real run
    for block in (LOOP, SPLIT):
        real_rows, fake_rows = expert_rows(real, block)[0], expert_rows(fake, block)[0]
        assert sum(real_rows) == 20, real_rows
        assert fake_rows == [5, 5, 5, 5], (block, fake_rows)  # the upper bound gave [20, 20, 20, 20]
    # 80 pairs over 64 experts: 2 each to the first 16, 1 to the others
    assert sum(expert_rows(real, WIDE)[0]) == 80
    assert expert_rows(fake, WIDE)[0] == [1] * 48 + [2] * 16
    assert sum(expert_rows(real, WIDE_SPLIT)[0]) == 2200 and expert_rows(fake, WIDE_SPLIT)[0] == [550] * 4
    # each loop visits each expert once: one nonzero for expert_hit, one where per expert (the real run's
    # random routing may leave an expert out)
    assert expert_rows(fake, LOOP)[1] == 2 + 4 + 64 >= expert_rows(real, LOOP)[1]
    splits = {(e["op"], e["shape"][0]) for e in fake["shape_only"]
              if e["event"] == "size_rule" and e["rule"] == "even_split"}
    assert splits == {("aten::topk", 4)}
    # listed at the routers, nothing sized at its upper bound, nothing read as a placeholder
    assert not [e for e in fake["shape_only"] if e.get("rule") == "upper_bound" or e["event"] == "placeholder"]
    assert not real["shape_only"]

