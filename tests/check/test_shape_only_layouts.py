"""Strides and views of a shape-only run as in a real run (NEURON_PORT_SIMULATE=1, real vs NEURON_PORT_SHAPE_ONLY=1):
the same eager signatures (``nc`` marks a non-contiguous argument) and CPU fallbacks.

- an elementwise op's result is laid out as its CPU kernel lays it out (TensorIterator: like its inputs),
  where PyTorch's fake kernel, a Python decomposition, returned another layout (``softplus_backward``,
  ``native_dropout_backward``: the next op saw a contiguous gradient where the real run sees a transposed one);
- a convolution and its backward return contiguous results, as the simulator's kernels do, whatever the
  input's layout (the fake gave a channels-last input's gradients channels-last strides);
- ``view_as_complex`` is a view in both runs (the real run decides a complex result's policy from the
  result; the shape-only run counted a CPU fallback).
- a device tensor indexed with a host index (relative position biases: timm's SAM ViT, torchvision's
  MViT) runs backward in both runs: the real fallback takes a host index for ``_index_put_impl_`` (the
  core's MIXED_DEVICE_OPS), the fake refused it;
- a fused LSTM cell (``nn.LSTMCell``: timm's Sequencer) is the simulator's kernel composed of device ops in
  both runs, not a CPU fallback in the shape-only run (the core's COMPOSITE_KERNELS);
- a result of another shape laid out by the CPU kernel (``cat``) reads a size-1 dimension's stride, and the
  twins keep it (a size-1 channel concatenated: the fake was channels-last, the real result contiguous);
- a step's activations are freed when its backward ends, with no cycle collection (the layout twins of a
  group norm and a pooling once kept them counted: a reference cycle held the calls' tensors).

Found by the zoo's shape-only sweeps (bench/zoo, issue 36 item 5): 18 transformers architectures differed so,
and 3 vision ones (samvit_base, mvit_v2_s, sequencer2d_s).
"""

from __future__ import annotations


import pytest

from conftest import run_script, tagged_json

pytestmark = pytest.mark.slow

SCRIPT = """
import json
import torch
import torch.nn as nn
import torch.nn.functional as F
import neuron_backend

torch.manual_seed(0)
dev = "neuron"
# softplus of a gate read transposed afterwards (Qwen3.5's, OLMo-hybrid's linear attention): its backward's
# result follows the transposed gradient, and the bias's gradient sums a non-contiguous tensor
gate_bias = torch.zeros(4, device=dev, requires_grad=True)
gate = F.softplus(torch.randn(2, 8, 4).to(dev) + gate_bias).transpose(1, 2)
# dropout of a tensor read transposed afterwards (XLNet, SqueezeBERT): its backward keeps the gradient's layout
drop_bias = torch.zeros(6, device=dev, requires_grad=True)
drop = F.dropout(torch.randn(2, 8, 6).to(dev) + drop_bias, 0.5, training=True).transpose(1, 2)
# a convolution of a channels-last view (ConvNeXt: NHWC permuted to NCHW): the simulator's convolution
# and its backward return contiguous results, so the gradient reaching the NHWC tensor is a permuted view
image_bias = torch.zeros(5, device=dev, requires_grad=True)
conv = nn.Conv2d(5, 5, 3, padding=1, groups=5).to(dev)
image = (torch.randn(2, 6, 6, 5).to(dev) + image_bias).permute(0, 3, 1, 2)
feat = conv(image).permute(0, 2, 3, 1)
# rotary embeddings as complex numbers (Llama 4, DeepSeek-V2): view_as_complex is a view, no CPU fallback
freqs = torch.view_as_complex(torch.randn(4, 4, 2).to(dev))
rot = torch.view_as_real(torch.view_as_complex(torch.randn(2, 4, 4, 2).to(dev)) * freqs)
# relative position biases indexed with a host index (timm's SAM ViT: rel_pos[relative_coords.long()])
rel_pos = torch.randn(10, 4).to(dev).requires_grad_()
biases = rel_pos[torch.arange(3)]
# one LSTM cell step (timm's Sequencer): aten::_thnn_fused_lstm_cell and its backward
cell = nn.LSTMCell(8, 16).to(dev)
hy, cy = cell(torch.randn(2, 8).to(dev), (torch.zeros(2, 16).to(dev), torch.zeros(2, 16).to(dev)))
(biases.sum() + hy.sum() + cy.sum()).backward()
# channel statistics of a channels-last tensor concatenated (timm's CSATv2 spatial attention): each is (B, 1, H, W)
# with the size-1 channel's stride of a contiguous tensor, and the CPU's cat reads it (a contiguous result)
hwc = torch.randn(2, 6, 6, 4).to(dev).permute(0, 3, 1, 2)
spatial = F.adaptive_avg_pool2d(torch.cat([hwc.mean(1, keepdim=True), hwc.amax(1, keepdim=True)], 1), 3)
loss = (gate * torch.randn(2, 4, 8).to(dev)).sum() + (drop * torch.randn(2, 6, 8).to(dev)).sum() + (feat * torch.randn(2, 6, 6, 5).to(dev)).sum()
(loss + rot.sum()).backward()
stats = neuron_backend.stats()
add = {"aten::add.Tensor", "aten::add_.Tensor"}  # autograd's accumulation: in place for real tensors only
# PyTorch's subclass path (docs/shape-only.md, "What differs"): indexing's backward passes unsafe=True for
# real tensors only; a bounds check, not work
unsafe = lambda e: e["signature"][:4] if e["op"] == "aten::_index_put_impl_" else e["signature"]
eager = sorted((e["op"], unsafe(e), e["calls"]) for e in stats["eager_compiles"] if e["op"] not in add)
print("EAGER", json.dumps(eager))
print("FALLBACKS", json.dumps(sorted((f["op"], f["calls"]) for f in stats["fallbacks"])))
"""


def run(tmp_path, shape_only: bool) -> dict:
    return tagged_json(run_script(tmp_path, SCRIPT, shape_only), "EAGER", "FALLBACKS")


def test_strides_and_views_as_in_the_real_run(tmp_path, sim_build):
    real = run(tmp_path, shape_only=False)
    fake = run(tmp_path, shape_only=True)
    sums = [s for op, s, _ in real["EAGER"] if op == "aten::sum.dim_IntList" and s[1] != "[]"]
    # the cases above (and the LSTM cell's bias gradient)
    assert sorted(s[0] for s in sums) == ["f32[2,6,6,5]nc", "f32[2,64]", "f32[2,8,4]nc", "f32[2,8,6]nc"]
    assert ["aten::_index_put_impl_", ["f32[10,4]", "[i64[3]@cpu]", "f32[3,4]nc", "True"], 1] in real["EAGER"]
    assert ["aten::sigmoid", ["f32[2,16]nc"], 3] in real["EAGER"]  # the LSTM cell's gates, on the device
    assert ["aten::_adaptive_avg_pool2d", ["f32[2,2,6,6]", "[3, 3]"], 1] in real["EAGER"]
    assert real["FALLBACKS"] == []
    assert fake["FALLBACKS"] == real["FALLBACKS"]
    assert fake["EAGER"] == real["EAGER"]


MEMORY_SCRIPT = """
import gc
import json
import torch
import torch.nn as nn

# device memory freed by reference counts alone, as a real run frees it: nothing may wait for the cycle collector
gc.disable()


class Mixer(nn.Module):  # timm's PoolFormer: pool(norm(x)) - norm(x), then a 1x1 projection
    def __init__(self, c):
        super().__init__()
        self.norm = nn.GroupNorm(1, c)
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.proj = nn.Conv2d(c, c, 1)

    def forward(self, x):
        y = self.norm(x)
        return self.proj(self.pool(y) - y)


model = nn.Sequential(Mixer(32), nn.AvgPool2d(3, 2, 1), Mixer(32)).to("neuron")
x = torch.randn(4, 64, 64, 32).to("neuron").permute(0, 3, 1, 2)  # channels-last, read as NCHW
before = torch.neuron.memory_allocated()
model(x).square().mean().backward()
print("MEMORY", json.dumps([before, torch.neuron.memory_allocated()]))
"""


def test_a_steps_activations_are_freed_after_backward(tmp_path, sim_build):
    """A step's activations are freed when backward ends, as in the real run (the CPU-kernel twins that lay out a
    group norm's and a pooling's results once held the calls' tensors in a reference cycle: 32-48 MiB of a
    two-layer step stayed counted until the cycle collector ran)."""
    real = tagged_json(run_script(tmp_path, MEMORY_SCRIPT, False), "MEMORY")["MEMORY"]
    fake = tagged_json(run_script(tmp_path, MEMORY_SCRIPT, True), "MEMORY")["MEMORY"]
    assert real[1] > real[0]  # the gradients
    assert fake == real
