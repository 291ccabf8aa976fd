"""Every kernel the simulator overrides or routes specially (SDPA forward and backward with every mask
shape, convolutions, the fused RNN cells, the boxed CPU fallback, copies through views, the dtype
upcast and float64 demotion) gives the CPU's numbers on inputs in any memory layout: permuted,
transposed, chunked, stepped, expanded, ``as_strided`` and channels-last (strided_cases.py lists the
cases and the layouts). A kernel that assumes a layout returns wrong numbers without an error, which
`check` would call a run that works; this is the property that keeps that class of bug out."""

from pathlib import Path

import pytest

from .conftest import PRELUDE

pytestmark = pytest.mark.slow

CASES = Path(__file__).resolve().parent / "strided_cases.py"


def test_every_special_kernel_matches_the_cpu_on_strided_inputs(run_sim):
    r = run_sim(PRELUDE + f"""
import runpy
cases = runpy.run_path({str(CASES)!r})
result(cases["main"]())
""", timeout=900)
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    assert r.result == [], "\n".join(r.result[:40])


def test_sdpa_on_a_transposed_query_is_the_cpu_result(run_sim):
    """The reproduction of the report: q, k, v chunked from a permuted tensor (a last-dimension stride
    other than 1, as conv-attention backbones make them) and a 3-D (heads, L, S) additive mask."""
    r = run_sim(PRELUDE + """
import torch.nn.functional as F
torch.manual_seed(0)
x = torch.randn(2, 4, 24, 16)
mask = torch.randn(4, 16, 16)
def attend(t, m):
    q, k, v = t.permute(0, 1, 3, 2).chunk(3, dim=3)
    return F.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v, attn_mask=m)
want = attend(x, mask)
got = attend(x.to("neuron"), mask.to("neuron"))
result([float((g.cpu() - w).abs().max()) for g, w in zip(got, want)])
""")
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    assert max(r.result) < 1e-5, r.result
