"""Mixture-of-experts layers in a shape-only run do the experts' work of a real run: the tokens per expert
are a histogram of the router's choices (``torch.histc``, as transformers' grouped-matmul experts count
them, or ``torch.bincount`` with ``minlength``), which nobody knows in a shape-only run; the router's ``topk``
is taken as a balanced choice (an even split; a histogram of values still unknown is taken as even too), so
the grouped matmul's groups (``cumsum`` of the counts, read on the host by its kernel) total the real rows. They used to be
empty: the offsets read as placeholders (0), every ``mm`` had 0 rows and an MoE model's experts cost
nothing in the estimate. Run as a user's script, real run vs shape-only (NEURON_PORT_SIMULATE=1 and
NEURON_PORT_SHAPE_ONLY=1): a small MoE block written for the test, and a tiny Mixtral of transformers.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import simulator_env

pytestmark = pytest.mark.slow

SCRIPT = """
import json
import torch
import torch.nn as nn
import neuron_backend

class MoE(nn.Module):
    def __init__(self, experts=4, top_k=2, dim=16, hidden=24):
        super().__init__()
        self.experts, self.top_k = experts, top_k
        self.router = nn.Linear(dim, experts, bias=False)
        self.up = nn.Parameter(torch.randn(experts, dim, hidden) * 0.1)
        self.down = nn.Parameter(torch.randn(experts, hidden, dim) * 0.1)

    def forward(self, x):
        weights, chosen = self.router(x).softmax(-1).topk(self.top_k, dim=-1)
        expert, order = chosen.reshape(-1).sort()
        tokens = order // self.top_k
        per_expert = torch.histc(expert.float(), bins=self.experts, min=0, max=self.experts - 1)
        offsets = torch.cumsum(per_expert, 0, dtype=torch.int32)
        h = torch._grouped_mm(x[tokens], self.up, offs=offsets).relu()
        offsets = torch.bincount(expert, minlength=self.experts).cumsum(0).to(torch.int32)  # the same, counted so
        y = torch._grouped_mm(h, self.down, offs=offsets) * weights.reshape(-1)[order, None]
        return torch.zeros_like(x).index_add(0, tokens, y)

torch.manual_seed(0)
layer = MoE().to("neuron")
x = torch.randn(10, 16, device="neuron")  # made on the device: values a shape-only run does not know
layer(x).sum().backward()

from transformers import MixtralConfig, MixtralForCausalLM

config = MixtralConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)
model = MixtralForCausalLM(config).to("neuron")
ids = torch.randint(0, 64, (2, 6), device="neuron")
model(input_ids=ids, labels=ids).loss.backward()

stats = neuron_backend.stats()
print("STATS", json.dumps({"truncated": stats["eager_compiles_truncated"],
                           "mm": [[e["site"]["line"], e["signature"], e["calls"]] for e in stats["eager_compiles"]
                                  if e["op"] == "aten::mm.out"],
                           "shape_only": [e for e in stats["events"] if e.get("kind") == "shape_only"]}))
"""
MOE_LINES = range(15, 30)  # the MoE block in SCRIPT, its forward and backward lines; later lines are Mixtral's


def run(tmp_path, shape_only: bool) -> dict:
    path = tmp_path / ("shape_only.py" if shape_only else "real.py")
    path.write_text(SCRIPT)
    env = simulator_env(NEURON_PORT_SIMULATE="1", NEURON_PORT_SHAPE_ONLY="1" if shape_only else "0",
                        TRANSFORMERS_VERBOSITY="error")
    proc = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("STATS ", 1)[1])


def _dims(text: str) -> list[int]:
    return [int(d) for d in re.match(r"\w+\[([\d,]*)\]", text).group(1).split(",") if d]


def flops(stats: dict, in_block: bool) -> tuple[int, list[int]]:
    """The experts' matmul FLOPs (the grouped matmul's kernel calls ``mm`` with ``out=`` once per group)
    and the group sizes (rows of the forward up-projection's groups)."""
    assert not stats["truncated"]
    total, rows = 0, []
    for line, signature, calls in stats["mm"]:
        if (line in MOE_LINES) != in_block:
            continue
        (m, k), (_, n) = _dims(signature[0]), _dims(signature[1])
        total += 2 * m * k * n * calls
        if in_block and (k, n) == (16, 24):
            rows += [m] * calls
    return total, rows


def test_experts_of_a_shape_only_run_do_the_real_runs_work(tmp_path, sim_build):
    pytest.importorskip("transformers")
    real, fake = run(tmp_path, shape_only=False), run(tmp_path, shape_only=True)
    for in_block in (True, False):  # the block written here; transformers' Mixtral experts
        real_flops, fake_flops = flops(real, in_block)[0], flops(fake, in_block)[0]
        assert real_flops > 0
        assert fake_flops == real_flops  # the split differs (random routing), the work does not
    # the block's 10 tokens x top-2 = 20 rows over 4 experts, 5 each: the forward's up-projection and the
    # backward's gradient through the down-projection (the same signatures)
    real_rows, fake_rows = flops(real, True)[1], flops(fake, True)[1]
    assert sum(real_rows) == 2 * 20 and fake_rows == [5] * 8
    splits = [e for e in fake["shape_only"] if e["event"] == "size_rule" and e["rule"] == "even_split"]
    # listed at the router: its topk's choice is the assumption (sizes.balanced_choice), the histogram and the
    # count of those choices are then exact (before, each was an even split of values nobody knew)
    assert {(e["op"], e["shape"][0], e["site"]["line"]) for e in splits if e["site"]["file"].endswith(".py")
            and e["site"]["line"] in MOE_LINES} == {("aten::topk", 4, 16)}
    assert not real["shape_only"]
