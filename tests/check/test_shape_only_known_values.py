"""Values a shape-only run knows without computing the model, run as a user's script (real run vs shape-only,
NEURON_PORT_SIMULATE=1 and NEURON_PORT_SHAPE_ONLY=1):

- a greedy decoding loop whose stop flags are built on the device (``torch.full`` / ``torch.ones`` of a known
  value, an end-of-token test it cannot know or'ed with a length test it can, ``unfinished & ~done``) stops
  after as many steps as the real run; it used to loop until killed (every factory's values were unknown, so
  ``unfinished.max() == 0`` was a placeholder ``False`` forever);
- a write through a view forgets what was known of the tensor it views;
- a Hugging Face model's attention takes the real run's path (transformers counted every FakeTensor as a
  trace and built an explicit causal mask where a real run passes ``is_causal=True`` to SDPA).

- a mixture-of-experts layer's grouped matmul runs (``F.grouped_mm``'s kernel reads its group offsets on
  the host with ``aten::item``, which reached FakeTensorMode as an error instead of a host read).

- a number a composite kernel passes as a 0-dim "wrapped number" (``int_tensor % 8``: ``remainder.Scalar``
  calls ``remainder.Tensor``) reaches the op as a tensor, not as a Python int its schema refuses;
- a bool known under the finite assumption has known values (``x.isnan().sum() == 0`` is true, as a
  quantizer's sanity check expects), and keeps what is known through views and reshapes (a
  ``torch.distributions`` parameter check of a large tensor);
- a 0-d device tensor formatted into a string (``f"expert_{idx}"``) reads its value as ``.item()`` does
  (``Tensor.__format__`` does so for a plain tensor only: a FakeTensor gave its repr).

Found by the zoo's shape-only sweep (bench/zoo, issue 36 item 5): every causal LM's ``generate`` hung, and
the MoE models of transformers' grouped-matmul experts failed.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_script

pytestmark = pytest.mark.slow

DECODE = """
import torch
import torch.nn as nn

torch.manual_seed(0)
vocab, max_len = 50, 9
model = nn.Sequential(nn.Embedding(vocab, 16), nn.Linear(16, vocab)).to("neuron")
ids = torch.randint(0, vocab, (2, 4)).to("neuron")
stop_ids = torch.tensor([vocab]).to("neuron")  # a token argmax never picks: only the length stops the loop
unfinished = torch.ones(2, dtype=torch.long, device="neuron")
steps = 0
with torch.no_grad():
    while True:
        next_ids = model(ids[:, -1]).argmax(-1)
        ids = torch.cat([ids, next_ids[:, None]], dim=-1)
        done = torch.full((2,), False, device="neuron")
        done = done | torch.isin(next_ids, stop_ids)
        done = done | torch.full((2,), ids.shape[1] >= max_len, device="neuron")
        unfinished = unfinished & ~done
        steps += 1
        if unfinished.max() == 0 or steps == 50:
            break
print("steps", steps, "length", ids.shape[1])

counts = torch.tensor([1, 2, 3, 4]).to("neuron")
counts[2:].add_(torch.randn(2, device="neuron").round().long())  # unknown values written through a view
print("total", counts.sum().item())  # a placeholder (0) in a shape-only run: never the stale 10
"""

ATTENTION = """
import json
import torch
import neuron_backend
from transformers import LlamaConfig, LlamaForCausalLM

config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
torch.manual_seed(0)
model = LlamaForCausalLM(config).eval().to("neuron")
ids = torch.randint(0, 128, (2, 8))
with torch.no_grad():
    model(input_ids=ids.to("neuron"), attention_mask=torch.ones_like(ids).to("neuron"))
sdpa = sorted(json.dumps(e["signature"]) for e in neuron_backend.stats()["eager_compiles"]
              if "scaled_dot_product" in e["op"])
print("SDPA", json.dumps(sdpa))
"""

MOE = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Experts(nn.Module):
    def __init__(self, experts=4, dim=16, hidden=32):
        super().__init__()
        self.router = nn.Linear(dim, experts)
        self.up = nn.Parameter(torch.randn(experts, dim, hidden) * 0.1)
        self.down = nn.Parameter(torch.randn(experts, hidden, dim) * 0.1)

    def forward(self, x):
        expert = self.router(x).argmax(-1)
        order = expert.argsort()
        offs = torch.cumsum(torch.bincount(expert, minlength=self.up.shape[0]), 0).to(torch.int32)
        h = F.grouped_mm(x[order], self.up, offs=offs).relu()
        out = torch.empty_like(x)
        out[order] = F.grouped_mm(h, self.down, offs=offs)
        return out

torch.manual_seed(0)
layer = Experts().to("neuron")
x = torch.randn(8, 16).to("neuron")
layer(x).sum().backward()
print("moe", tuple(layer.up.grad.shape))
"""

CHECKS = """
import torch

scores = torch.randn(2, 8).to("neuron")
offsets = (torch.randn(8) * 5).long().to("neuron") % scores.shape[1]  # int tensor % int
stable = scores.shape[1] * scores + offsets
x_min = torch.randn(4, 8).to("neuron").min()
assert x_min.isnan().sum() == 0, "NaN detected"
print("checks", tuple(stable.shape), stable.dtype)
# torch.distributions validates its parameters: (logits == logits) reshaped, then all() (above 4096 elements:
# no values kept, only "every element is true", which a reshape keeps)
entropy = torch.distributions.Categorical(logits=torch.randn(4, 64, 260).to("neuron")).entropy()
print("entropy", tuple(entropy.shape))
# a 0-d device tensor formatted into a key reads its value (NLLB-MoE: self[f"expert_{expert_idx[0]}"])
experts = {f"expert_{i}": i for i in range(4)}
hit = torch.tensor([[2]]).to("neuron")
print("expert", experts[f"expert_{hit[0][0]}"])
"""


def run(tmp_path, script: str, shape_only: bool) -> str:
    return run_script(tmp_path, script, shape_only)


def test_a_decoding_loop_stops_as_the_real_run_does(tmp_path, sim_build):
    real = run(tmp_path, DECODE, shape_only=False)
    fake = run(tmp_path, DECODE, shape_only=True)
    assert "steps 5 length 9" in real
    assert "steps 5 length 9" in fake
    assert "total 0" in fake


def test_hugging_face_attention_takes_the_real_path(tmp_path, sim_build):
    pytest.importorskip("transformers")
    real = run(tmp_path, ATTENTION, shape_only=False)
    fake = run(tmp_path, ATTENTION, shape_only=True)
    signatures = json.loads(real.split("SDPA ", 1)[1])
    assert signatures and "True" in signatures[0]  # is_causal=True, no mask tensor
    assert json.loads(fake.split("SDPA ", 1)[1]) == signatures


def test_a_grouped_matmul_of_experts_runs(tmp_path, sim_build):
    assert "moe (4, 16, 32)" in run(tmp_path, MOE, shape_only=False)
    assert "moe (4, 16, 32)" in run(tmp_path, MOE, shape_only=True)


def test_numbers_from_composite_kernels_and_finite_checks(tmp_path, sim_build):
    real = run(tmp_path, CHECKS, shape_only=False)
    assert "checks (2, 8) torch.float32" in real
    assert run(tmp_path, CHECKS, shape_only=True) == real
