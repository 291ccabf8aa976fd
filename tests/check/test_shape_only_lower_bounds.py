"""Host reads respect the ranges the program put on the values (neuron_backend/shape_only/bounds.py):
torchvision's keypoint head clamps its boxes' widths to at least 1, takes their ceiling and reads each on the host
as an output size and a divisor (a placeholder 0 made keypointrcnn fail shape-only: `interpolate` to size 0, a
division by zero in the fake upsampling); torch.distributions checks a Categorical sample against its support (a
placeholder False raised "Expected value argument ... to be within the support": cleanrl's PPO)."""

from __future__ import annotations

import json

import pytest
from conftest import run_script, tagged_json

pytestmark = pytest.mark.slow

SCRIPT = """
import json, torch
import torch.nn.functional as F
torch.manual_seed(0)
rois = torch.rand(3, 4, device="neuron") * 8                      # boxes nobody knows shape-only
widths = (rois[:, 2] - rois[:, 0]).clamp(min=1)
widths_ceil = widths.ceil()
rows = []
for i in range(len(rois)):
    n = int(widths_ceil[i].item())                                 # a size and a divisor
    up = F.interpolate(torch.ones(1, 1, 4, 4, device="neuron"), size=(n, n), mode="bicubic", align_corners=False)
    rows.append([n >= 1, list(up.shape[:2]), (widths[i] / n).dim()])
low = torch.rand(2, device="neuron").clamp_min(2.5).floor().to(torch.int64).cpu()
from torch.distributions import Categorical
d = Categorical(logits=torch.randn(2, 3, device="neuron"))
action = d.sample()
picked = torch.randint(3, 7, (4,), device="neuron")
print("CAT " + json.dumps([list(d.log_prob(action).shape), int(picked[1].item()) in range(3, 7),
                           bool(((picked >= 3) & (picked < 7)).all()), bool((picked > 6).any())]))
buffer = torch.zeros((4, 2), device="neuron")                     # a rollout buffer (cleanrl's PPO)
for step in range(4):
    buffer[step] = Categorical(logits=torch.randn(2, 3, device="neuron")).sample()
later = Categorical(logits=torch.randn(8, 3, device="neuron"))
print("BUF " + json.dumps(list(later.log_prob(buffer.reshape(-1).long()[torch.arange(8, device="neuron")]).shape)))
print("ROWS " + json.dumps(rows))
print("LOW " + json.dumps(low.ge(2).all().item()))
"""


def test_host_reads_of_clamped_and_sampled_values_stay_in_their_range(sim_build, tmp_path):
    real = tagged_json(run_script(tmp_path, SCRIPT, shape_only=False), "ROWS", "LOW", "CAT", "BUF")
    fake = tagged_json(run_script(tmp_path, SCRIPT, shape_only=True), "ROWS", "LOW", "CAT", "BUF")
    assert real["ROWS"] == [[True, [1, 1], 0]] * 3
    assert real["CAT"] == [[2], True, True, False] and real["BUF"] == [8]
    assert fake == real
