"""Memory statistics of ``torch.neuron`` (and ``torch.neuron.memory``): the C++ allocator counts the
bytes of every device (allocated / reserved / peaks, Neuron size classes); the total is one logical
core's HBM (trn2 at LNC=2: 24 GiB)."""

from __future__ import annotations

from typing import Any

from . import runtime
from .management import device_count, index
from .runtime import HBM_PER_LOGICAL_CORE


def memory_stats(device: Any = None) -> dict[str, int]:
    s = dict(runtime.C.memory_stats(index(device)))
    s["active_bytes.all.current"] = s["allocated_bytes.all.current"]
    s["active_bytes.all.peak"] = s["allocated_bytes.all.peak"]
    s["num_alloc_retries"] = 0
    s["num_ooms"] = 0
    return dict(sorted(s.items()))


def memory_allocated(device: Any = None) -> int:
    return runtime.C.memory_stats(index(device))["allocated_bytes.all.current"]


def max_memory_allocated(device: Any = None) -> int:
    return runtime.C.memory_stats(index(device))["allocated_bytes.all.peak"]


def memory_reserved(device: Any = None) -> int:
    return runtime.C.memory_stats(index(device))["reserved_bytes.all.current"]


def max_memory_reserved(device: Any = None) -> int:
    return runtime.C.memory_stats(index(device))["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: Any = None) -> None:
    runtime.C.reset_peak_memory_stats(index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    pass


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    for i in range(device_count()):
        runtime.C.empty_cache(i)


def mem_get_info(device: Any = None) -> tuple[int, int]:
    total = HBM_PER_LOGICAL_CORE
    return total - memory_reserved(device), total


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    s = memory_stats(device)
    mb = lambda b: f"{b / (1 << 20):10.2f} MiB"  # noqa: E731
    lines = [
        "=" * 60,
        f" neuron-port simulated memory summary, device neuron:{index(device)}",
        "=" * 60,
        f" Allocated memory (current) | {mb(s['allocated_bytes.all.current'])}",
        f" Allocated memory (peak)    | {mb(s['allocated_bytes.all.peak'])}",
        f" Reserved memory (current)  | {mb(s['reserved_bytes.all.current'])}",
        f" Reserved memory (peak)     | {mb(s['reserved_bytes.all.peak'])}",
        f" Allocations / frees        | {s['allocation.all.allocated']} / {s['allocation.all.freed']}",
        f" Device memory (HBM)        | {mb(HBM_PER_LOGICAL_CORE)}",
        "=" * 60,
    ]
    return "\n".join(lines) + "\n"
