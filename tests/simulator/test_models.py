"""Models: a conv net (convolution_overrideable) and an SDPA transformer train on the simulated device."""

import pytest

from .conftest import PRELUDE

pytestmark = pytest.mark.slow

MODELS = PRELUDE + """
import torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
out = {}
net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Dropout(0.1),
                    nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
ref = [p.detach().clone() for p in net.parameters()]
net_cpu = __import__("copy").deepcopy(net)
net.to("neuron")
x = torch.randn(4, 3, 8, 8); y = torch.randint(0, 10, (4,))
net.eval(); net_cpu.eval()
out["conv_match_cpu"] = torch.allclose(net(x.to("neuron")).cpu(), net_cpu(x), atol=1e-5)
net.train()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    loss = F.cross_entropy(net(x.to("neuron")), y.to("neuron"))
    opt.zero_grad(); loss.backward()
    nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    opt.step()
out["conv_loss"] = loss.item()
out["conv_grad"] = str(net[0].weight.grad.device)

class Block(nn.Module):
    def __init__(self, d=32, h=4):
        super().__init__()
        self.h = h; self.qkv = nn.Linear(d, 3 * d); self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d); self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp(self.ln2(x))

emb = nn.Embedding(50, 32); blocks = nn.Sequential(Block(), Block()); head = nn.Linear(32, 50)
model = nn.Sequential(emb, blocks, head).to("neuron")
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
tok = torch.randint(0, 50, (4, 16), device="neuron")
for _ in range(5):
    logits = model(tok[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 50), tok[:, 1:].reshape(-1))
    opt.zero_grad(); loss.backward(); opt.step()
out["gpt_loss"] = loss.item()
for cls in (nn.LSTM, nn.GRU):   # fused RNN cells (CUDA-only kernels upstream) on the neuron device
    rnn = cls(8, 16, num_layers=2)
    rnn_n = __import__("copy").deepcopy(rnn).to("neuron")
    seq = torch.randn(5, 3, 8)
    o_c = rnn(seq)[0]; o_c.sum().backward()
    o_n = rnn_n(seq.to("neuron"))[0]; o_n.sum().backward()
    out[cls.__name__] = [torch.allclose(o_n.cpu(), o_c, atol=1e-5),
                         all(torch.allclose(a.grad.cpu(), b.grad, atol=1e-4)
                             for a, b in zip(rnn_n.parameters(), rnn.parameters()))]
s_ = torch.neuron.Stream(); t_ = torch.ones(3, device="neuron"); t_.record_stream(s_)
enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2).to("neuron")
out["encoder"] = list(enc(torch.randn(2, 10, 32, device="neuron")).shape)
result(out)
"""


def test_conv_net_and_sdpa_transformer(run_sim):
    r = run_sim(MODELS)
    out = r.result
    assert out["conv_match_cpu"] is True
    assert out["conv_loss"] == out["conv_loss"] and out["conv_grad"] == "neuron:0"
    assert 0 < out["gpt_loss"] < 10
    assert out["encoder"] == [2, 10, 32]
    assert out["LSTM"] == [True, True] and out["GRU"] == [True, True]
    explicit = r.kind("explicit_ops")[0]["counts"]
    assert explicit["aten::convolution_overrideable"] >= 3
    assert explicit["aten::convolution_backward_overrideable"] >= 3
    ops = {e["op"] for e in r.kind("op")}
    # like TorchNeuron, SDPA runs through the "overrideable" fused-attention op (forward and backward)
    assert "aten::_scaled_dot_product_fused_attention_overrideable" in ops
    assert "aten::_scaled_dot_product_fused_attention_overrideable_backward" in ops
