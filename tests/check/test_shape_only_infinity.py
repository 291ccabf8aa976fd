"""A value nobody knows is finite shape-only, as its placeholder is (neuron_backend/shape_only/bounds.py): a
best-so-far loss that starts at float("inf") is beaten by the first evaluation, so the checkpoint is saved and
the test step that loads it runs (Chinese-Text-Classification-Pytorch's train loop read `dev_loss < best` as a
placeholder False, never saved, then failed loading the checkpoint; the held-out scoreboard, session 39)."""

from __future__ import annotations

import pytest
from conftest import run_script, tagged_json

pytestmark = pytest.mark.slow

SCRIPT = """
import json, os, torch
if os.path.exists("best.ckpt"):
    os.remove("best.ckpt")  # the other run's, in the same folder
model = torch.nn.Linear(4, 2).to("neuron")
best = float("inf")
saved = 0
for epoch in range(2):
    loss = torch.nn.functional.cross_entropy(model(torch.randn(8, 4, device="neuron")),
                                             torch.randint(0, 2, (8,), device="neuron"))
    if epoch == 0:
        first = [bool(loss < best), bool(loss > float("-inf")), bool(loss == best), bool(loss != best),
                 bool(loss >= float("inf")), bool((loss <= float("inf")).all())]
    if loss < best:
        best = loss
        torch.save(model.state_dict(), "best.ckpt")
        saved += 1
model.load_state_dict(torch.load("best.ckpt"))
print("INF " + json.dumps([first, saved >= 1, os.path.exists("best.ckpt")]))
"""


def test_comparisons_with_an_infinity_are_decided(sim_build, tmp_path):
    real = tagged_json(run_script(tmp_path, SCRIPT, shape_only=False), "INF")
    fake = tagged_json(run_script(tmp_path, SCRIPT, shape_only=True), "INF")
    assert real["INF"] == [[True, True, False, True, False, True], True, True]
    assert fake == real
