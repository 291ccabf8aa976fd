"""The many-small-graphs row of the cost model's benchmark (issue 37 item 2; bench/README.md, "estimate"): a
Muon-style optimizer step (muon_step.py: Newton-Schulz iterations compiled per weight of a GPT-2 small, 48
compiled calls a step) estimated on the H100 and measured on this CPU.

1. `neuron-port check --shape-only` of the step in bf16 (the GPU program) gives the work; the expected and
   lower step time on `h100-sxm`, and the same recomputed without this model's launch and per-call costs
   (`graph_call_seconds`, `kernel_launch_seconds`, `gemm_latency_seconds` at 0: the model before them);
2. the step runs natively on this CPU in fp32 under Inductor (one thread, thread CPU time, the median of the
   steps after the first), and this CPU's fp32 matmul rate is measured (calibrate.measure_cpu);
3. the CPU time is scaled to the H100 by the ratio of the two matmul rates: this CPU's measured one and the
   H100's published large-GEMM rate (989.4 TFLOPS bf16 dense x the MAMF ceiling 0.801, devices.toml); the
   host path of the same calls is measured apart (the step on 16-wide weights: Dynamo's guards, the
   compiled wrappers, the eager ops, no compute to speak of), and the scaled step is the slower of the two
   (the GPU runs asynchronously). Neither part sees a GPU's per-kernel costs (launches, a GEMM's fixed
   time): the model's own figures for those are in its row;
4. the model applied to this CPU (its measured figures, the fp32 work of a second check) against the CPU
   measurement: the same counting and per-call costs on a device that can be measured.

    python bench/estimate/muon.py [--steps 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
GPU = "h100-sxm"
WITHOUT_LAUNCH_COSTS = {"graph_call_seconds": 0.0, "kernel_launch_seconds": 0.0, "gemm_latency_seconds": 0.0,
                        "neff_execution_seconds": 0.0}


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_", "TORCH_NEURONX_"))}
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def checked(project: Path, dtype: str) -> dict:
    report = project / f"muon-{dtype}.json"
    subprocess.run([sys.executable, "-m", "neuron_port", "check", str(project), "--shape-only", "-q", "--exit-zero",
                    "-o", str(report), "--", "python", "muon_step.py", "--device", "neuron", "--steps", "4",
                    "--dtype", dtype], cwd=project, env=child_env(), check=True, capture_output=True, timeout=1800)
    return json.loads(report.read_text())["estimate"]


def measured(project: Path, steps: int, width: int = 768) -> dict:
    """The median thread CPU (and wall) seconds of the steps after the first (which compiles)."""
    times = project / f"muon-cpu-{width}.json"
    subprocess.run([sys.executable, "muon_step.py", "--device", "cpu", "--dtype", "fp32", "--steps", str(steps),
                    "--width", str(width), "--times", str(times)], cwd=project, env=child_env(), check=True,
                   timeout=3600)
    recorded = json.loads(times.read_text())
    return {"cpu_seconds": statistics.median(recorded["step_cpu_seconds"][1:]),
            "wall_seconds": statistics.median(recorded["step_seconds"][1:]), "steps": steps, "width": width}


def section_assumption(section: dict, name: str) -> float:
    return next(a["value"] for a in section["assumptions"] if a["name"] == name)


def row(section: dict, device: str) -> dict:
    return next(r for r in section["per_device"] if r["device"] == device)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3, help="CPU steps (the first compiles; the rest are timed)")
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch

    from neuron_port.check.estimate import EstimateOptions, recompute
    from neuron_port.check.estimate.assumptions import assumptions
    from neuron_port.check.estimate.calibrate import measure_cpu
    from neuron_port.check.estimate.devices import load_devices
    from neuron_port.check.estimate.model import estimate
    from neuron_port.check.estimate.stepwork import StepWork

    torch.set_num_threads(1)
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="neuron-port-muon-") as tmp:
        project = Path(tmp)
        shutil.copy(HERE / "muon_step.py", project / "muon_step.py")
        bf16, fp32 = checked(project, "bf16"), checked(project, "fp32")
        cpu_run = measured(project, args.steps)
        host_run = measured(project, 12, width=16)  # the same calls on 16-wide weights: their host path alone
    cpu_device, figures = measure_cpu()  # right after the measurement: the same load
    load.append(os.getloadavg()[0])
    h100 = next(d for d in load_devices() if d.id == GPU)
    gpu_rate = h100.peak_tflops["bf16"] * 1e12 * h100.matmul_ceiling
    compute_scaled = cpu_run["cpu_seconds"] * figures["flops"] / gpu_rate
    scaled = max(compute_scaled, host_run["cpu_seconds"])  # an asynchronous GPU: the slower of the two
    gpu, before = row(bf16, GPU), row(recompute(bf16, EstimateOptions(assumptions=WITHOUT_LAUNCH_COSTS)), GPU)
    on_cpu = estimate(StepWork.from_json(fp32["work"]), [cpu_device],
                      assumptions({"dispatch_seconds_per_op": figures["dispatch_seconds"]}), cores=1)
    cpu_expected = on_cpu["per_device"][0]["step_seconds"]
    result = {
        "load": load, "graph_runs": bf16["work"]["graph_runs"], "graph_kernels": bf16["work"]["graph_kernels"],
        "matmul_calls": sum(i["calls"] for i in bf16["work"]["work"] if i["family"] == "matmul"),
        "matmul_flops": sum(i["flops"] for i in bf16["work"]["work"] if i["family"] == "matmul"),
        "h100": {"expected_seconds": gpu["step_seconds"]["expected"], "lower_seconds": gpu["step_seconds"]["lower"],
                 "device_seconds": gpu["device_seconds"], "host_seconds": gpu["host_seconds"],
                 "seconds_by_family": gpu["seconds_by_family"],
                 "expected_without_launch_costs": before["step_seconds"]["expected"]},
        "cpu": {**cpu_run, "figures": figures, "expected_seconds": cpu_expected["expected"],
                "lower_seconds": cpu_expected["lower"]},
        "host": {**host_run, "model_host_seconds": gpu["host_seconds"],
                 "model_host_without_launches": gpu["host_seconds"] - bf16["work"]["graph_kernels"]
                 * section_assumption(bf16, "kernel_launch_seconds")},
        "scaled": {"gpu_matmul_rate": gpu_rate, "cpu_matmul_rate": figures["flops"], "compute_seconds": compute_scaled,
                   "seconds": scaled, "estimate_over_scaled": gpu["step_seconds"]["expected"] / scaled},
    }
    print(f"work: {result['graph_runs']:.0f} compiled calls, {result['graph_kernels']:.0f} kernels, "
          f"{result['matmul_calls']:.0f} matmuls, {result['matmul_flops'] / 1e12:.2f} TFLOP a step")
    print(f"h100-sxm: expected {gpu['step_seconds']['expected'] * 1e3:.2f} ms (device "
          f"{gpu['device_seconds'] * 1e3:.2f}, host {gpu['host_seconds'] * 1e3:.2f}), lower "
          f"{gpu['step_seconds']['lower'] * 1e3:.2f} ms; without launch costs {before['step_seconds']['expected'] * 1e3:.2f} ms")
    print(f"this CPU: {cpu_run['cpu_seconds']:.2f} s a step (thread CPU; wall {cpu_run['wall_seconds']:.2f} s), "
          f"{figures['flops'] / 1e9:.0f} GFLOP/s fp32 matmul; the model on it: {cpu_expected['expected']:.2f} s "
          f"(lower {cpu_expected['lower']:.2f} s), measured / expected {cpu_run['cpu_seconds'] / cpu_expected['expected']:.2f}")
    print(f"host path on this CPU (the same calls, 16-wide weights): {host_run['cpu_seconds'] * 1e3:.2f} ms a step; "
          f"the model's H100 host {gpu['host_seconds'] * 1e3:.2f} ms, without kernel launches "
          f"{result['host']['model_host_without_launches'] * 1e3:.2f} ms")
    print(f"scaled to the H100: compute by the matmul rates ({figures['flops'] / 1e9:.0f} GFLOP/s / "
          f"{gpu_rate / 1e12:.0f} TFLOP/s) {compute_scaled * 1e3:.2f} ms, the slower of it and the host path "
          f"{scaled * 1e3:.2f} ms; estimate / scaled {result['scaled']['estimate_over_scaled']:.2f}")
    if args.json:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True).stdout.strip()
        Path(args.json).write_text(json.dumps({"commit": commit, **result}, indent=2) + "\n")


if __name__ == "__main__":
    main()
