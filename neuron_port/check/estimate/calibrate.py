"""The host CPU as a device of the cost model, measured by a short microbenchmark: the one device the model
can be checked against here (docs/estimate.md, "Validation"). Peak FLOP/s: the best of repeated float32
matmuls; bandwidth: the best of repeated large copies (bytes read + written); dispatch: the best time of a
tiny eager op (PyTorch's per-op overhead on this CPU). Best-of, so that each figure is a peak: the model at
these figures bounds the measured time from below. Times are this thread's CPU time (one intra-op thread),
as the validation's measured steps are. Imports torch (the runtime half only)."""

from __future__ import annotations

import time
from typing import Any, Callable

from neuron_port.check.estimate.devices import Device, Price


def _clock() -> Callable[[], float]:
    """This thread's CPU time with one intra-op thread (the work runs here; time the machine gave other
    processes is not counted, so a loaded machine measures the same peaks), else the wall clock."""
    import torch

    return time.thread_time if torch.get_num_threads() == 1 else time.perf_counter


def _best(run: Callable[[], Any], repeats: int) -> float:
    """The least time of ``run`` over ``repeats``."""
    clock = _clock()
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        run()
        best = min(best, clock() - start)
    return best


def _conv_flops_per_second(repeats: int) -> tuple[float, float]:
    """Nominal FLOP/s of 3x3 convolutions (plain, strided, dilated and grouped), the best of them, forward
    and backward apart: oneDNN's forward algorithms beat the matmul rate in nominal FLOPs, by a factor that
    depends on the shape, and its backward (the input and the weight gradients, counted as two forwards
    as flops.py counts them) runs at its own rate (0.94-1.01 of the forward's on this project's machine)."""
    import torch

    forward = backward = 0.0
    x = torch.randn(16, 128, 16, 16, requires_grad=True)
    for stride, dilation, groups in ((1, 1, 1), (2, 1, 1), (1, 2, 2)):
        conv = torch.nn.Conv2d(128, 128, 3, stride=stride, padding=dilation, dilation=dilation, groups=groups)
        with torch.no_grad():
            out = conv(x)
            seconds = _best(lambda: conv(x), repeats)
        flops = 2.0 * out.numel() * (128 // groups) * 9
        forward = max(forward, flops / seconds)
        grad = torch.randn_like(out)
        out = conv(x)
        gradients = (x, conv.weight)
        torch.autograd.grad(out, gradients, grad, retain_graph=True)  # warm the backward kernels
        backward = max(backward, 2.0 * flops / _best(lambda: torch.autograd.grad(out, gradients, grad,
                                                                                 retain_graph=True), repeats))
    return forward, backward


def measure_cpu(matmul_sizes: tuple[int, ...] = (512, 1024, 2048), copy_mib: tuple[int, ...] = (2, 16, 128),
                repeats: int = 7) -> tuple[Device, dict[str, float]]:
    """(the CPU as a device, the measured figures: flops, conv_flops, conv_backward_flops, bytes_per_second,
    dispatch_seconds).
    Each figure is the best over sizes and repeats: a working set in cache streams faster than one in
    DRAM, and the model needs peaks to give a lower bound."""
    import torch

    flops = 0.0
    for size in matmul_sizes:
        a, b, out = torch.randn(size, size), torch.randn(size, size), torch.empty(size, size)
        torch.mm(a, b, out=out)  # warm the kernel
        flops = max(flops, 2.0 * size**3 / _best(lambda: torch.mm(a, b, out=out), repeats))
    bandwidth = 0.0
    for mib in copy_mib:
        n = mib * 2**20 // 4
        src, dst = torch.ones(n), torch.empty(n)
        dst.copy_(src)  # touch the pages
        bandwidth = max(bandwidth, 2.0 * n * 4 / _best(lambda: dst.copy_(src), repeats))
    x, y = torch.ones(1), torch.ones(1)

    def hundred_adds() -> None:
        for _ in range(100):
            torch.add(x, y)

    dispatch = _best(hundred_adds, repeats) / 100
    conv, conv_backward = _conv_flops_per_second(repeats)
    tflops = flops / 1e12
    device = Device(id="host-cpu", name=f"this CPU ({torch.get_num_threads()} thread(s)), measured", kind="cpu",
                    per="chip", peak_tflops={"fp32": tflops, "bf16": tflops, "f16": tflops}, hbm_gbps=bandwidth / 1e9,
                    hbm_gib=0.0, chip_cores=1, price_device="host-cpu", sources=("measured",),
                    price=Price(None, None, None, False), family_peak_tflops={"convolution": conv / 1e12,
                                                                          "convolution_backward": conv_backward / 1e12})
    return device, {"flops": flops, "conv_flops": conv, "conv_backward_flops": conv_backward,
                    "bytes_per_second": bandwidth, "dispatch_seconds": dispatch}
