"""Per-op cost of a shape-only run, in one process per mode (bench/shape_only/run.py starts them):

* ``shape_only``: NEURON_PORT_SIMULATE=1 NEURON_PORT_SHAPE_ONLY=1 (+ NEURON_PORT_EVENTS_DIR): the tensors
  are fake ``neuron`` tensors, every call goes through the recording mode and the C++ accounting;
* ``fake``: no simulator, PyTorch's ``FakeTensorMode`` alone, fake ``cpu`` tensors (what the fake
  computation costs without the recording);
* ``simulator``: NEURON_PORT_SIMULATE=1 only: real ``neuron`` tensors (the simulator's eager path);
* ``meta``: plain ``meta`` tensors, no mode at all (the floor of any shape propagation in Python: the
  C++ meta kernels alone);
* ``cpu``: plain CPU tensors.

Cases (each: min over --repeats of a loop of --n calls, seconds per call):

* ``add16``: ``x + y``, 16-element float32 (one signature: a cache hit after the first);
* ``mm1024``: ``a @ b``, 1024 x 1024 float32 (a fake matmul costs the same as a small one; skipped on
  the real devices, where it measures the CPU's FLOP/s);
* ``view``: ``x.view(4, 4)`` (a metadata op: no kernel counted);
* ``linear_bwd``: ``F.linear(x, w, b).sum().backward()`` on 8x64 (a small autograd graph; its op count
  per iteration is read from the events file);
* ``add_new_sig``: ``x_i + x_i`` on --n-new tensors of distinct shapes (every call a new signature:
  site capture and a journal line each).

Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F


def timed(fn, n: int, repeats: int) -> float:
    fn(10)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(n)
        best = min(best, time.perf_counter() - t0)
    return best / n


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("shape_only", "fake", "simulator", "meta", "cpu"), required=True)
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--n-new", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--case", action="append", help="only these cases (repeatable); 'none': set-up only")
    a = p.parse_args()

    ctx = None
    if a.mode == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode

        ctx = FakeTensorMode()
        ctx.__enter__()
        device = "cpu"
    elif a.mode in ("cpu", "meta"):
        device = a.mode
    else:
        device = "neuron"
    real = a.mode in ("simulator", "cpu")
    torch.set_num_threads(1)

    x = torch.randn(16, device=device)
    y = torch.randn(16, device=device)
    big_a = torch.randn(1024, 1024, device=device) if not real else None
    big_b = torch.randn(1024, 1024, device=device) if not real else None
    lx = torch.randn(8, 64, device=device)
    w = torch.randn(32, 64, device=device, requires_grad=True)
    b = torch.randn(32, device=device, requires_grad=True)
    news = [torch.randn(i + 1, 3, device=device) for i in range(a.n_new + 10)]

    def add16(n):
        for _ in range(n):
            x + y

    def mm1024(n):
        for _ in range(n):
            big_a @ big_b

    def view(n):
        for _ in range(n):
            x.view(4, 4)

    def linear_bwd(n):
        for _ in range(n):
            F.linear(lx, w, b).sum().backward()

    want = set(a.case or ("add16", "mm1024", "view", "linear_bwd", "add_new_sig"))
    out = {"mode": a.mode, "n": a.n, "repeats": a.repeats, "seconds_per_call": {}}
    if "add16" in want:
        out["seconds_per_call"]["add16"] = timed(add16, a.n, a.repeats)
    if "mm1024" in want and not real:
        out["seconds_per_call"]["mm1024"] = timed(mm1024, a.n // 10, a.repeats)
    if "view" in want:
        out["seconds_per_call"]["view"] = timed(view, a.n, a.repeats)
    if "linear_bwd" in want:
        out["seconds_per_call"]["linear_bwd"] = timed(linear_bwd, a.n // 20, a.repeats)
    if "add_new_sig" in want:  # one pass only (a second pass would hit the signatures of the first)
        fresh = iter(range(10, a.n_new + 10))
        t0 = time.perf_counter()
        for _ in range(a.n_new):
            t = news[next(fresh)]
            t + t
        out["seconds_per_call"]["add_new_sig"] = (time.perf_counter() - t0) / a.n_new
    out["loop_calls"] = {  # calls of each case's loops, warm-up included, for the events-file check
        "add16": 10 + a.n * a.repeats,
        "mm1024": 10 + (a.n // 10) * a.repeats,
        "view": 10 + a.n * a.repeats,
        "linear_bwd": 10 + (a.n // 20) * a.repeats,
        "add_new_sig": a.n_new,
    }
    if ctx is not None:
        ctx.__exit__(None, None, None)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
