"""Another library's ops and window ops in a shape-only run as in a real run (NEURON_PORT_SIMULATE=1, real vs
NEURON_PORT_SHAPE_ONLY=1):

- an op of another namespace with a CPU kernel and no device kernel (torchvision's ``nms``, ``roi_align``; here
  a ``torch.library.custom_op`` of our own) is a CPU fallback in both runs (the shape-only run passed it
  uncounted), and its data-dependent size takes the shape-only run's size rule (the upper bound, listed as
  NP911), whatever fake kernel the library registered (``ctx.new_dynamic_size()``);
- a library op with a composite kernel (a ``custom_op`` without a device type) runs that kernel on the device
  in both runs: its ATen calls are the eager signatures, no fallback;
- a group norm of a channels-last tensor and its backward (timm's PoolFormer: ``pool(norm(x)) - norm(x)``)
  are laid out as the CPU kernel lays them out (its ``N``, ``C``, ``HxW`` sizes are mapped onto the tiny
  twins too), and so are a pooling of it with a window (``kernel_size``) and with a result of another
  shape (stride 2).

Found by the vision shape-only sweep (bench/zoo, issue 36 item 5): 6 torchvision detection models and
poolformerv2_s12 differed so.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from conftest import run_script, tagged_json

SCRIPT = """
import json
import torch
import torch.nn.functional as F
import neuron_backend


@torch.library.custom_op("np_test::positive", mutates_args=(), device_types="cpu")
def positive(x: torch.Tensor) -> torch.Tensor:
    return x[x > 0].clone()


@positive.register_fake
def _(x):
    return x.new_empty(torch.library.get_ctx().new_dynamic_size())


@torch.library.custom_op("np_test::double_sum", mutates_args=())
def double_sum(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).sum(0)


@double_sum.register_fake
def _(x):
    return x.new_empty(x.shape[1:])


torch.manual_seed(0)
dev = "neuron"
kept = positive(torch.randn(40, device=dev))  # values nobody knows in the shape-only run
total = double_sum(torch.randn(3, 5, device=dev))
bias = torch.zeros(4, device=dev, requires_grad=True)
x = (torch.randn(2, 6, 6, 4, device=dev) + bias).permute(0, 3, 1, 2)  # channels-last, read as NCHW
# PoolFormer's token mixer after its GroupNorm1: the CPU's group norm keeps a channels-last input's layout
x = F.group_norm(x, 1, torch.ones(4, device=dev, requires_grad=True))
pooled = F.avg_pool2d(x, 3, 1, 1, count_include_pad=False) - x
strided = F.avg_pool2d(x, 3, 2, 1)
(pooled * torch.randn(2, 4, 6, 6, device=dev)).sum().backward(retain_graph=True)
(strided * torch.randn(2, 4, 3, 3, device=dev)).sum().backward()
stats = neuron_backend.stats()
add = {"aten::add.Tensor", "aten::add_.Tensor"}  # autograd's accumulation: in place for real tensors only
print("EAGER", json.dumps(sorted((e["op"], e["signature"], e["calls"]) for e in stats["eager_compiles"]
                                 if e["op"] not in add)))
print("FALLBACKS", json.dumps(sorted((f["op"], f["calls"]) for f in stats["fallbacks"])))
print("SIZES", json.dumps([(e["op"], e["rule"], e["shape"]) for e in stats["events"]
                           if e.get("kind") == "shape_only" and e.get("event") == "size_rule"]))
print("KEPT", json.dumps(list(kept.shape)))
"""


def run(tmp_path, shape_only: bool) -> dict:
    return tagged_json(run_script(tmp_path, SCRIPT, shape_only), "EAGER", "FALLBACKS", "SIZES", "KEPT")


def test_library_ops_and_windows_as_in_the_real_run(tmp_path, sim_build):
    real = run(tmp_path, shape_only=False)
    fake = run(tmp_path, shape_only=True)
    assert real["FALLBACKS"] == [["np_test::positive", 1]]
    assert fake["FALLBACKS"] == real["FALLBACKS"]
    assert 0 < real["KEPT"][0] < 40 and real["SIZES"] == []
    assert fake["SIZES"] == [["np_test::positive", "upper_bound", [40]]] and fake["KEPT"] == [40]
    assert ["aten::mul.Tensor", ["f32[3,5]", "2"], 1] in real["EAGER"]  # double_sum's kernel, on the device
    pools = [s for op, s, _ in real["EAGER"] if op.startswith("aten::avg_pool2d")]
    assert len(pools) == 4 and all(s[1 if op.endswith("backward") else 0].endswith("nc")
                                   for op, s, _ in real["EAGER"] if op.startswith("aten::avg_pool2d")
                                   for op in [op])
    assert fake["EAGER"] == real["EAGER"]


def test_twins_map_size_arguments_and_results_of_other_shapes():
    """The CPU kernel's layout is found for a call whose sizes are arguments (group norm's SymInt ``N``, ``C``,
    ``HxW``: PyTorch 2.14's fake kernel makes a channels-last input's result contiguous) and for a result of
    another shape (a strided pooling, told its window); not for an op told its result's size."""
    from neuron_backend.shape_only import metas

    channels_last = (0, 2, 3, 1)
    x = torch.randn(2, 6, 6, 4).permute(0, 3, 1, 2)
    norm = torch.ops.aten.native_group_norm.default
    args = (x, torch.ones(4), None, 2, 4, 36, 1, 1e-5)
    out = norm(*args)
    assert metas.cpu_orders(norm, args, {}, list(out))[0] == channels_last == metas._memory_order(out[0])
    pool = torch.ops.aten.avg_pool2d.default
    pooled = F.avg_pool2d(x, 3, 2, 1)
    assert pooled.shape[2:] == (3, 3)
    assert metas.cpu_orders(pool, (x, [3, 3], [2, 2], [1, 1]), {}, [pooled]) == (channels_last,)
    zeros = torch.ops.aten.new_zeros.default
    assert metas.cpu_orders(zeros, (x, [2, 4, 6, 6]), {}, [torch.zeros(2, 4, 6, 6)]) is None
