"""NP806: bilinear / bicubic / trilinear resampling (``F.interpolate``, ``nn.Upsample``,
``nn.UpsamplingBilinear2d``) and the tables of the calls and modes it checks.
"""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.spec import Invalid, PythonRule, RunPremise, Valid


INTERPOLATE_FUNCS = {  # qualname -> position of mode (None: fixed mode)
    "torch.nn.functional.interpolate": 3,
    "torch.nn.functional.upsample": 3,
    "torch.nn.Upsample": 2,
    "torch.nn.modules.upsampling.Upsample": 2,
}
FIXED_MODE = {
    "torch.nn.functional.upsample_bilinear": "bilinear",
    "torch.nn.UpsamplingBilinear2d": "bilinear",
    "torch.nn.modules.upsampling.UpsamplingBilinear2d": "bilinear",
}
SLOW_MODES = ("bilinear", "bicubic", "trilinear")


class InterpolateMode(PythonRule):
    """Reports bilinear / bicubic / trilinear resampling, which may fall back or be slow on Neuron.

    ## What it does
    Reports ``F.interpolate`` / ``F.upsample`` / ``nn.Upsample`` with ``mode="bilinear"``,
    ``"bicubic"`` or ``"trilinear"`` (keyword or positional), and ``F.upsample_bilinear`` /
    ``nn.UpsamplingBilinear2d``.

    ## Why is this bad?
    Native support for these modes on TorchNeuron is **not confirmed** (its April source has JAX
    implementations for bilinear and bicubic; behaviour on the current release is unknown), and
    resampling ops that lower to gathers are slow on Trainium: ``nn.Upsample(mode="nearest-exact")`` was
    reported to lower to thousands of indirect DMA gathers. An op that falls back runs on the CPU with a
    copy each way.

    ## Example
    ```python
    y = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
    ```
    Use instead, for integer scale factors where nearest is acceptable:
    ```python
    y = x.repeat_interleave(2, dim=-1).repeat_interleave(2, dim=-2)  # then a conv to smooth
    ```
    or keep the op and measure it (``neuron-port check`` reports CPU fallbacks).

    ## Fix safety
    No automatic fix: the numerical result changes with the mode.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (bilinear/bicubic: NOT confirmed; nearest-exact gather report)
    """

    CODE = "NP806"
    RUN_PREMISE = RunPremise("no resampling op fell back to the CPU",
                             fallback_ops=("aten::upsample_*", "aten::_upsample_*"))
    NAME = "interpolate-mode"
    SEVERITY = "warning"
    EFFORT = "low"
    MESSAGE = (
        "{mode} resampling: native support on Neuron is not confirmed (it may fall back to the CPU): "
        "measure it"
    )
    TRIGGERS = ('\\.[ \\t]*(?:interpolate|upsample|Upsample)\\b\\s*\\((?s:.){0,2000}?["\'](?:bilinear|bicubic|trilinear)["\']', 'interpolate(?<!\\winterpolate)\\s*\\((?s:.){0,2000}?["\'](?:bilinear|bicubic|trilinear)["\']', 'upsample(?<!\\wupsample)\\s*\\((?s:.){0,2000}?["\'](?:bilinear|bicubic|trilinear)["\']', 'Upsample(?<!\\wUpsample)\\s*\\((?s:.){0,2000}?["\'](?:bilinear|bicubic|trilinear)["\']', r"interpolate(?<!\winterpolate)\s+as\b", r"upsample(?<!\wupsample)\s+as\b", r"Upsample(?<!\wUpsample)\s+as\b", r"\.[ \t]*(?:upsample_bilinear|UpsamplingBilinear2d)\b", r"upsample_bilinear(?<!\wupsample_bilinear)\s*\(", r"UpsamplingBilinear2d(?<!\wUpsamplingBilinear2d)\s*\(", r"upsample_bilinear(?<!\wupsample_bilinear)\s+as\b", r"UpsamplingBilinear2d(?<!\wUpsamplingBilinear2d)\s+as\b")

    VALID = [
        Valid("import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2)\n"),
        Valid("import torch.nn as nn\nup = nn.Upsample(scale_factor=2, mode='nearest')\n"),
        Valid("import torch.nn.functional as F\ny = F.interpolate(x, size=s, mode=self.mode)\n"),
    ]
    INVALID = [
        Invalid("import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2, mode='bilinear')\n", None),
        Invalid("import torch.nn as nn\nup = nn.Upsample(None, 2, 'bicubic')\n", None),
        Invalid("from torch import nn\nup = nn.UpsamplingBilinear2d(scale_factor=2)\n", None, target="accelerator"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname is None:
            return
        if qualname in FIXED_MODE:
            self.report(node, self.MESSAGE.format(mode=FIXED_MODE[qualname]))
            return
        if qualname not in INTERPOLATE_FUNCS:
            return
        arg = arg_named(node, "mode", INTERPOLATE_FUNCS[qualname])
        mode = string_value(arg.value) if arg is not None else None
        if mode in SLOW_MODES:
            self.report(arg.value, self.MESSAGE.format(mode=mode))
