"""The cost model (docs/estimate.md): the per-step work of the run on each device of the table.

Per work item (one op, dtype, family and GEMM shape, summed over a step): roofline time ``max(FLOPs /
peak(dtype), bytes / bandwidth)``, at peak for the lower bound and at the achievable rates for the expected
time (a GEMM's from its shape and a matrix op's from the device, efficiency.py; other ops' assumed);
plus a dispatch cost per eager op (none for ops inside compiled graphs; on an asynchronous device the
host issues ahead, so the slower of host and device counts), plus the CPU-fallback ops at their measured
host time and their device/host copies (a GPU runs them on the device), plus the collectives not hidden
behind compute (collectives.py). ``cores`` logical cores share the step's work evenly (one process per
core), while each core still dispatches the whole op stream of one process; a chip device runs it on
whole chips, ``ceil(cores / chip_cores)`` of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from neuron_port.check.estimate.assumptions import Assumption, values
from neuron_port.check.estimate.collectives import collective_seconds, per_rank_memory, sharding
from neuron_port.check.estimate.devices import Device, Price
from neuron_port.check.estimate.efficiency import matrix_efficiency
from neuron_port.check.estimate.flops import FAMILIES
from neuron_port.check.estimate.sizing import Sized, sized_for
from neuron_port.check.estimate.validation import validation
from neuron_port.check.estimate.stepwork import StepWork, WorkItem

NOTE = "Estimated from the simulated run with the assumptions below; not a measurement of Trainium."


@dataclass(frozen=True)
class Roofline:
    lower: float
    expected: float


MATRIX_FAMILIES = ("matmul", "convolution", "attention")
TF32_PRECISIONS = ("high", "medium")
ASYNC_KINDS = ("trainium", "gpu")  # the host enqueues ops ahead of the device (torchneuron.md 2.1; CUDA streams)


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
                 fp32_matmul: str = "fp32") -> Roofline:
    """Roofline time of ``share`` of one work item on ``device``."""
    dtype = fp32_matmul if item.dtype == "fp32" and item.family in MATRIX_FAMILIES else item.dtype
    peak = device.peak(dtype, item.family)
    achievable = device.rate(dtype, item.family, backward="backward" in item.op)
    bandwidth = device.hbm_gbps * 1e9
    compute = item.flops * share / peak if peak > 0 else 0.0
    run = item.flops * share / achievable if achievable > 0 else 0.0
    memory = item.bytes * share / bandwidth if bandwidth > 0 else 0.0
    efficiency = matrix_efficiency(item.family, item.gemm, device.matmul_ceiling, device.matmul_tiles,
                                   device.matmul_units, device.attention_efficiency, a["compute_fraction"])
    return Roofline(max(compute, memory), max(run / efficiency, memory / a["memory_fraction"]))


def fallback_seconds(work: StepWork, core_share: float, a: Mapping[str, float],
                     device: Optional[Device] = None) -> float:
    """Per step on one core: its share of the host time (measured, or modelled where a shape-only run
    measured none) and copies of the fallback ops (they scale with the data), and a round trip per
    fallback call of one process's op stream (every data-parallel process makes all of them). A GPU has
    CUDA kernels for what falls back on Trainium: there they run on the device at its roofline."""
    if device is not None and device.kind == "gpu":
        item = WorkItem("fallback", "elementwise", "fp32", work.fallback_calls, work.fallback_flops,
                        work.fallback_copy_bytes)
        return item_seconds(item, device, core_share, a).expected
    host = (work.fallback_host_seconds or 0.0) + (work.fallback_modeled_flops / (a["host_fallback_gflops"] * 1e9)
                                                  + work.fallback_modeled_bytes / (a["host_fallback_gbps"] * 1e9))
    copies = work.fallback_copy_bytes / (a["host_link_gbps"] * 1e9)
    calls = work.fallback_calls / max(work.processes, 1)
    return (host + copies) * core_share + calls * a["host_transfer_seconds"]


def layout(device: Device, cores: int) -> tuple[float, int, float]:
    """(share of the step's work on one unit of the device, logical cores issuing ops in parallel per
    unit, chips billed)."""
    if device.per == "core":
        return 1.0 / cores, 1, cores / device.chip_cores
    chips = max(1, math.ceil(cores / device.chip_cores))
    return 1.0 / chips, device.chip_cores, float(chips)


def lower_bound(work: StepWork, device: Device, share: float, fp32_matmul: str) -> float:
    """No schedule beats it: every FLOP at the peak of its dtype, or the bytes no schedule avoids at peak
    bandwidth (parameters read and written once, gradients written and read once: 4x the optimizer's
    parameter list), whichever is longer."""
    compute = 0.0
    for item in work.items:
        dtype = fp32_matmul if item.dtype == "fp32" and item.family in MATRIX_FAMILIES else item.dtype
        peak = device.peak(dtype, item.family)
        compute += item.flops * share / peak if peak > 0 else 0.0
    unavoidable = 4.0 * work.parameter_bytes * share * max(work.processes, 1)  # per rank, times the unit's ranks
    return max(compute, unavoidable / (device.hbm_gbps * 1e9) if device.hbm_gbps > 0 else 0.0)


def device_estimate(work: StepWork, device: Device, cores: int, a: Mapping[str, float],
                    tokens_per_step: Optional[float], price: Price) -> dict[str, Any]:
    share, issuers, chips = layout(device, cores)
    share *= work.world / max(work.processes, 1)  # a fake world recorded one rank of `world`
    rule = precision_rule(device, work)
    by_family = {f: 0.0 for f in FAMILIES}
    expected = 0.0
    eager_ops = 0.0
    for item in work.items:
        r = item_seconds(item, device, share, a, rule["fp32_matmul"])
        expected += r.expected
        by_family[item.family] = by_family.get(item.family, 0.0) + r.expected
        if not item.compiled and item.family != "fallback":  # a fallback pays its host round trip
            eager_ops += item.calls
    # Data parallel: every core runs the whole op stream of one recorded process on its share of the
    # data, so the per-op costs do not shrink with more cores (the compute and the bytes do)
    dispatch = eager_ops / max(work.processes, 1) * a["dispatch_seconds_per_op"]
    fallback = fallback_seconds(work, share / issuers, a, device)
    ranks = cores  # one rank per logical core (per GPU)
    comm = collective_seconds(work, device, max(ranks, 1))
    exposed = max(comm["seconds"] - a["collective_overlap"] * expected, 0.0)
    by_family["fallback"] = fallback
    by_family["dispatch"] = dispatch
    by_family["collectives"] = exposed
    overlap = device.kind in ASYNC_KINDS  # the host issues ahead: the slower of host and device
    eager = (max(expected, dispatch) if overlap else expected + dispatch) + fallback + exposed
    compiled = expected + fallback + exposed
    floor = lower_bound(work, device, share, rule["fp32_matmul"])
    hbm = int(device.hbm_gib * 2**30)
    per_step_usd = None if price.usd is None else eager * price.usd / 3600.0 * chips
    per_million = (None if per_step_usd is None or not tokens_per_step
                   else per_step_usd / tokens_per_step * 1e6)
    peak = per_rank_memory(work.peak_bytes, work, max(ranks, 1))
    return {
        "device": device.id,
        "step_seconds": {"lower": floor, "expected": eager},
        "compiled_step_seconds": {"lower": floor, "expected": compiled},
        "device_seconds": expected, "host_seconds": dispatch, "host_device_overlap": overlap,
        "seconds_by_family": {k: v for k, v in by_family.items()
                              if v > 0 or k in ("fallback", "dispatch", "collectives")},
        "collectives": {**comm, "exposed_seconds": exposed, "sharding": sharding(work), "ranks": ranks},
        "precision": rule,
        "compile": compile_estimate(work, a, device),
        "memory": {"peak_bytes": None if peak is None else int(peak), "hbm_bytes": hbm,
                   "fits": None if peak is None else peak <= hbm, "per_rank": True, "sharding": sharding(work)},
        "price": {**price.to_json(), "chips": chips, "per_step_usd": per_step_usd,
                  "per_million_tokens_usd": per_million},
        "validation": validation(device),
    }


SCALING_CHIPS = (1, 2, 4, 8, 16, 32, 64)


def scaling(work: StepWork, devices: Sequence[Device], a: Mapping[str, float], tokens_per_step: Optional[float],
            prices: Mapping[str, Price]) -> list[dict[str, Any]]:
    """The same step (the job's global batch) on 1-64 whole chips of each chip device: step time, its
    exposed collectives, per-chip memory and $/M tokens (strong scaling; one rank per logical core)."""
    rows = []
    for device in devices:
        if device.per != "chip":
            continue
        points = []
        for chips in SCALING_CHIPS:
            e = device_estimate(work, device, chips * device.chip_cores, a, tokens_per_step, prices[device.id])
            points.append({"chips": chips, "step_seconds": e["step_seconds"]["expected"],
                           "collective_seconds": e["collectives"]["exposed_seconds"],
                           "fits": e["memory"]["fits"], "per_million_tokens_usd": e["price"]["per_million_tokens_usd"]})
        rows.append({"device": device.id, "points": points})
    return rows


def compile_estimate(work: StepWork, a: Mapping[str, float], device: Optional[Device] = None) -> dict[str, Any]:
    """The first run's compile time on ``device``. Only a Trainium compiles NEFFs (neuronx-cc: each eager
    signature and each graph, then cached); a GPU or CPU runs eager ops as prebuilt kernels, so it is not
    charged for them, and its torch.compile graphs (Inductor) are counted but their time is not modelled
    (``None``)."""
    if device is not None and device.kind != "trainium":
        seconds = None if work.graphs else 0.0
        what = "a GPU (eager CUDA kernels)" if device.kind == "gpu" else f"a {device.kind} device (prebuilt kernels)"
        note = f"no NEFF compile on {what}" + (
            f"; {work.graphs} torch.compile graph(s) compile with its own compiler, time not modelled"
            if work.graphs else "")
        return {"neff": False, "eager_neffs": 0, "graphs": work.graphs, "first_run_seconds": seconds,
                "warm_cache_seconds": seconds, "note": note}
    first = work.eager_neffs * a["eager_neff_compile_seconds"] + work.graphs * a["graph_compile_minutes"] * 60
    warm = (work.eager_neffs + work.graphs) * a["neff_load_seconds"]
    return {"neff": True, "eager_neffs": work.eager_neffs, "graphs": work.graphs, "first_run_seconds": first,
            "warm_cache_seconds": warm}


def by_family(work: StepWork) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for item in work.items:
        row = rows.setdefault(item.family, {"family": item.family, "calls": 0.0, "flops": 0.0, "bytes": 0.0,
                                            "flops_by_dtype": {}})
        row["calls"] += item.calls
        row["flops"] += item.flops
        row["bytes"] += item.bytes
        if item.flops:
            row["flops_by_dtype"][item.dtype] = row["flops_by_dtype"].get(item.dtype, 0.0) + item.flops
    order = {f: i for i, f in enumerate(FAMILIES)}
    return sorted(rows.values(), key=lambda r: order.get(r["family"], len(order)))


def estimate(work: StepWork, devices: Sequence[Device], assumptions: Sequence[Assumption], *, cores: int,
             tokens_per_step: Optional[float] = None,
             prices: Optional[Mapping[str, float]] = None, sized: Sequence[Sized] = ()) -> dict[str, Any]:
    """The report's ``estimate`` section (/work schema: docs/estimate.md, "JSON"); a device an instance of
    ``sized`` holds runs on its chips (sizing.py), the others on ``cores``."""
    a = values(assumptions)
    prices = dict(prices or {})
    ops = sum(i.calls for i in work.items)  # CPU fallbacks included; they are neither eager nor compiled ops
    compiled_ops = sum(i.calls for i in work.items if i.compiled and i.family != "fallback")
    eager_ops = sum(i.calls for i in work.items if not i.compiled and i.family != "fallback")
    per_device, chosen = [], {}
    for device in devices:
        price = device.price
        if device.price_device in prices:
            price = Price(prices[device.price_device], None, "user", False)
        chosen[device.id] = price
        instance = sized_for(device, sized)
        entry = device_estimate(work, device, instance.ranks(device) if instance else cores, a, tokens_per_step,
                                price)
        if instance is not None:
            entry["instance"] = instance.to_json()
        per_device.append(entry)
    return {
        "version": 1,
        "note": NOTE,
        "assumptions": [x.to_json() for x in assumptions],
        "steps": {"clock": work.clock, "measured": work.measured, "warmup": work.warmup, "steady": work.steady,
                  "tokens_per_step": tokens_per_step},
        "per_step": {"ops": ops, "eager_ops": eager_ops, "compiled_ops": compiled_ops,
                     "by_family": by_family(work),
                     "fallback": {"calls": work.fallback_calls, "host_seconds": work.fallback_host_seconds,
                                  "copy_bytes": work.fallback_copy_bytes}},
        "devices": [d.to_json() for d in devices],
        "per_device": per_device,
        "cores": cores,
        "instances": [s.to_json() for s in sized],
        "scaling": scaling(work, devices, a, tokens_per_step, chosen),
        "work": work.to_json(),
    }
