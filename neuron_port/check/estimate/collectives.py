"""Collectives and sharding of the cost model (docs/estimate.md, "Collectives and sharding").

Each recorded collective moves, per rank, what a ring over its group moves (the bandwidth-optimal
schedule NCCL and the Neuron collectives use for large messages):

    all_reduce of S bytes                   2 (n - 1) / n · S
    all_gather, shard s (the recorded bytes)    (n - 1) · s        = (n - 1) / n · F,  F = n · s
    reduce_scatter / all_to_all of S           (n - 1) / n · S
    broadcast, reduce, gather, scatter           S

at the bandwidth of the group's chips (``Device.collective_gbps``). ``full_bytes`` turns a recorded
collective into the size ``F`` that does not depend on the group, so the same step can be costed at
another number of chips (the scaling table). A run with more than one chip and no recorded
collective is costed as data parallel: one all-reduce of the gradients (the optimizer's parameter bytes)
per step, labelled as assumed.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Optional

from neuron_port.check.estimate.devices import Device
from neuron_port.check.estimate.stepwork import CollectiveWork, StepWork

GATHERS = ("all_gather", "_allgather")
SCATTERS = ("reduce_scatter", "all_to_all", "alltoall")


def kind(op: str) -> str:
    """all_reduce | all_gather | reduce_scatter | other (one pass of the bytes)."""
    if op.startswith("all_reduce"):
        return "all_reduce"
    if op.startswith("all_gather"):
        return "all_gather"
    if op.startswith(SCATTERS):
        return "reduce_scatter"
    return "other"


def full_bytes(c: CollectiveWork) -> float:
    """The collective's size independent of its group: an all-gather's output, else the recorded bytes."""
    return c.bytes * c.group_size if kind(c.op) == "all_gather" else c.bytes


def ring_bytes(op: str, full: float, n: int) -> float:
    """Bytes one rank sends (and receives) in a ring over ``n`` ranks for a collective of size ``full``."""
    if n < 2:
        return 0.0
    k = kind(op)
    if k == "all_reduce":
        return 2.0 * (n - 1) / n * full
    if k in ("all_gather", "reduce_scatter"):
        return (n - 1) / n * full
    return full


def sharding(work: StepWork) -> str:
    """fsdp (parameters gathered, gradients reduce-scattered) | data_parallel (all-reduce) | none."""
    kinds = {kind(c.op) for c in work.collectives}
    if "all_gather" in kinds or "reduce_scatter" in kinds:
        return "fsdp"
    if "all_reduce" in kinds:
        return "data_parallel"
    return "none"


def group_chips(device: Device, ranks: int) -> int:
    """Chips a group of ``ranks`` ranks spans: one rank per logical core, ``chip_cores`` of them a chip (a
    logical-core device too: 64 cores at LNC=2 are one trn2.48xlarge's 16 chips)."""
    return max(1, math.ceil(ranks / max(device.chip_cores, 1)))


def collective_seconds(work: StepWork, device: Device, ranks: int) -> dict[str, Any]:
    """Per rank and step at ``ranks`` ranks: the seconds of every collective and what they came from.
    ``modelled`` is False (and ``note`` says why) when the device has no interconnect figure."""
    collectives: Iterable[CollectiveWork] = work.collectives
    assumed = False
    if not work.collectives and ranks > 1 and work.parameter_bytes > 0:
        # no collective recorded: data parallel over `ranks` (one gradient all-reduce a step, assumed)
        collectives = [CollectiveWork("all_reduce", ranks, 1.0, work.parameter_bytes)]
        assumed = True
    rows = []
    total_bytes = 0.0
    for c in collectives:
        moved = ring_bytes(c.op, full_bytes(c), ranks)
        total_bytes += moved
        rows.append({"op": c.op, "group_size": ranks, "calls": c.calls, "bytes_per_rank": moved})
    bandwidth = device.collective_gbps(group_chips(device, ranks)) * 1e9
    note: Optional[str] = None
    if not rows:
        note = ("one rank: no collective" if ranks <= 1 else
                "collectives not modelled: the run recorded none and no optimizer parameter list to all-reduce")
    elif bandwidth <= 0:
        note = f"collectives not modelled: devices.toml has no interconnect figure for {device.id}"
    elif assumed:
        note = (f"assumed data parallel over {ranks} ranks: one all-reduce of the gradients a step (the run "
                "recorded no collective)")
    seconds = total_bytes / bandwidth if bandwidth > 0 else 0.0
    return {"modelled": bool(rows) and bandwidth > 0, "assumed": assumed, "seconds": seconds,
            "bytes_per_rank": total_bytes, "gbps": bandwidth / 1e9, "by_op": rows, "note": note}


def state_bytes(work: StepWork) -> float:
    """Bytes of the sharded training state per rank: parameters, gradients and two optimizer states
    (Adam) at the parameters' dtype: 4x the optimizer's parameter list."""
    return 4.0 * work.parameter_bytes


def per_rank_memory(peak: Optional[int], work: StepWork, ranks: int) -> Optional[float]:
    """The peak per rank at ``ranks`` ranks under the run's sharding: FSDP shards the training state over
    the group (the recorded peak holds 1/world of it), data parallel and one process keep all of it."""
    if peak is None:
        return None
    if sharding(work) != "fsdp" or ranks == work.world:
        return float(peak)
    state = state_bytes(work)  # this rank's shard at the run's world size
    return max(float(peak) - state + state * work.world / ranks, 0.0)


def collective_plan(work: StepWork, device: Device, ranks: int) -> dict[str, Any]:
    """Everything the step's sharding decides on ``ranks`` ranks of ``device``, in one answer: the
    collectives' time (``collective_seconds``), the sharding and the per-rank peak memory."""
    return {**collective_seconds(work, device, ranks), "sharding": sharding(work),
            "per_rank_peak_bytes": per_rank_memory(work.peak_bytes, work, ranks)}
