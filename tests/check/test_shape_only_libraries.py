"""Another library's ops in a shape-only run as in a real run (NEURON_PORT_SIMULATE=1, real vs
NEURON_PORT_SHAPE_ONLY=1):

- an op of another namespace with a CPU kernel and no device kernel (torchvision's ``nms``, ``roi_align``; here
  a ``torch.library.custom_op`` of our own) is a CPU fallback in both runs (the shape-only run passed it
  uncounted), and its data-dependent size takes the shape-only run's size rule (the upper bound, listed as
  NP911), whatever fake kernel the library registered (``ctx.new_dynamic_size()``);
- a library op with a composite kernel (a ``custom_op`` without a device type) runs that kernel on the device
  in both runs: its ATen calls are the eager signatures, no fallback.

Found by the vision shape-only sweep (bench/zoo, issue 36 item 5): 6 torchvision detection models differed
so.
"""

from __future__ import annotations

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


def test_library_ops_as_in_the_real_run(tmp_path, sim_build):
    real = run(tmp_path, shape_only=False)
    fake = run(tmp_path, shape_only=True)
    assert real["FALLBACKS"] == [["np_test::positive", 1]]
    assert fake["FALLBACKS"] == real["FALLBACKS"]
    assert 0 < real["KEPT"][0] < 40 and real["SIZES"] == []
    assert fake["SIZES"] == [["np_test::positive", "upper_bound", [40]]] and fake["KEPT"] == [40]
    assert ["aten::mul.Tensor", ["f32[3,5]", "2"], 1] in real["EAGER"]  # double_sum's kernel, on the device
    assert fake["EAGER"] == real["EAGER"]

