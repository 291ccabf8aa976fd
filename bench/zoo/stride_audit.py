"""Stride audit: does every ATen op the simulator runs return the strides its fake kernel declares?

A compiled graph (AOTAutograd) reads every intermediate and every saved activation with the strides
the fake-tensor trace gave it; a kernel whose real output has other strides makes the compiled graph
skip a ``.contiguous()`` the trace found unnecessary, and a kernel that trusts its inputs' layouts
then reads wrong numbers (issue 39: convolution on a channels_last view). This audit runs PyTorch's
OpInfo samples (float32) in several input layouts, forward and backward, on the simulated ``neuron``
device and on the CPU; every ATen call it reaches is run again on fake tensors of the same device and
layout, and the output strides are compared (dimensions of size 1 ignored).

    nice -n 10 .venv/bin/python bench/zoo/stride_audit.py [--ops conv,group_norm] [--samples 2]
        [--out bench/zoo/results/stride_audit.json]

A mismatch on ``neuron`` that the CPU shares is PyTorch's own (``aot_eager`` on the CPU has it too);
one only on ``neuron`` is the simulator's, and must be fixed in its kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

import types  # noqa: E402
import unittest  # noqa: E402

import torch  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_map  # noqa: E402


def channels_last_view(t):
    """An N C H W (D) view of a channels-last tensor: what ``x.permute(0, 3, 1, 2)`` of NHWC gives."""
    if t.dim() == 4:
        return t.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    if t.dim() == 5:
        return t.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3)
    return t


def transposed_view(t):
    return t.transpose(-1, -2).contiguous().transpose(-1, -2) if t.dim() >= 2 else t


def sliced_view(t):
    """Every other element of a buffer twice as wide in the last dimension."""
    if t.dim() == 0 or t.shape[-1] == 0:
        return t
    buf = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
    v = buf[..., ::2]
    v.copy_(t)
    return v


LAYOUTS = {"contiguous": lambda t: t, "channels_last": channels_last_view, "transposed": transposed_view,
           "sliced": sliced_view}


def strides_differ(real, fake) -> bool:
    if real.shape != fake.shape or real.numel() <= 1:
        return False
    return any(s > 1 and a != b for s, a, b in zip(real.shape, real.stride(), fake.stride()))


class StrideAudit(TorchDispatchMode):
    """Runs each ATen call, then the same call on fake tensors of the same layout; records mismatches."""

    def __init__(self, found: dict, label: str):
        super().__init__()
        self.found, self.label = found, label

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()) or func.name().startswith("aten::_local"):
            return out
        try:
            with FakeTensorMode(allow_non_fake_inputs=True) as mode:
                fa, fk = tree_map(lambda t: mode.from_tensor(t) if isinstance(t, torch.Tensor) else t, (args, kwargs))
                fout = func(*fa, **fk)
        except Exception:  # noqa: BLE001 - no fake kernel (data-dependent shapes...): nothing to compare
            return out
        reals, _ = tree_flatten(out)
        fakes, _ = tree_flatten(fout)
        for i, (r, f) in enumerate(zip(reals, fakes)):
            if isinstance(r, torch.Tensor) and isinstance(f, torch.Tensor) and strides_differ(r, f):
                key = f"{func.name()}[{i}]"
                ins = [tuple(a.stride()) for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
                self.found.setdefault(key, {"op": func.name(), "output": i, "shape": list(r.shape),
                                            "real": list(r.stride()), "fake": list(f.stride()),
                                            "input_strides": [list(s) for s in ins[:4]], "where": self.label})
        return out


def run_sample(op, sample, device: str, layout, found: dict, label: str) -> None:
    def prep(t):
        if not isinstance(t, torch.Tensor):
            return t
        v = layout(t.detach().to(device))
        return v.requires_grad_(t.requires_grad) if t.is_floating_point() and v.is_leaf else v

    inp = prep(sample.input) if isinstance(sample.input, torch.Tensor) else tree_map(prep, sample.input)
    args, kwargs = tree_map(prep, (sample.args, sample.kwargs))
    with StrideAudit(found, label):
        out = op.op(inp, *args, **kwargs)
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor) and o.requires_grad]
        if outs:
            loss = sum((o * torch.ones_like(o).mul_(0.5)).sum() for o in outs if o.is_floating_point())
            if isinstance(loss, torch.Tensor):
                loss.backward()


def fused_rnn_cells(device: str, layout, found: dict, label: str) -> None:
    """The simulator's own kernels that op_db does not reach: the fused LSTM / GRU cells (rnn.cpp)."""
    b, h = 3, 5
    gates = [layout(torch.randn(b, 4 * h, device=device)).requires_grad_() for _ in range(2)]
    cx = layout(torch.randn(b, h, device=device)).requires_grad_()
    bias = [torch.randn(4 * h, device=device).requires_grad_() for _ in range(2)]
    g3 = [layout(torch.randn(b, 3 * h, device=device)).requires_grad_() for _ in range(2)]
    b3 = [torch.randn(3 * h, device=device).requires_grad_() for _ in range(2)]
    with StrideAudit(found, label):
        hy, cy, _ = torch.ops.aten._thnn_fused_lstm_cell(gates[0], gates[1], cx, bias[0], bias[1])
        (hy.sum() + cy.sum()).backward()
        hy, _ = torch.ops.aten._thnn_fused_gru_cell(g3[0], g3[1], cx, b3[0], b3[1])
        hy.sum().backward()


def stub_expecttest() -> None:
    """op_db's module imports expecttest (a PyTorch test dependency); only the samples are used here."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        m = types.ModuleType("expecttest")
        m.TestCase = unittest.TestCase
        sys.modules["expecttest"] = m


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", default="", help="comma-separated OpInfo names (default: all)")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--skip", default="", help="comma-separated OpInfo names not to run (one that crashed the process)")
    ap.add_argument("--out", default=str(HERE / "results" / "stride_audit.json"))
    a = ap.parse_args(argv)
    import neuron_backend

    stub_expecttest()
    from torch.testing._internal.common_methods_invocations import op_db

    neuron_backend.enable()
    only = {s for s in a.ops.split(",") if s}
    skip = {s for s in a.skip.split(",") if s}
    found: dict = {"neuron": {}, "cpu": {}}
    errors: dict = {}
    t0, n = time.time(), 0
    for op in op_db:
        if (only and op.name not in only) or op.name in skip:
            continue
        print(f"op {op.name}", file=sys.stderr, flush=True)  # the last one named is the one a crash stopped in
        if torch.float32 not in op.supported_dtypes("cpu"):
            continue
        try:
            samples = list(op.sample_inputs("cpu", torch.float32, requires_grad=op.supports_autograd))[: a.samples]
        except Exception as e:  # noqa: BLE001
            errors[op.name] = f"samples: {type(e).__name__}"
            continue
        for k, sample in enumerate(samples):
            for lname, layout in LAYOUTS.items():
                for device in ("neuron", "cpu"):
                    try:
                        run_sample(op, sample, device, layout, found[device], f"{op.name}#{k}/{lname}")
                        n += 1
                    except Exception as e:  # noqa: BLE001 - an op that rejects a layout: not this audit's subject
                        errors.setdefault(f"{op.name}/{lname}/{device}", f"{type(e).__name__}: {str(e)[:160]}")
    if not only or "fused_rnn_cells" in only:
        for lname in ("contiguous", "transposed", "sliced"):
            try:  # the CPU has no fused cells (CUDA-only upstream): the simulator's own kernels are compared
                fused_rnn_cells("neuron", LAYOUTS[lname], found["neuron"], f"fused_rnn_cells/{lname}")
                n += 1
            except Exception as e:  # noqa: BLE001
                errors[f"fused_rnn_cells/{lname}"] = f"{type(e).__name__}: {str(e)[:160]}"
    only_neuron = {k: v for k, v in found["neuron"].items() if k not in found["cpu"]}
    report = {"torch": torch.__version__, "runs": n, "skipped": sorted(skip), "seconds": round(time.time() - t0, 1),
              "simulator_only": only_neuron, "shared_with_cpu": found["cpu"], "errors": errors}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(f"{n} runs in {report['seconds']} s; simulator-only mismatches: {len(only_neuron)} "
          f"{sorted(only_neuron)}; shared with the CPU: {len(found['cpu'])} {sorted(found['cpu'])}")
    return 1 if only_neuron else 0


if __name__ == "__main__":
    sys.exit(main())
