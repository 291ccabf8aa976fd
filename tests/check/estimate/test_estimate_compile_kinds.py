"""The compile line per device kind: only a Trainium compiles NEFFs (neuronx-cc), so only a Trainium row
is charged the first run's eager NEFF compiles; a GPU row (the H100) runs eager ops as prebuilt CUDA
kernels and is charged none, and the time of its torch.compile graphs (Inductor) is not modelled."""

from __future__ import annotations

import json

import jsonschema

from neuron_port.check.estimate.assumptions import assumptions
from neuron_port.check.estimate.devices import Device, Price
from neuron_port.check.estimate.model import estimate
from neuron_port.check.estimate.stepwork import StepWork, WorkItem


def device(device_id: str, kind: str) -> Device:
    return Device(id=device_id, name=device_id, kind=kind, per="chip", peak_tflops={"fp32": 1.0}, hbm_gbps=100.0,
                  hbm_gib=1.0, chip_cores=1, price_device=device_id, price=Price(None, None, None, False))


def work(graphs: int) -> StepWork:
    return StepWork(items=[WorkItem(op="aten::mm", family="matmul", dtype="fp32", compiled=False, calls=2.0,
                                    flops=1e9, bytes=1e6)],
                    clock="optimizer_step", measured=4, warmup=2, processes=1, eager_neffs=40, graphs=graphs)


def compiles(graphs: int) -> dict:
    devices = [device("trn", "trainium"), device("gpu", "gpu"), device("host", "cpu")]
    section = estimate(work(graphs), devices, assumptions(), cores=1)
    return {row["device"]: row["compile"] for row in section["per_device"]}


def test_only_a_trainium_row_is_charged_neff_compiles(report_schema):
    a = {x.name: x.value for x in assumptions()}
    by_device = compiles(graphs=0)
    assert by_device["trn"] == {"neff": True, "eager_neffs": 40, "graphs": 0,
                                "first_run_seconds": 40 * a["eager_neff_compile_seconds"],
                                "warm_cache_seconds": 40 * a["neff_load_seconds"],
                                "steady_compiles_per_step": 0.0, "steady_seconds_per_step": 0.0}
    # nothing to compile on a GPU in eager mode: zero, said plainly
    assert by_device["gpu"] == {"neff": False, "eager_neffs": 0, "graphs": 0, "first_run_seconds": 0.0,
                                "warm_cache_seconds": 0.0, "note": "no NEFF compile on a GPU (eager CUDA kernels)"}
    assert by_device["host"]["neff"] is False and by_device["host"]["eager_neffs"] == 0
    # the schema holds the new fields
    schema = report_schema["properties"]["estimate"]["properties"]["per_device"]["items"]["properties"]["compile"]
    for entry in by_device.values():
        jsonschema.validate(json.loads(json.dumps(entry)), schema)


def test_a_gpu_rows_graph_compiles_are_counted_but_not_timed(report_schema):
    by_device = compiles(graphs=3)
    gpu = by_device["gpu"]
    assert gpu["graphs"] == 3 and gpu["eager_neffs"] == 0
    assert gpu["first_run_seconds"] is None and gpu["warm_cache_seconds"] is None  # Inductor: not modelled
    assert "3 torch.compile graph(s)" in gpu["note"] and "not modelled" in gpu["note"]
    assert by_device["trn"]["first_run_seconds"] > 40  # neuronx-cc: the graphs' minutes on top
