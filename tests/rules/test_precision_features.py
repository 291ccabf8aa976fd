"""NP8xx beyond the per-rule examples: bindings found after their use, dynamic shapes only in compiled
code, channels_last fixes that settle and keep comments, float64 reported once."""

from __future__ import annotations

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
                self.attn = nn.MultiheadAttention(64, 4)
    """, [rule_by_code("NP807")])
    assert [f.line for f in out.findings] == [5]


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
