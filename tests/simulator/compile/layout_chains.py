"""Random chains of ops over strided inputs: torch.compile(backend="neuron") on the simulated device
against eager on the CPU, outputs and every gradient (issue 39).

Run as a user script (``NEURON_PORT_SIMULATE=1``, one process for every chain; the suite's test and
bench/zoo/layout_property.py start it):

    python tests/simulator/compile/layout_chains.py --examples 24 --seed 0

Each example draws an input layout (contiguous, a channels_last view, a transposed view, a sliced
view, an expanded view) and 2-4 ops, each N C H W -> N C H W, from the families the native list has:
norms, activations, convolutions, pooling, matmul, elementwise, and views inside the chain (permute,
transpose+reshape as after a spatial attention block, slicing, expand). One line per example:
``RESULT:{"id", "layout", "ops", "errors": {name: max|a-b| / max|b|}, "error": exception or null}``;
the first line is the issue's repro (GroupNorm -> SiLU -> Conv2d on a channels_last view).
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

N, C, H, W = 2, 8, 6, 6


# ---------------------------------------------------------------- input layouts (views of the same values)
def contiguous(leaf):
    return leaf


def channels_last(leaf):  # an NCHW view of an NHWC tensor
    return leaf.permute(0, 3, 1, 2)


def transposed(leaf):
    return leaf.transpose(-1, -2)


def sliced(leaf):
    return leaf[:, ::2, :, 1:]


def expanded(leaf):
    return leaf.expand(N, C, H, W)


# (leaf shape, leaf -> the N C H W input)
LAYOUTS = {
    "contiguous": ((N, C, H, W), contiguous),
    "channels_last": ((N, H, W, C), channels_last),
    "transposed": ((N, C, W, H), transposed),
    "sliced": ((N, 2 * C, H, W + 1), sliced),
    "expanded": ((1, C, H, W), expanded),
}


# ---------------------------------------------------------------- the ops: modules with their parameters
class Op(nn.Module):
    def __init__(self, name, fn, **params):
        super().__init__()
        self.name, self.fn = name, fn
        for k, v in params.items():
            self.add_module(k, v) if isinstance(v, nn.Module) else self.register_parameter(k, nn.Parameter(v))

    def forward(self, x):
        return self.fn(self, x)


def _nhwc(m, x, fn):
    return fn(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def _attention_like(m, x):  # (N, HW, C) tokens and back: transpose + reshape gives a channels_last view
    t = m.proj(x.flatten(2).transpose(1, 2))
    return t.transpose(1, 2).reshape(N, C, H, W)


OPS = {
    "group_norm": lambda: Op("group_norm", lambda m, x: m.norm(x), norm=nn.GroupNorm(4, C)),
    "batch_norm": lambda: Op("batch_norm", lambda m, x: m.norm(x), norm=nn.BatchNorm2d(C)),
    "layer_norm_nhwc": lambda: Op("layer_norm_nhwc", lambda m, x: _nhwc(m, x, m.norm), norm=nn.LayerNorm(C)),
    "instance_norm": lambda: Op("instance_norm", lambda m, x: m.norm(x), norm=nn.InstanceNorm2d(C, affine=True)),
    "silu": lambda: Op("silu", lambda m, x: F.silu(x)),
    "gelu": lambda: Op("gelu", lambda m, x: F.gelu(x)),
    "relu": lambda: Op("relu", lambda m, x: F.relu(x)),
    "tanh": lambda: Op("tanh", lambda m, x: torch.tanh(x)),
    "softmax_c": lambda: Op("softmax_c", lambda m, x: torch.softmax(x, dim=1)),
    "conv3x3": lambda: Op("conv3x3", lambda m, x: m.conv(x), conv=nn.Conv2d(C, C, 3, padding=1)),
    "conv1x1": lambda: Op("conv1x1", lambda m, x: m.conv(x), conv=nn.Conv2d(C, C, 1)),
    "depthwise": lambda: Op("depthwise", lambda m, x: m.conv(x), conv=nn.Conv2d(C, C, 3, padding=1, groups=C)),
    "conv_transpose": lambda: Op("conv_transpose", lambda m, x: m.conv(x), conv=nn.ConvTranspose2d(C, C, 3, padding=1)),
    "avg_pool": lambda: Op("avg_pool", lambda m, x: F.avg_pool2d(x, 3, 1, 1)),
    "max_pool": lambda: Op("max_pool", lambda m, x: F.max_pool2d(x, 3, 1, 1)),
    "up_down": lambda: Op("up_down", lambda m, x: F.avg_pool2d(F.interpolate(x, scale_factor=2.0, mode="nearest"), 2)),
    "matmul_w": lambda: Op("matmul_w", lambda m, x: x @ m.w, w=torch.randn(W, W) / W ** 0.5),
    "linear_nhwc": lambda: Op("linear_nhwc", lambda m, x: _nhwc(m, x, m.lin), lin=nn.Linear(C, C)),
    "scale_shift": lambda: Op("scale_shift", lambda m, x: x * m.g + m.b, g=torch.randn(1, C, 1, 1),
                              b=torch.randn(1, C, 1, 1)),
    "residual_sin": lambda: Op("residual_sin", lambda m, x: x + torch.sin(x) * x),
    "attention_like": lambda: Op("attention_like", _attention_like, proj=nn.Linear(C, C)),
    "permute_hw": lambda: Op("permute_hw", lambda m, x: x.permute(0, 1, 3, 2) * 1.0),
    "slice_pad": lambda: Op("slice_pad", lambda m, x: F.pad(x[:, :, 1:-1, 1:-1], (1, 1, 1, 1))),
    "squeeze_excite": lambda: Op("squeeze_excite", lambda m, x: x * torch.sigmoid(x.mean((2, 3), keepdim=True)
                                                                                   .expand_as(x))),
}


FAMILIES = {
    "norm": ["group_norm", "batch_norm", "layer_norm_nhwc", "instance_norm"],
    "activation": ["silu", "gelu", "relu", "tanh", "softmax_c"],
    "conv": ["conv3x3", "conv1x1", "depthwise", "conv_transpose"],
    "pool": ["avg_pool", "max_pool", "up_down"],
    "matmul": ["matmul_w", "linear_nhwc"],
    "elementwise": ["scale_shift", "residual_sin"],
    "view": ["attention_like", "permute_hw", "slice_pad", "squeeze_excite"],
}
assert sorted(sum(FAMILIES.values(), [])) == sorted(OPS)


def draw_ops(rng: random.Random) -> list[str]:
    """Half the chains are a ResNet / UNet block (an optional view, norm, activation, convolution: the
    pattern where a saved activation feeds convolution_backward); the others 2-4 ops of any family."""
    if rng.random() < 0.5:
        first = rng.choice(FAMILIES["view"] + FAMILIES["matmul"] + [None])
        norm = rng.choice(FAMILIES["norm"] + ["group_norm"])  # GroupNorm: the norm of UNet and VAE blocks
        block = [norm, rng.choice(FAMILIES["activation"]), rng.choice(FAMILIES["conv"])]
        return ([first] if first else []) + block
    return [rng.choice(FAMILIES[rng.choice(sorted(FAMILIES))]) for _ in range(rng.randint(2, 4))]


def rel(a: torch.Tensor, b: torch.Tensor, floor: float = 0.0) -> float:
    """max|a - b| over max|b|, or over ``floor`` when larger: a gradient that is a near-cancelling sum
    (a norm's weight before another norm) is compared at the scale of the step's largest gradient."""
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    scale = max(b.abs().max().item(), floor)
    return (a - b).abs().max().item() / (scale if scale > 0 else 1.0)


def step(model: nn.Module, layout: str, leaf0: torch.Tensor, w0: torch.Tensor, device: str, backend):
    """One training step: the output, the input's gradient and every parameter's."""
    model = copy.deepcopy(model).to(device)
    leaf = leaf0.detach().to(device).requires_grad_()
    fn = torch.compile(model, backend=backend) if backend else model
    out = fn(LAYOUTS[layout][1](leaf))
    (out * w0.to(device)).sum().backward()
    grads = {"output": out, "d_input": leaf.grad}
    grads.update({f"d_{k}": p.grad for k, p in model.named_parameters() if p.grad is not None})
    return grads


# Chains found by the larger run (bench/zoo/layout_property.py), kept: here PyTorch's own CPU kernel
# (native_layer_norm_backward on a permuted input) returns other strides than its fake kernel, and
# GroupNorm's backward formula on a non-CPU device (derivatives.yaml: ``grad.contiguous()`` elided when
# the trace says it is contiguous) reads them wrong: 1.5 relative without the compiled graph's layout
# checks, exact with them; harmless on the CPU, whose formula copies into the input's memory format.
FIXED = [("sliced", ["linear_nhwc", "group_norm", "layer_norm_nhwc", "slice_pad"])]


def example(i, rng: random.Random | None = None, fixed: tuple | None = None) -> dict:
    if fixed:
        layout, names = fixed
    else:
        layout = rng.choice(sorted(LAYOUTS) + ["channels_last"])  # twice: the layout attention blocks hand on
        names = draw_ops(rng)
    torch.manual_seed(1000 + i if isinstance(i, int) else 7)
    model = nn.Sequential(*(OPS[n]() for n in names))
    leaf0, w0 = torch.randn(LAYOUTS[layout][0]), torch.randn(N, C, H, W)
    res = {"id": i, "layout": layout, "ops": names, "errors": {}, "error": None}
    try:
        torch._dynamo.reset()
        want = step(model, layout, leaf0, w0, "cpu", None)
        got = step(model, layout, leaf0, w0, "neuron", "neuron")
        floor = 1e-2 * max(v.abs().max().item() for k, v in want.items() if k != "output")
        res["errors"] = {k: rel(got[k], v, floor if k != "output" else 0.0) for k, v in want.items()}
    except Exception as e:  # noqa: BLE001 - reported per example, the chain goes on
        res["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        res["trace"] = traceback.format_exc()[-1500:]
    return res


def issue_repro() -> dict:
    """The repro of issue 39, as filed: max|dx - cpu| / max|dx| per line."""
    torch.manual_seed(0)
    gn, conv = nn.GroupNorm(8, 64), nn.Conv2d(64, 64, 3, padding=1)
    x0, w = torch.randn(2, 8, 8, 64), torch.randn(2, 64, 8, 8)

    def grad_x(dev, backend):
        g, c = copy.deepcopy(gn).to(dev), copy.deepcopy(conv).to(dev)
        x = x0.to(dev).permute(0, 3, 1, 2).requires_grad_()
        f = lambda t: c(F.silu(g(t)))  # noqa: E731 - as the issue writes it
        f = torch.compile(f, backend=backend) if backend else f
        (f(x) * w.to(dev)).sum().backward()
        return x.grad.cpu()

    ref = grad_x("cpu", None)
    out = {}
    for dev, be in (("neuron", None), ("cpu", "aot_eager"), ("neuron", "neuron")):
        torch._dynamo.reset()
        out[f"{dev} {be}"] = ((grad_x(dev, be) - ref).abs().max() / ref.abs().max()).item()
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-repro", action="store_true")
    a = ap.parse_args(argv)
    torch._dynamo.config.recompile_limit = 10_000  # one function per example, many compiles
    if not a.no_repro:
        print("RESULT:" + json.dumps({"repro": issue_repro()}), flush=True)
    for j, fixed in enumerate(FIXED):
        print("RESULT:" + json.dumps(example(f"fixed-{j}", fixed=fixed)), flush=True)
    rng = random.Random(a.seed)
    for i in range(a.examples):
        print("RESULT:" + json.dumps(example(i, rng)), flush=True)


if __name__ == "__main__":
    main()
