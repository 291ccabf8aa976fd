"""PyTorch's OpInfo samples for the ops the op policy marks native, run on the simulated neuron device
and compared with the CPU (used by test_opinfo_sweep.py; also runnable by hand).

    NEURON_PORT_SIMULATE=1 python -m tests.simulator.opinfo_sweep [--full] [--ops a,b] [--json out.json]

Which dtypes: float32, bfloat16, float16, int32, int64 and bool, each where the OpInfo declares it
supported on the CPU or on CUDA. PyTorch has no OpInfo dtype list for TorchNeuron; CUDA's
(`supported_dtypes("cuda")`, i.e. `dtypesIfCUDA`) stands in for "the device path accepts it" because
TorchNeuron's native kernels are lowered by the compiler for a device, like CUDA's, rather than being
PyTorch's CPU kernels, and CUDA's list is the broadest device dtype list PyTorch maintains per op
(for example it has integer `histc`, which the CPU kernel lacks and Hugging Face MoE layers call on
the device). A dtype only the CPU supports is swept too: the simulator runs it like the CPU.

The reference: the same sample on the CPU when the CPU supports the dtype (the results must then be
equal within assert_close's default tolerances for the dtype: the simulator runs the CPU kernel). For
a dtype only CUDA supports, the CPU result on the sample with its tensors of that dtype widened to
float64, cast to the dtype the simulator returned; the simulator's dtype and shape must equal those of
the meta kernel (PyTorch's dtype rules) where the op has one.

Every failure is (op, dtype, kind, message): kind "error" (the neuron call raised while the reference
did not) or "mismatch" (assert_close failed). A sample whose CPU reference runs an op PyTorch tags
``nondeterministic_seeded`` draws random numbers (SDPA with ``dropout_p``): the device draws from its own generator, as any accelerator does, so
only its shape and dtype are compared. The test compares them with rules/op_limitations.toml.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
import unittest
from collections import defaultdict

import torch

# torch.testing._internal.common_utils imports expecttest (a test-only PyTorch dependency that is not
# in neuron-port's extras). Only op_db and its sample inputs are used here, never PyTorch's TestCase,
# so a stand-in base class is enough when the package is missing.
try:  # pragma: no cover - depends on the environment
    import expecttest  # noqa: F401
except ImportError:  # pragma: no cover
    _m = types.ModuleType("expecttest")

    class _TestCase(unittest.TestCase):
        def assertExpectedInline(self, *args, **kwargs):  # noqa: N802
            raise unittest.SkipTest("expecttest is not installed")

    _m.TestCase = _TestCase
    sys.modules["expecttest"] = _m

DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool)
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16",
               torch.int32: "int32", torch.int64: "int64", torch.bool: "bool"}

# OpInfo name (with ".variant") -> the ATen op of the policy it exercises, where the OpInfo's own
# name is not that op's name.
ALIASES = {
    "nn.functional.cross_entropy": "cross_entropy_loss",
    "nn.functional.layer_norm": "native_layer_norm",
    "nn.functional.group_norm": "native_group_norm",
    "nn.functional.batch_norm": "native_batch_norm",
    "nn.functional.max_pool2d": "max_pool2d_with_indices",
    "nn.functional.avg_pool2d": "avg_pool2d",
    "nn.functional.adaptive_avg_pool2d": "_adaptive_avg_pool2d",
    "nn.functional.nll_loss": "nll_loss_forward",
    "nn.functional.logsigmoid": "log_sigmoid_forward",
    "nn.functional.conv1d": "convolution",
    "nn.functional.conv2d": "convolution",
    "nn.functional.scaled_dot_product_attention": "_scaled_dot_product_fused_attention_overrideable",
    "nn.functional.embedding": "embedding",
    "nn.functional.pad": "constant_pad_nd",
    "matmul": "mm",
    "masked_scatter": "masked_scatter_",
    "nn.functional.gelu": "gelu",
    "nn.functional.silu": "silu",
    "nn.functional.relu": "relu",
    "nn.functional.mse_loss": "mse_loss",
    "nn.functional.smooth_l1_loss": "smooth_l1_loss",
    "nn.functional.hardtanh": "hardtanh",
    "nn.functional.leaky_relu": "leaky_relu",
    "nn.functional.elu": "elu",
    "nn.functional.softplus": "softplus",
    "nn.functional.threshold": "threshold",
    "nn.functional.one_hot": "one_hot",
    "nn.functional.rms_norm": "rms_norm",
    "nn.functional.binary_cross_entropy_with_logits": "binary_cross_entropy_with_logits",
    "nn.functional.linear": "linear",
}
# OpInfos left out: random results, other layouts, masked/sparse reference wrappers.
EXCLUDE_PREFIXES = ("masked.", "sparse.", "_refs.", "nn.functional.dropout", "bernoulli", "normal", "uniform",
                    "multinomial", "randn", "rand", "randint", "randperm")
UNINITIALIZED = ("empty_like", "new_empty_strided", "empty", "new_empty", "empty_strided")

# The representative subset of the normal test run (CI): reductions, indexing, histc, pad, sort/topk,
# cumsum, scatter/gather, where, the matmul family, norms, softmax and a few elementwise ops.
SUBSET = (
    "sum", "mean", "amax", "argmax", "max.reduction_with_dim", "all", "logsumexp",
    "index_select", "index_add", "index_put", "index_copy", "masked_fill", "masked_select", "nonzero",
    "histc",
    "nn.functional.pad.constant", "constant_pad_nd", "nn.functional.pad.reflect",
    "sort", "topk", "argsort",
    "cumsum",
    "scatter", "scatter_add", "gather",
    "where",
    "mm", "bmm", "addmm", "mv", "nn.functional.linear",
    "native_layer_norm", "linalg.vector_norm", "nn.functional.rms_norm",
    "softmax", "log_softmax",
    "add", "div.no_rounding_mode", "remainder", "clamp", "bitwise_and",
    "cat", "repeat_interleave", "nn.functional.embedding", "tril",
)


def full_name(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def aten_base(op) -> set[str]:
    """Candidate ATen base names of an OpInfo."""
    out = set()
    for n in (op.name, op.aten_name or ""):
        if not n:
            continue
        out.add(n)
        out.add(n.replace("linalg.", "linalg_").replace("special.", "special_"))
        if n.startswith("nn.functional."):
            out.add(n[len("nn.functional."):])
    alias = ALIASES.get(op.name)
    if alias:
        out.add(alias)
    return out


def native_opinfos(native: set[str]):
    from torch.testing._internal.common_methods_invocations import op_db

    chosen = []
    for op in op_db:
        if op.name.startswith(EXCLUDE_PREFIXES):
            continue
        if aten_base(op) & native:
            chosen.append(op)
    return chosen


def sweep_dtypes(op) -> list[torch.dtype]:
    cpu, cuda = op.supported_dtypes("cpu"), op.supported_dtypes("cuda")
    return [d for d in DTYPES if d in cpu or d in cuda]


# ------------------------------------------------------------------ moving samples between devices
def _map(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (torch.device, str)) and str(obj) == "cpu":
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[_map(o, fn) for o in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: _map(v, fn) for k, v in obj.items()}
    return obj


def _to(device):
    def fn(x):
        if isinstance(x, torch.Tensor):
            t = x.detach().to(device)
            return t
        return torch.device(device) if isinstance(x, torch.device) else device
    return fn


def _widen(dtype):
    def fn(x):
        if isinstance(x, torch.Tensor) and x.dtype == dtype:
            return x.detach().to(torch.float64)
        return x
    return fn


def _to_cpu(obj):
    return _map(obj, lambda t: t.cpu() if isinstance(t, torch.Tensor) else t)


def _call(op, inp, args, kwargs, inplace=False):
    if inplace:
        return op.inplace_variant(inp.clone(), *args, **kwargs)
    return op(inp, *args, **kwargs)


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return f"{type(e).__name__}: {s[0] if s else ''}"[:300]


def _meta_like(op, sample):
    try:
        inp, args, kwargs = _map((sample.input, sample.args, sample.kwargs), _to("meta"))
        return _call(op, inp, args, kwargs)
    except Exception:  # noqa: BLE001 - data-dependent ops have no meta kernel
        return None


def _check_meta(actual, meta):
    if meta is None:
        return
    if isinstance(actual, torch.Tensor) and isinstance(meta, torch.Tensor):
        assert actual.dtype == meta.dtype, f"dtype {actual.dtype} != meta kernel's {meta.dtype}"
        assert actual.shape == meta.shape, f"shape {tuple(actual.shape)} != meta kernel's {tuple(meta.shape)}"
    elif isinstance(actual, (list, tuple)) and isinstance(meta, (list, tuple)) and len(actual) == len(meta):
        for a, m in zip(actual, meta):
            _check_meta(a, m)


def _cast_like(expected, actual):
    if isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor):
        if actual.dtype.is_floating_point or actual.dtype == expected.dtype:
            return expected.to(actual.dtype)
        return expected.round().to(actual.dtype) if expected.dtype.is_floating_point else expected.to(actual.dtype)
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        return type(actual)(*[_cast_like(e, a) for e, a in zip(expected, actual)]) if hasattr(actual, "_fields") \
            else type(actual)(_cast_like(e, a) for e, a in zip(expected, actual))
    return expected


def _compare(actual, expected, uninitialized: bool, dtype, widened: bool):
    if uninitialized:
        a, e = actual, expected
        assert isinstance(a, torch.Tensor) and a.shape == e.shape and a.dtype == e.dtype, "metadata differs"
        return
    kw = {}
    if widened and dtype in (torch.bfloat16, torch.float16):
        kw = {"rtol": 1.6e-2 if dtype == torch.bfloat16 else 1e-3, "atol": 1e-2 if dtype == torch.bfloat16 else 1e-3}
    torch.testing.assert_close(actual, expected, equal_nan=True, check_device=False, **kw)


def run_case(op, dtype, max_samples: int | None = None, inplace: bool = False) -> tuple[int, list[dict]]:
    """Run the samples of one (OpInfo, dtype), its function or its in-place variant; return (samples
    compared, failures)."""
    failures = []
    cpu_ok = dtype in op.supported_dtypes("cpu")
    uninitialized = op.name in UNINITIALIZED
    n = 0
    torch.manual_seed(0)
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))
    except Exception as e:  # noqa: BLE001
        return 0, [{"kind": "samples", "message": _first_line(e)}]
    for sample in samples:
        if max_samples is not None and n >= max_samples:
            break
        inp, args, kwargs = sample.input, sample.args, sample.kwargs
        # reference
        widened = not cpu_ok
        try:
            if cpu_ok:
                expected = _call(op, *_map((inp, args, kwargs), _to("cpu")), inplace=inplace)
            else:
                expected = _call(op, *_map((inp, args, kwargs), _widen(dtype)), inplace=False)
        except Exception:  # noqa: BLE001 - a sample the reference rejects says nothing about the device
            continue
        n += 1
        try:
            ninp, nargs, nkwargs = _map((inp, args, kwargs), _to("neuron"))
            actual = _to_cpu(_call(op, ninp, nargs, nkwargs, inplace=inplace))
        except Exception as e:  # noqa: BLE001
            failures.append({"kind": "error", "message": _first_line(e)})
            continue
        try:
            if widened:
                _check_meta(actual, _meta_like(op, sample))
                expected = _cast_like(expected, actual)
            _compare(actual, expected, uninitialized, dtype, widened)
        except Exception as e:  # noqa: BLE001
            if not (cpu_ok and _draws(op, inp, args, kwargs, inplace)):
                failures.append({"kind": "mismatch", "message": _first_line(e)})
                continue
            try:  # a sample that draws (SDPA's dropout_p): the device has its own generator, as every
                _compare(actual, expected, True, dtype, widened)  # accelerator does: shape and dtype only
            except Exception as e2:  # noqa: BLE001
                failures.append({"kind": "mismatch", "message": _first_line(e2)})
    return n, failures


def _draws(op, inp, args, kwargs, inplace) -> bool:
    """The reference runs an op PyTorch tags ``nondeterministic_seeded`` (a draw: dropout, bernoulli, ...).
    Not two seeds compared: OpInfo wrappers such as SDPA's reseed the generator before each call."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Draws(TorchDispatchMode):
        seen = False

        def __torch_dispatch__(self, func, types, a=(), k=None):
            if torch.Tag.nondeterministic_seeded in func.tags:
                Draws.seen = True
            return func(*a, **(k or {}))

    try:
        with Draws():
            _call(op, *_map((inp, args, kwargs), _to("cpu")), inplace=inplace)
    except Exception:  # noqa: BLE001
        return False
    return Draws.seen


def sweep(names: list[str] | None = None, max_samples: int | None = None, progress=None) -> dict:
    from neuron_backend import policy

    native = set(policy.native_ops())
    ops = native_opinfos(native)
    if names is not None:
        wanted = set(names)
        ops = [o for o in ops if full_name(o) in wanted or o.name in wanted]
    out = {"ops": [], "samples": 0, "inplace_samples": 0, "cases": 0, "by_dtype": defaultdict(int), "failures": []}
    t0 = time.time()
    for op in ops:
        dts = sweep_dtypes(op)
        out["ops"].append(full_name(op))
        variants = [False] + ([True] if op.inplace_variant is not None and op.name not in UNINITIALIZED else [])
        for dt in dts:
            for inplace in variants:
                n, fails = run_case(op, dt, max_samples, inplace)
                out["cases"] += 1
                out["samples"] += n
                out["by_dtype"][DTYPE_NAMES[dt]] += n
                out["inplace_samples"] += n if inplace else 0
                grouped: dict[tuple, int] = defaultdict(int)
                for f in fails:
                    grouped[(f["kind"], f["message"])] += 1
                for (kind, msg), count in grouped.items():
                    out["failures"].append({"op": full_name(op) + ("_" if inplace else ""), "dtype": DTYPE_NAMES[dt],
                                            "kind": kind, "message": msg, "count": count, "samples": n})
        if progress:
            progress(full_name(op), time.time() - t0)
    out["by_dtype"] = dict(out["by_dtype"])
    out["seconds"] = round(time.time() - t0, 1)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="every OpInfo of a native op (default: the subset)")
    ap.add_argument("--ops", default=None, help="comma-separated OpInfo names")
    ap.add_argument("--max-samples", type=int, default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    import neuron_backend

    assert neuron_backend.enable()
    names = a.ops.split(",") if a.ops else (None if a.full else list(SUBSET))
    prog = (lambda name, t: print(f"[{t:7.1f}s] {name}", file=sys.stderr, flush=True)) if a.verbose else None
    res = sweep(names, a.max_samples, prog)
    text = json.dumps(res, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    print(f"ops {len(res['ops'])} cases {res['cases']} samples {res['samples']} failures "
          f"{len(res['failures'])} ({sum(f['count'] for f in res['failures'])} samples) in {res['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
