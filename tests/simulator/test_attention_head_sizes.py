"""Multi-head latent attention (DeepSeek-V3, MiniCPM3, ...): the value head size differs from the
query/key head size. TorchNeuron sends every 4-D SDPA to its overrideable kernel; the simulator must run
it (the CPU flash kernel it otherwise uses needs one head size), with CPU numerics, forward and backward."""

import pytest

from .conftest import PRELUDE

pytestmark = pytest.mark.slow


def test_sdpa_with_a_smaller_value_head(run_sim):
    r = run_sim(PRELUDE + """
import torch.nn.functional as F
torch.manual_seed(0)
worst = 0.0
for causal in (True, False):
    q, k = torch.randn(2, 3, 5, 32, requires_grad=True), torch.randn(2, 3, 7, 32, requires_grad=True)
    v = torch.randn(2, 3, 7, 16, requires_grad=True)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out.square().sum().backward()
    qn, kn, vn = (t.detach().to("neuron").requires_grad_() for t in (q, k, v))
    on = F.scaled_dot_product_attention(qn, kn, vn, is_causal=causal)
    on.square().sum().backward()
    for a, b in ((on, out), (qn.grad, q.grad), (kn.grad, k.grad), (vn.grad, v.grad)):
        worst = max(worst, (a.cpu() - b).abs().max().item())
ops = {o["op"] for o in neuron_backend.stats()["ops"]}
result({"worst": worst, "overrideable": "aten::_scaled_dot_product_fused_attention_overrideable" in ops})
""")
    assert r.result["overrideable"], r.proc.stderr[-2000:]
    assert r.result["worst"] < 1e-4
