"""NP8xx beyond the per-rule examples: bindings found after their use, dynamic shapes only in compiled
code, channels_last fixes that settle and keep comments, float64 reported once."""

from __future__ import annotations

import json

from neuron_port.rules.registry import rule_by_code
from rule_runs import run_rules as _run, settled as _settled, snippet as _src


# -- bindings and compiled code --------------------------------------------------------------------

def test_mha_binding_after_use_and_other_callables():
    out = _run("""
        import torch.nn as nn
        class Block(nn.Module):
            def forward(self, x, mask):
                y = self.ffn(x, attn_mask=mask)
                return self.attn(x, x, x, attn_mask=mask)[0]
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(64, 4, batch_first=True)
    """, [rule_by_code("NP807")])
    assert [f.line for f in out.findings] == [5]


MHA_SCRIPT = """\
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, batch_first):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 2, batch_first=batch_first)

    def forward(self, x, mask):
        return self.attn(x, x, x, attn_mask=mask)[0]


model = Encoder({batch_first}).eval()
with torch.no_grad():
    y = model(torch.randn(2, 3, 16), torch.zeros(3, 3, dtype=torch.bool))
"""


def test_mha_reported_only_where_pytorch_can_take_the_native_path(tmp_path, cli):
    """batch_first=False keeps PyTorch's MultiheadAttention.forward off the native fast path: no finding,
    and `rewrite --check` passes; with batch_first=True the path is possible (eval mode and no grad are
    known only at run time): a warning, not an error."""
    script = tmp_path / "encoder.py"
    script.write_text(MHA_SCRIPT.replace("{batch_first}", "False").replace("batch_first=batch_first",
                                                                           "batch_first=False"))
    result = cli("rewrite", "--check", "--select", "NP807", "--output-format", "json", str(script))
    assert json.loads(result.stdout)["findings"] == [] and result.returncode == 0, result.stdout
    script.write_text(MHA_SCRIPT.replace("{batch_first}", "True").replace("batch_first=batch_first",
                                                                          "batch_first=True"))
    result = cli("rewrite", "--check", "--select", "NP807", "--output-format", "json", str(script))
    findings = json.loads(result.stdout)["findings"]
    assert [(f["code"], f["line"], f["severity"]) for f in findings] == [("NP807", 11, "warning")], result.stdout


def test_compiled_dynamic_shapes_only_in_compiled_code():
    out = _run("""
        import torch
        def helper(x):
            return x[x > 0]
        @torch.compile
        def step(x, mask):
            keep = x[mask]
            return torch.where(mask)[0], keep.unique()
        class Net(torch.nn.Module):
            def forward(self, x):
                return x.nonzero()
        net = torch.compile(Net())
    """, [rule_by_code("NP811")])
    assert [f.line for f in out.findings] == [6, 7, 7, 10]


# -- fixes -----------------------------------------------------------------------------------------

def test_channels_last_fixes_settle_and_keep_comments():
    out = _settled("""
        import torch
        model = model.to(memory_format=torch.channels_last)  # GPU speed-up
        # converts the batch
        x = x.to(memory_format=torch.channels_last)
        buf = torch.empty_like(x, memory_format=torch.channels_last)
        if x.is_contiguous(memory_format=torch.channels_last):
            pass
    """, [rule_by_code("NP808")], unsafe_fixes=True)
    assert out.code == _src("""
        import torch
        # converts the batch
        x = x
        buf = torch.empty_like(x)
        if x.is_contiguous(memory_format=torch.channels_last):
            pass
    """)


def test_float64_set_default_dtype_reported_once():
    out = _run("import torch\ntorch.set_default_dtype(torch.float64)\n", [rule_by_code("NP801")])
    assert len(out.findings) == 1


def test_nested_tensor_reported_once_per_call():
    out = _run("""
        import torch
        nt = torch.nested.nested_tensor([a, b], layout=torch.jagged)
        layout = torch.jagged
    """, [rule_by_code("NP804")])
    assert [f.line for f in out.findings] == [2, 3]


BETA_SCHEDULE = """\
import math

import torch
from torch import nn


def cosine_betas(steps):
    t = torch.linspace(0, steps, steps + 1, dtype=torch.float64) / steps
    alphas_cumprod = torch.cos((t + 0.008) / 1.008 * math.pi * 0.5) ** 2
    betas = 1 - alphas_cumprod[1:] / alphas_cumprod[:-1]
    return torch.clip(betas, 0, 0.999).to(torch.float32)


class Diffusion(nn.Module):
    def __init__(self, steps):
        super().__init__()
        betas = torch.linspace(1e-4, 0.02, steps, dtype=torch.float64)
        alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
        self.register_buffer("betas", betas.to(torch.float32))
        self.register_buffer("sqrt_alphas_cumprod", torch.sqrt(alphas_cumprod).float())
        self.snr_min = alphas_cumprod[-1].item()

    def forward(self, x):
        noise = torch.randn(x.shape, dtype=torch.float64)
        return x + noise.to(x.device)
"""


def test_float64_cast_on_the_cpu_is_info_with_its_reason(tmp_path, cli):
    """Diffusion schedules are made in float64 on the CPU and cast before they reach the device: info.
    A float64 tensor moved as it is (`noise.to(x.device)`) stays a warning."""
    script = tmp_path / "diffusion.py"
    script.write_text(BETA_SCHEDULE)
    result = cli("rewrite", "--check", "--select", "NP801", "--output-format", "json", str(script))
    findings = [(f["line"], f["severity"]) for f in json.loads(result.stdout)["findings"]]
    assert findings == [(8, "info"), (17, "info"), (24, "warning")], result.stdout
    info = [f["message"] for f in json.loads(result.stdout)["findings"] if f["severity"] == "info"]
    assert all("only on the CPU" in m for m in info)
