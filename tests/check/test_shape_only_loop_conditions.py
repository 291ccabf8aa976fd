"""A loop whose condition joins a test nobody knows with one the run knows (neuron_backend/shape_only/neutral.py),
run as a user's script, real (simulated) and shape-only:

- transformers' beam search (``generate(num_beams=...)``) continues while ``improvement_possible &
  exists_open_beam & valid_continuations``: the first compares scores nobody knows, the last is the length test.
  Read as a placeholder ``False``, the loop stopped after one step and ``generate`` returned a (2, 0) tensor where
  the real run returns (2, 9). Now the unknown operand of ``&`` is taken as its identity, the known length decides:
  the same number of model calls and the same output shape. This needed two more known values: beam ids gathered
  with ``take_along_dim`` (its composite kernel passes ``% n`` as a wrapped number, which the CPU call of
  ``remainder.Tensor`` refused) and each step's ids written into a view of the beam-id buffer
  (``buf[:, :, i] = ids``, an overwrite of a view of a known tensor);
- a loop whose condition has no known operand (``if (err < tol).item(): break``) is bounded by its own count, as
  before: the rule gives no value to an unknown bool alone; nor does a mask made once before the loop beyond
  the loop's first read (``active = active & (err > tol)``: nothing known changes, so nothing known bounds it).
"""

from __future__ import annotations

import pytest

from conftest import run_script, tagged_json

pytestmark = pytest.mark.slow

BEAM = """
import json
import torch
from transformers import LlamaConfig, LlamaForCausalLM

config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                     eos_token_id=127, pad_token_id=0)
torch.manual_seed(0)
model = LlamaForCausalLM(config).eval().to("neuron")
calls = []
model.register_forward_hook(lambda *a: calls.append(1))
ids = torch.randint(1, 127, (2, 4)).to("neuron")
with torch.no_grad():
    out = model.generate(ids, attention_mask=torch.ones_like(ids), num_beams=2, max_new_tokens=5, do_sample=False)
print("BEAM", json.dumps({"shape": list(out.shape), "calls": len(calls)}))
"""

UNKNOWN = """
import json
import torch

x = torch.randn(8, device="neuron")
unknown_steps = 0
for _ in range(6):  # its own bound: the only one a loop nobody can decide has
    x = x * 0.5
    unknown_steps += 1
    if bool((x.abs().max() < 1e-3) & (x.abs().max() < 1e-3)):  # two unknown operands: no known one
        break
known_steps = 0
# a known bound beside an unknown test (a stopping criterion's length flag, as transformers builds it)
while bool((x.abs().max() > 1e-30) & torch.full((), known_steps < 4, device="neuron")):
    x = x * 0.5
    known_steps += 1
# a mask made once, then joined with unknown tests only: the known start decides the first read alone
active = torch.ones(8, dtype=torch.bool, device="neuron")
mask_steps = 0
while mask_steps < 50:
    x = x * 0.5
    mask_steps += 1
    active = active & (x.abs() > 1e-30)
    if not bool(active.any()):
        break
print("LOOPS", json.dumps({"unknown": unknown_steps, "known": known_steps, "mask": mask_steps}))
"""


def test_beam_search_generates_as_the_real_run(tmp_path, sim_build):
    pytest.importorskip("transformers")
    real = tagged_json(run_script(tmp_path, BEAM, shape_only=False), "BEAM")["BEAM"]
    fake = tagged_json(run_script(tmp_path, BEAM, shape_only=True), "BEAM")["BEAM"]
    assert real == {"shape": [2, 9], "calls": 5}
    assert fake == real


def test_a_condition_with_no_known_operand_reads_false(tmp_path, sim_build):
    real = tagged_json(run_script(tmp_path, UNKNOWN, shape_only=False), "LOOPS")["LOOPS"]
    fake = tagged_json(run_script(tmp_path, UNKNOWN, shape_only=True), "LOOPS")["LOOPS"]
    assert real == {"unknown": 6, "known": 4, "mask": 50}
    # the unknown test reads False (the loop's own bound ends it); the known bound ends the second; the mask made
    # before the loop decides its first read only (not a bound: without that, the loop ran to its guard, 50, and
    # a `while True` would never end)
    assert fake == {"unknown": 6, "known": 4, "mask": 2}
