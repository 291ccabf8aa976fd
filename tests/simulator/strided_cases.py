"""Every kernel the simulator overrides or routes specially, run on inputs in many memory layouts and
compared with PyTorch's CPU kernels: the forward's outputs and the gradients that reach each input.

A simulator kernel that assumes a layout (a unit last stride, dense strides, no storage offset, no
zero stride) gives wrong numbers without an error, the worst outcome a port checker can have; this
file runs as a user script on the simulated device (tests/simulator/test_strided_kernels.py) and
prints the cases whose numbers differ.

Layouts: contiguous; transposed (last two dimensions); permuted (every dimension reversed); chunked
(a slice of a wider last dimension: storage offset and padded strides); stepped (every second
element of the last dimension); expanded (a size-1 dimension broadcast: stride 0); as_strided
(padded strides over a larger storage); channels-last (4-D and 5-D, made by a permute). Each input of a case takes each
layout in turn while the others stay contiguous, and every input takes a random one in a few
seeded draws, so layouts meet each other too.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import sys
import traceback

import torch
import torch.nn.functional as F

LAYOUTS = ("contiguous", "transposed", "permuted", "chunked", "stepped", "expanded", "as_strided",
           "channels_last")
MIXED_DRAWS = 6


def _data(shape, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)


def laid_out(shape, layout, device, seed, dtype=torch.float32):
    """(leaf, view): ``view`` has ``shape`` and ``layout`` on ``device``; gradients reach ``leaf``. Both
    devices build the same values through the same view ops, so the neuron tensor really has the layout."""
    shape = tuple(shape)
    n = len(shape)
    if layout == "transposed" and n >= 2:
        base_shape = shape[:-2] + (shape[-1], shape[-2])
        view = lambda t: t.transpose(-1, -2)  # noqa: E731
    elif layout == "permuted" and n >= 2:
        base_shape = tuple(reversed(shape))
        view = lambda t: t.permute(*reversed(range(n)))  # noqa: E731
    elif layout == "chunked":
        base_shape = shape[:-1] + (3 * shape[-1],)
        view = lambda t: t.chunk(3, dim=-1)[1]  # noqa: E731
    elif layout == "stepped":
        base_shape = shape[:-1] + (2 * shape[-1],)
        view = lambda t: t[..., ::2]  # noqa: E731
    elif layout == "expanded" and 1 in shape[:-1]:
        return laid_out(shape, "contiguous", device, seed, dtype)
    elif layout == "expanded" and n >= 2:
        # the first dimension comes from one row broadcast over it (stride 0); values repeat
        base_shape = (1,) + shape[1:]
        view = lambda t: t.expand(shape)  # noqa: E731
    elif layout == "as_strided":
        strides, step = [], 1
        for size in reversed(shape):
            strides.insert(0, 2 * step)
            step *= 2 * size
        base_shape = (step + 3,)
        view = lambda t: t.as_strided(shape, strides, 3)  # noqa: E731
    elif layout == "channels_last" and n in (4, 5):
        # channels-last strides through a permute of an (N, ..., C) tensor: TorchNeuron refuses the
        # memory_format= argument itself ("Neuron tensors only support contiguous or preserve memory
        # format", a documented limitation the simulator reports), not the layout
        base_shape = (shape[0],) + shape[2:] + (shape[1],)
        view = lambda t: t.permute(0, n - 1, *range(1, n - 1))  # noqa: E731
    else:
        base_shape = shape
        view = lambda t: t  # noqa: E731
    leaf = _data(base_shape, seed, dtype).to(device)
    if dtype.is_floating_point:
        leaf.requires_grad_(True)
    out = view(leaf)
    assert out.shape == shape, (layout, out.shape, shape)
    return leaf, out


def _outputs(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _outputs(v)]
    return []


def run_case(fn, shapes, layouts, device, seed, dtypes=None):
    """Outputs and input gradients of ``fn`` on inputs of ``shapes`` in ``layouts`` (CPU tensors)."""
    leaves, inputs = [], []
    for i, (shape, layout) in enumerate(zip(shapes, layouts)):
        dtype = dtypes[i] if dtypes else torch.float32
        leaf, x = laid_out(shape, layout, device, seed * 101 + i, dtype)
        leaves.append(leaf)
        inputs.append(x)
    outs = _outputs(fn(*inputs))
    floating = [o for o in outs if o.is_floating_point() and o.requires_grad]
    grads = []
    if floating:
        # a fixed random cotangent per output, the same on both devices
        total = sum((o * _data(o.shape, seed + 7 + k).to(device)).sum() for k, o in enumerate(floating))
        total.backward()
        grads = [leaf.grad for leaf in leaves if leaf.requires_grad]
    return [o.detach().cpu() for o in outs] + [g.cpu() if g is not None else None for g in grads]


def compare(name, fn, shapes, dtypes=None, atol=2e-5, rtol=1e-4, seed=0):
    """The failures of one case over the layout combinations."""
    combos = []
    for i in range(len(shapes)):
        for layout in LAYOUTS[1:]:
            combo = ["contiguous"] * len(shapes)
            combo[i] = layout
            combos.append(combo)
    rng = random.Random(f"{name}/{seed}")
    combos += [[rng.choice(LAYOUTS) for _ in shapes] for _ in range(MIXED_DRAWS)]
    combos.insert(0, ["contiguous"] * len(shapes))
    failures = []
    seen = set()
    for combo in combos:
        if tuple(combo) in seen:
            continue
        seen.add(tuple(combo))
        label = f"{name} [{', '.join(combo)}]"
        try:
            expected = run_case(fn, shapes, combo, "cpu", seed, dtypes)
        except Exception:  # noqa: BLE001 - a layout the CPU itself refuses is no case
            continue
        try:
            got = run_case(fn, shapes, combo, "neuron", seed, dtypes)
        except Exception as exc:  # noqa: BLE001
            failures.append(f"{label}: raised on neuron, not on the CPU: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0][:200]}")
            continue
        for k, (want, have) in enumerate(zip(expected, got)):
            if (want is None) != (have is None):
                failures.append(f"{label}: result {k}: gradient missing on one device")
                continue
            if want is None:
                continue
            if want.shape != have.shape or want.dtype != have.dtype:
                failures.append(f"{label}: result {k}: {tuple(have.shape)} {have.dtype} on neuron, "
                                f"{tuple(want.shape)} {want.dtype} on the CPU")
                continue
            if not torch.allclose(want.double(), have.double(), atol=atol, rtol=rtol, equal_nan=True):
                diff = (want.double() - have.double()).abs()
                worst = float(diff.nan_to_num(math.inf).max()) if diff.numel() else 0.0
                failures.append(f"{label}: result {k} differs by {worst:.3g}")
    return failures


def sdpa(**kw):
    return lambda q, k, v, *mask: F.scaled_dot_product_attention(q, k, v, *mask, **kw)


def cases():
    b, h, lq, lk, e = 2, 4, 8, 6, 16
    q, kv = (b, h, lq, e), (b, h, lk, e)
    yield "sdpa", sdpa(), [q, kv, kv], None
    yield "sdpa causal", sdpa(is_causal=True), [(b, h, lq, e), (b, h, lq, e), (b, h, lq, e)], None
    yield "sdpa 2-D float mask", sdpa(), [q, kv, kv, (lq, lk)], None
    yield "sdpa 3-D float mask (heads, L, S)", sdpa(), [q, kv, kv, (h, lq, lk)], None
    yield "sdpa 4-D float mask", sdpa(), [q, kv, kv, (b, h, lq, lk)], None
    yield "sdpa broadcast 4-D mask", sdpa(), [q, kv, kv, (1, 1, lq, lk)], None
    yield ("sdpa bool mask", lambda q_, k_, v_, m: F.scaled_dot_product_attention(q_, k_, v_, m > -0.5),
           [q, kv, kv, (lq, lk)], None)
    yield "sdpa value head size 8", sdpa(), [q, kv, (b, h, lk, 8)], None
    yield "sdpa gqa", sdpa(enable_gqa=True), [q, (b, 2, lk, e), (b, 2, lk, e)], None
    yield "sdpa scale", sdpa(scale=0.3), [q, kv, kv], None
    yield "sdpa bf16", sdpa(), [q, kv, kv], [torch.bfloat16] * 3
    yield "conv1d", lambda x, w, bias: F.conv1d(x, w, bias, padding=1), [(2, 4, 9), (6, 4, 3), (6,)], None
    yield ("conv2d strided", lambda x, w, bias: F.conv2d(x, w, bias, stride=2, padding=1),
           [(2, 4, 7, 7), (6, 4, 3, 3), (6,)], None)
    yield ("conv2d groups", lambda x, w: F.conv2d(x, w, groups=2, dilation=2), [(2, 4, 9, 9), (6, 2, 3, 3)], None)
    yield ("conv2d depthwise", lambda x, w: F.conv2d(x, w, groups=4, padding=1), [(2, 4, 6, 6), (4, 1, 3, 3)],
           None)
    yield "conv3d", lambda x, w: F.conv3d(x, w, padding=1), [(1, 3, 4, 5, 5), (4, 3, 3, 3, 3)], None
    yield ("conv_transpose2d", lambda x, w, bias: F.conv_transpose2d(x, w, bias, stride=2, output_padding=1),
           [(2, 4, 5, 5), (4, 3, 3, 3), (3,)], None)
    lstm = torch.nn.LSTMCell(6, 5)
    gru = torch.nn.GRUCell(6, 5)
    yield ("lstm cell", lambda x, hx, cx: torch._VF.lstm_cell(x, (hx, cx), *lstm_params(lstm, x.device)),
           [(3, 6), (3, 5), (3, 5)], None)
    yield ("gru cell", lambda x, hx: torch._VF.gru_cell(x, hx, *lstm_params(gru, x.device)),
           [(3, 6), (3, 5)], None)
    yield "lstm layer", lambda x: lstm_layer(x), [(4, 3, 6)], None
    # the boxed CPU fallback (every other op) and copies between devices
    yield "add", torch.add, [(3, 4, 5), (3, 4, 5)], None
    yield "mul broadcast", torch.mul, [(3, 4, 5), (4, 5)], None
    yield "matmul", torch.matmul, [(3, 4, 5), (3, 5, 6)], None
    yield "softmax", lambda x: torch.softmax(x, -1), [(3, 4, 5)], None
    yield "layer_norm", lambda x, w: F.layer_norm(x, (5,), w), [(3, 4, 5), (5,)], None
    yield "sum dim", lambda x: x.sum(1), [(3, 4, 5)], None
    yield "cat", lambda x, y: torch.cat([x, y], 1), [(3, 4, 5), (3, 2, 5)], None
    yield "in-place add on a view", lambda x: x.clone().transpose(0, 1).add_(1.0), [(3, 4, 5)], None
    yield "copy into a strided view", copy_into_view, [(4, 6), (6, 4)], None
    yield "index_select", lambda x: x.index_select(1, torch.tensor([0, 3, 1], device=x.device)), [(3, 4, 5)], None
    yield "float64 demoted", lambda x: (x.double() * 3.0).sum(-1), [(3, 4, 5)], None
    yield "int cumsum upcast", lambda x: (x * 10).to(torch.int16).cumsum(-1).float(), [(3, 4, 5)], None


def lstm_params(cell, device):
    return [p.detach().to(device) for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)]


_LAYERS = {}


def lstm_layer(x):
    """A two-layer nn.LSTM (the fused cells per time step on neuron), one copy per device."""
    if x.device.type not in _LAYERS:
        torch.manual_seed(0)
        _LAYERS[x.device.type] = torch.nn.LSTM(6, 5, num_layers=2).to(x.device)
    out, _ = _LAYERS[x.device.type](x)
    return out


def copy_into_view(x, y):
    out = torch.zeros(4, 6, device=x.device)
    out.t().copy_(y)  # a write through a transposed view
    return out + x


def main(selected=None):
    failures = []
    for name, fn, shapes, dtypes in cases():
        if selected and not any(s in name for s in selected):
            continue
        try:
            tol = {"atol": 2e-2, "rtol": 2e-2} if dtypes and dtypes[0] == torch.bfloat16 else {}
            failures += compare(name, fn, shapes, dtypes, **tol)
        except Exception:  # noqa: BLE001
            failures.append(f"{name}: the case itself failed: {traceback.format_exc()[-600:]}")
    return failures


if __name__ == "__main__":
    import neuron_backend

    assert neuron_backend.enable()
    found = main(sys.argv[1:])
    print("RESULT:" + json.dumps(found), flush=True)
