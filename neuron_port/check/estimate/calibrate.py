"""The host CPU as a device of the cost model, measured by a short microbenchmark: the one device the model
can be checked against here (docs/estimate.md, "Validation"). Peak FLOP/s: the best of repeated float32
matmuls; bandwidth: the best of repeated large copies (bytes read + written); dispatch: the best time of a
tiny eager op (PyTorch's per-op overhead on this CPU). Best-of, so that each figure is a peak: the model at
these figures bounds the measured time from below. Imports torch (the runtime half only)."""

from __future__ import annotations

import time
from typing import Any, Callable

from neuron_port.check.estimate.devices import Device, Price


def _best(run: Callable[[], Any], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def measure_cpu(matmul_size: int = 1024, copy_mib: int = 256, repeats: int = 7) -> tuple[Device, dict[str, float]]:
    """(the CPU as a device, the measured figures: flops, bytes_per_second, dispatch_seconds)."""
    import torch

    a = torch.randn(matmul_size, matmul_size)
    b = torch.randn(matmul_size, matmul_size)
    out = torch.empty(matmul_size, matmul_size)
    torch.mm(a, b, out=out)  # warm the kernel
    flops = 2.0 * matmul_size**3 / _best(lambda: torch.mm(a, b, out=out), repeats)
    n = copy_mib * 2**20 // 4
    src, dst = torch.ones(n), torch.empty(n)
    dst.copy_(src)  # touch the pages
    bandwidth = 2.0 * n * 4 / _best(lambda: dst.copy_(src), repeats)
    x, y = torch.ones(1), torch.ones(1)

    def hundred_adds() -> None:
        for _ in range(100):
            torch.add(x, y)

    dispatch = _best(hundred_adds, repeats) / 100
    tflops = flops / 1e12
    device = Device(id="host-cpu", name=f"this CPU ({torch.get_num_threads()} thread(s)), measured", kind="cpu",
                    per="chip", peak_tflops={"fp32": tflops, "bf16": tflops, "f16": tflops}, hbm_gbps=bandwidth / 1e9,
                    hbm_gib=0.0, chip_cores=1, price_device="host-cpu", sources=("measured",),
                    price=Price(None, None, None, False))
    return device, {"flops": flops, "bytes_per_second": bandwidth, "dispatch_seconds": dispatch}
