"""The cost model (docs/estimate.md): the per-step work of the run on each device of the table.

Per device: the device time of the step's work (roofline.py: each work item's roofline, the CPU-fallback
ops and the lower bound, in one walk over the items), plus a dispatch cost per eager op (none for ops
inside compiled graphs; on an asynchronous device the host issues ahead, so the slower of host and device
counts), plus the collectives not hidden behind compute (collectives.py, which also gives the sharding
and the per-rank memory). ``cores`` logical cores share the step's work evenly (one process per core),
while each core still dispatches the whole op stream of one process; a chip device runs it on whole
chips, ``ceil(cores / chip_cores)`` of them. Every device row and scaling point is one
``device_estimate`` call of ``device_rows``' one list of runs.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

from neuron_port.check.estimate.assumptions import Assumption, values
from neuron_port.check.estimate.collectives import collective_plan
from neuron_port.check.estimate.devices import Device, Price
from neuron_port.check.estimate.flops import FAMILIES
from neuron_port.check.estimate.roofline import device_time
from neuron_port.check.estimate.sizing import Sized, sized_for
from neuron_port.check.estimate.validation import validation
from neuron_port.check.estimate.stepwork import StepWork

ASYNC_KINDS = ("trainium", "gpu")  # the host enqueues ops ahead of the device (torchneuron.md 2.1; CUDA streams)
NOTE = "Estimated from the simulated run with the assumptions below; not a measurement of Trainium."


def layout(device: Device, cores: int) -> tuple[float, int, float]:
    """(share of the step's work on one unit of the device, logical cores issuing ops in parallel per
    unit, chips billed)."""
    if device.per == "core":
        return 1.0 / cores, 1, cores / device.chip_cores
    chips = max(1, math.ceil(cores / device.chip_cores))
    return 1.0 / chips, device.chip_cores, float(chips)


def device_estimate(work: StepWork, device: Device, cores: int, a: Mapping[str, float],
                    tokens_per_step: Optional[float], price: Price) -> dict[str, Any]:
    share, issuers, chips = layout(device, cores)
    share *= work.world / max(work.processes, 1)  # a fake world recorded one rank of `world`
    compile_time = compile_estimate(work, a, device)
    time = device_time(work, device, share, share / issuers, a)
    # Data parallel: every core runs the whole op stream of one recorded process on its share of the
    # data, so the per-op costs do not shrink with more cores (the compute and the bytes do)
    dispatch = time.eager_ops / max(work.processes, 1) * a["dispatch_seconds_per_op"]
    graph_host, graph_device = launch_costs(work, device, a)
    host = dispatch + graph_host
    ranks = cores  # one rank per logical core (per GPU)
    comm = collective_plan(work, device, max(ranks, 1))
    expected, fallback = time.expected + graph_device, time.fallback
    exposed = max(comm["seconds"] - a["collective_overlap"] * expected, 0.0)
    # signatures that keep changing compile in every steady step (the host waits for neuronx-cc)
    recompiles = compile_time.get("steady_seconds_per_step") or 0.0
    by_family = {**time.by_family, **({"graph_launches": graph_device} if graph_device else {}),
                 "fallback": fallback, "dispatch": dispatch, **({"graph_calls": graph_host} if graph_host else {}),
                 "collectives": exposed,
                 **({"compiles": recompiles} if recompiles else {})}
    overlap = device.kind in ASYNC_KINDS  # the host issues ahead: the slower of host and device
    eager = (max(expected, host) if overlap else expected + host) + fallback + exposed + recompiles
    compiled = expected + fallback + exposed
    hbm = int(device.hbm_gib * 2**30)
    per_step_usd = None if price.usd is None else eager * price.usd / 3600.0 * chips
    per_million = (None if per_step_usd is None or not tokens_per_step
                   else per_step_usd / tokens_per_step * 1e6)
    peak = comm.pop("per_rank_peak_bytes")
    shard = comm.pop("sharding")
    return {
        "device": device.id,
        "step_seconds": {"lower": time.lower, "expected": eager},
        "compiled_step_seconds": {"lower": time.lower, "expected": compiled},
        "device_seconds": expected, "host_seconds": host, "host_device_overlap": overlap,
        "seconds_by_family": {k: v for k, v in by_family.items()
                              if v > 0 or k in ("fallback", "dispatch", "collectives")},
        "collectives": {**comm, "exposed_seconds": exposed, "sharding": shard, "ranks": ranks},
        "precision": time.rule,
        "compile": compile_time,
        "memory": {"peak_bytes": None if peak is None else int(peak), "hbm_bytes": hbm,
                   "fits": None if peak is None else peak <= hbm, "per_rank": True, "sharding": shard},
        "price": {**price.to_json(), "chips": chips, "per_step_usd": per_step_usd,
                  "per_million_tokens_usd": per_million},
        "validation": validation(device),
    }


def launch_costs(work: StepWork, device: Device, a: Mapping[str, float]) -> tuple[float, float]:
    """(host, device) seconds a step of one process pays for its compiled graph calls beyond their ops'
    work: every call's host path (Dynamo's guards, AOTAutograd's wrapper: ``graph_call_seconds``), and on
    a GPU the host launch of each kernel of the fused graph (``kernel_launch_seconds``, kernels from
    fusion.kernels), on a Trainium one NEFF execution's fixed device time per call
    (``neff_execution_seconds``). Data parallel: each rank makes all of its process's calls."""
    processes = max(work.processes, 1)
    runs, kernels = work.graph_runs / processes, work.graph_kernels / processes
    host = runs * a["graph_call_seconds"] + (kernels * a["kernel_launch_seconds"] if device.kind == "gpu" else 0.0)
    return host, runs * a["neff_execution_seconds"] if device.kind == "trainium" else 0.0


SCALING_CHIPS = (1, 2, 4, 8, 16, 32, 64)


def device_rows(work: StepWork, devices: Sequence[Device], a: Mapping[str, float], cores: int,
                tokens_per_step: Optional[float], prices: Mapping[str, float],
                sized: Sequence[Sized]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each device's estimate (on the chips of the instance of ``sized`` that holds it, else on
    ``cores``), and the scaling rows: the same step (the job's global batch) on 1-64 whole chips of each
    chip device, with its exposed collectives, per-chip memory and $/M tokens (strong scaling; one rank
    per logical core). Every estimate is one ``device_estimate`` call of the one list of runs."""
    runs = []  # (device, cores, price, instance or None, chips of a scaling point or None)
    chosen = {}
    for device in devices:
        price = device.price
        if device.price_device in prices:
            price = Price(prices[device.price_device], None, "user", False)
        chosen[device.id] = price
        instance = sized_for(device, sized)
        runs.append((device, instance.ranks(device) if instance else cores, price, instance, None))
    for device in devices:
        if device.per == "chip":
            runs.extend((device, chips * device.chip_cores, chosen[device.id], None, chips) for chips in SCALING_CHIPS)
    per_device, points = [], {}
    for (device, ranks, price, instance, chips), e in zip(
            runs, [device_estimate(work, d, n, a, tokens_per_step, p) for d, n, p, _, _ in runs]):
        if chips is None:
            if instance is not None:
                e["instance"] = instance.to_json()
            per_device.append(e)
        else:
            points.setdefault(device.id, []).append(
                {"chips": chips, "step_seconds": e["step_seconds"]["expected"],
                 "collective_seconds": e["collectives"]["exposed_seconds"],
                 "fits": e["memory"]["fits"], "per_million_tokens_usd": e["price"]["per_million_tokens_usd"]})
    return per_device, [{"device": device_id, "points": p} for device_id, p in points.items()]


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
            "warm_cache_seconds": warm, "steady_compiles_per_step": work.steady_compiles,
            "steady_seconds_per_step": work.steady_compiles * a["eager_neff_compile_seconds"]}


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
    families = by_family(work)
    per_device, scaling = device_rows(work, devices, a, cores, tokens_per_step, prices, sized)
    return {
        "version": 1,
        "note": NOTE,
        "assumptions": [x.to_json() for x in assumptions],
        "steps": {"clock": work.clock, "measured": work.measured, "warmup": work.warmup, "steady": work.steady,
                  "tokens_per_step": tokens_per_step},
        "per_step": {"ops": ops, "eager_ops": eager_ops, "compiled_ops": compiled_ops,
                     "by_family": families,
                     "fallback": {"calls": work.fallback_calls, "host_seconds": work.fallback_host_seconds,
                                  "copy_bytes": work.fallback_copy_bytes}},
        "devices": [d.to_json() for d in devices],
        "per_device": per_device,
        "cores": cores,
        "instances": [s.to_json() for s in sized],
        "scaling": scaling,
        "work": work.to_json(),
    }
