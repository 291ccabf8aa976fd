"""A placeholder read respects the lower bound the program put on the values (neuron_backend/shape_only/bounds.py):
torchvision's keypoint head clamps its boxes' widths to at least 1, takes their ceiling and reads each on the host
as an output size and a divisor; a placeholder 0 there made keypointrcnn fail shape-only (`interpolate` to size 0,
a division by zero in the fake upsampling)."""

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
print("ROWS " + json.dumps(rows))
print("LOW " + json.dumps(low.ge(2).all().item()))
"""


def test_a_clamped_value_read_on_the_host_is_at_least_its_bound(sim_build, tmp_path):
    real = tagged_json(run_script(tmp_path, SCRIPT, shape_only=False), "ROWS", "LOW")
    fake = tagged_json(run_script(tmp_path, SCRIPT, shape_only=True), "ROWS", "LOW")
    assert real["ROWS"] == [[True, [1, 1], 0]] * 3
    assert fake == real
