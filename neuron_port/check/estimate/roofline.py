"""The device time of a step's work on one device (docs/estimate.md, "Formulas"): per work item the
roofline ``max(FLOPs / peak(dtype), bytes / bandwidth)``, at peak for the lower bound and at the achievable
rates for the expected time (a GEMM's from its shape and a matrix op's from the device, efficiency.py;
other ops' assumed), and the CPU-fallback ops at their measured host time and copies (a GPU runs them on
the device at its roofline). ``device_time`` walks the items once, so every item meets the device table
and the efficiency model once and comes back with all the step needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from neuron_port.check.estimate.devices import Device
from neuron_port.check.estimate.efficiency import call_latency, matrix_efficiency
from neuron_port.check.estimate.flops import FAMILIES
from neuron_port.check.estimate.stepwork import StepWork, WorkItem

@dataclass(frozen=True)
class Roofline:
    lower: float
    expected: float
    lower_compute: float = 0.0  # the FLOPs at peak alone (the lower bound's compute part)


MATRIX_FAMILIES = ("matmul", "convolution", "attention")
TF32_PRECISIONS = ("high", "medium")


def precision_rule(device: Device, work: StepWork) -> dict[str, Any]:
    """The rate fp32 matmuls run at on ``device``, with why (a visible assumption)."""
    precision = work.float32_matmul_precision
    if device.kind == "gpu" and "tf32" in device.peak_tflops and precision in TF32_PRECISIONS:
        return {"fp32_matmul": "tf32", "tflops": device.peak_tflops["tf32"],
                "why": f"the run set float32 matmul precision {precision!r} (allow_tf32): TF32 tensor cores"}
    if device.kind == "trainium":
        return {"fp32_matmul": "fp32", "tflops": device.peak_tflops.get("fp32"),
                "why": "TorchNeuron compiles with --auto-cast=none (torch_neuronx/kernels/compiler_config.py), "
                       "so neuronx-cc's default FP32->BF16 matmul cast does not apply: fp32 matmuls at the fp32 "
                       "rate; cast with bf16 autocast"}
    return {"fp32_matmul": "fp32", "tflops": device.peak_tflops.get("fp32"),
            "why": f"float32 matmul precision {precision or 'highest'!r}: fp32 matmuls at the fp32 rate"}


def item_seconds(item: WorkItem, device: Device, share: float, a: Mapping[str, float],
                 fp32_matmul: str = "fp32", calls_share: float = 0.0) -> Roofline:
    """Roofline time of ``share`` of one work item on ``device``; ``calls_share`` of its calls run on the
    unit (one process's: each rank issues every call of its op stream) and pay the per-call latency."""
    dtype = fp32_matmul if item.dtype == "fp32" and item.family in MATRIX_FAMILIES else item.dtype
    peak = device.peak(dtype, item.family)
    # the expected rate at the share of the peak the part sustains (devices.toml); the lower bound at the peak
    achievable = device.rate(dtype, item.family, backward="backward" in item.op) * device.sustained_compute_share
    bandwidth = device.hbm_gbps * 1e9
    compute = item.flops * share / peak if peak > 0 else 0.0
    run = item.flops * share / achievable if achievable > 0 else 0.0
    memory = item.bytes * share / bandwidth if bandwidth > 0 else 0.0
    efficiency = matrix_efficiency(item.family, item.gemm, device.matmul_ceiling, device.matmul_tiles,
                                   device.matmul_units, device.attention_efficiency, a["compute_fraction"])
    run = run / efficiency + item.calls * calls_share * call_latency(item.family, device.kind, a)
    return Roofline(max(compute, memory), max(run, memory / a["memory_fraction"]), compute)



def host_fallback_seconds(work: StepWork, core_share: float, a: Mapping[str, float]) -> float:
    """Per step on one core of a device that runs the fallback ops on the host: its share of their host
    time (measured, or modelled where a shape-only run measured none) and copies (they scale with the
    data), and a round trip per fallback call of one process's op stream (every data-parallel process
    makes all of them)."""
    host = (work.fallback_host_seconds or 0.0) + (work.fallback_modeled_flops / (a["host_fallback_gflops"] * 1e9)
                                                  + work.fallback_modeled_bytes / (a["host_fallback_gbps"] * 1e9))
    copies = work.fallback_copy_bytes / (a["host_link_gbps"] * 1e9)
    calls = work.fallback_calls / max(work.processes, 1)
    return (host + copies) * core_share + calls * a["host_transfer_seconds"]


def fallback_item(work: StepWork) -> WorkItem:
    """The fallback ops as one item of device work: a GPU has CUDA kernels for what falls back on Trainium."""
    return WorkItem("fallback", "elementwise", "fp32", work.fallback_calls, work.fallback_flops,
                    work.fallback_copy_bytes)


@dataclass
class DeviceTime:
    """One device's time for one unit's share of the step: the expected device seconds (and by family),
    the eager ops one process issues, the fallback ops' seconds and the lower bound."""
    rule: dict[str, Any]
    expected: float = 0.0
    by_family: dict[str, float] = field(default_factory=lambda: {f: 0.0 for f in FAMILIES})
    eager_ops: float = 0.0
    fallback: float = 0.0
    lower: float = 0.0


def device_time(work: StepWork, device: Device, share: float, core_share: float,
                a: Mapping[str, float]) -> DeviceTime:
    """``share`` of the step's work on one unit of ``device`` (the fallback ops at ``core_share``, one
    core's). The lower bound: no schedule beats every FLOP at the peak of its dtype, or the bytes no
    schedule avoids at peak bandwidth (parameters read and written once, gradients written and read
    once: 4x the optimizer's parameter list), whichever is longer."""
    result = DeviceTime(precision_rule(device, work))
    fp32_matmul = result.rule["fp32_matmul"]
    on_device = fallback_item(work) if device.kind == "gpu" else None
    if on_device is None:
        result.fallback = host_fallback_seconds(work, core_share, a)
    compute_floor = 0.0
    for item in (*work.items, *([on_device] if on_device is not None else [])):
        if item is on_device:
            result.fallback = item_seconds(item, device, core_share, a).expected
            continue
        r = item_seconds(item, device, share, a, fp32_matmul, 1.0 / max(work.processes, 1))
        result.expected += r.expected
        result.by_family[item.family] = result.by_family.get(item.family, 0.0) + r.expected
        compute_floor += r.lower_compute
        if not item.compiled and item.family != "fallback":  # a fallback pays its host round trip
            result.eager_ops += item.calls
    unavoidable = 4.0 * work.parameter_bytes * share * max(work.processes, 1)  # per rank, times the unit's ranks
    result.lower = max(compute_floor, unavoidable / (device.hbm_gbps * 1e9) if device.hbm_gbps > 0 else 0.0)
    return result
