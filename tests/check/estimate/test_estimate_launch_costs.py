"""Launch and per-graph costs of compiled graphs, and the size model of small GEMMs (issue 37 item 2), on the
shipped device table, in-process: kernels per graph from its fused dataflow, a graph call's host path and a
GPU's launches, a Trainium's NEFF execution per call, a GEMM's fixed time per call."""

from __future__ import annotations

import pytest

from neuron_port.check.estimate.assumptions import assumptions, values
from neuron_port.check.estimate.devices import load_devices
from neuron_port.check.estimate.flops import Work
from neuron_port.check.estimate.fusion import kernels
from neuron_port.check.estimate.model import estimate
from neuron_port.check.estimate.stepwork import StepWork, WorkItem

A = values(assumptions())
MM, ADD, GELU = Work("matmul", 1e6, 1e3, "bf16"), Work("elementwise", 1e3, 1e3, "bf16"), Work("elementwise", 1e3,
                                                                                                1e3, "bf16")
VIEW = Work("copy/view", 0.0, 0.0, "bf16")


def test_kernels_are_the_fused_regions_and_the_library_calls():
    # x @ w -> view -> + b -> gelu -> @ w2: the add and the gelu are one region; the view launches nothing
    works = [MM, VIEW, ADD, GELU]
    flow = [[0, 8, 0, [[-1, 8], [-2, 8]]], [1, 0, 0, [[0, 8]]], [2, 8, 0, [[1, 8], [-3, 4]]], [3, 8, 0, [[2, 8]]],
            [0, 8, 1, [[3, 8], [-4, 8]]]]
    assert kernels(works, flow, [2, 1, 1, 1]) == 3.0
    assert kernels(works, [], [2, 1, 1, 1]) == 4.0  # no flow: every call that is not a view


def _row(section: dict, device: str) -> dict:
    return next(r for r in section["per_device"] if r["device"] == device)


def _estimate(work: StepWork, **overrides: float) -> dict:
    devices = [d for d in load_devices() if d.id in ("h100-sxm", "trn2-chip")]
    return estimate(work, devices, assumptions(overrides), cores=1)


def test_many_small_graph_calls_cost_their_host_path_and_launches():
    """1,000 calls a step of a graph of 5 kernels whose work takes no time: host-bound on the GPU (each call's
    guards and wrapper and its 5 launches), a NEFF execution each on the Trainium."""
    tiny = WorkItem("aten::add", "elementwise", "bf16", 1000.0, 1e3, 1e3, compiled=True)
    work = StepWork(clock="optimizer_step", measured=4, processes=1, items=[tiny], graph_runs=1000.0,
                    graph_kernels=5000.0)
    section = _estimate(work)
    gpu, trn = _row(section, "h100-sxm"), _row(section, "trn2-chip")
    host = 1000 * A["graph_call_seconds"] + 5000 * A["kernel_launch_seconds"]
    assert gpu["host_seconds"] == pytest.approx(host)
    assert gpu["step_seconds"]["expected"] == pytest.approx(host, rel=1e-3)  # the host issues; the device waits
    assert trn["seconds_by_family"]["graph_launches"] == pytest.approx(1000 * A["neff_execution_seconds"])
    assert trn["step_seconds"]["expected"] >= 1000 * max(A["neff_execution_seconds"], A["graph_call_seconds"])
    # the saved work keeps the counts: `estimate REPORT.json` recomputes the same
    again = StepWork.from_json(work.to_json())
    assert (again.graph_runs, again.graph_kernels) == (1000.0, 5000.0)


def test_a_small_gemm_runs_below_the_large_gemm_rate():
    """A 768^3 bf16 GEMM (Newton-Schulz on a GPT-small matrix) against a 8192^3 one on the H100: the small one
    pays the fixed time of a call on top of its tiles, so its rate is a fraction of the large one's; a large
    GEMM barely notices it. The lower bound ignores it."""
    def step(n: int, calls: float, **overrides: float) -> dict:
        flops = 2.0 * n ** 3 * calls
        item = WorkItem("aten::mm", "matmul", "bf16", calls, flops, 3 * 2 * n * n * calls, gemm=(1, n, n, n))
        work = StepWork(clock="optimizer_step", measured=4, processes=1, items=[item])
        return _row(_estimate(work, **overrides), "h100-sxm")

    small, large = step(768, 100.0), step(8192, 1.0)
    rate_small = 2.0 * 768 ** 3 * 100 / small["device_seconds"]
    rate_large = 2.0 * 8192 ** 3 / large["device_seconds"]
    assert rate_small < 0.5 * rate_large
    assert small["device_seconds"] > 100 * A["gemm_latency_seconds"]
    assert small["step_seconds"]["lower"] < 0.2 * small["device_seconds"]
    without = {"gemm_latency_seconds": 0.0}
    assert small["device_seconds"] > 2 * step(768, 100.0, **without)["device_seconds"]
    assert large["device_seconds"] < 1.01 * step(8192, 1.0, **without)["device_seconds"]
