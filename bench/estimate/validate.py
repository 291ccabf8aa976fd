"""Validate the cost model on the one device that can be measured here: this CPU (docs/estimate.md,
"Validation"). Per workload of workloads.py:

1. `neuron-port check` runs it on the simulated `neuron` device and saves the report (the per-step work);
2. the same workload runs natively on the CPU and times its steps: the median CPU time of the steady steps
   on its one compute thread (other processes on a shared machine slow the wall clock, not this), the
   median wall time recorded beside it;
3. a microbenchmark measures this CPU's peak float32 FLOP/s, copy bandwidth and per-op dispatch time;
4. the model applied to the CPU (same formulas as for Trainium, the CPU's figures) predicts the step.

The predicted lower bound must not exceed the measured time, and the expected time must be within a
factor (3 for the bench, 5 in the CI test) of it. One intra-op thread everywhere.

    python bench/estimate/validate.py [--size bench|small] [--models mlp,gpt,conv] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_", "TORCH_NEURONX_"))}
    env["OMP_NUM_THREADS"] = "1"
    if os.environ.get("NEURON_PORT_CACHE_DIR"):
        env["NEURON_PORT_CACHE_DIR"] = os.environ["NEURON_PORT_CACHE_DIR"]
    return env


def recorded_work(model: str, size: str, folder: Path):
    """The per-step work `neuron-port check` records for the workload on the simulated device."""
    from neuron_port.check.estimate.stepwork import StepWork

    report = folder / f"{model}.json"
    subprocess.run([sys.executable, "-m", "neuron_port", "check", str(HERE), "-q", "-o", str(report), "--",
                    "python", "workloads.py", "--model", model, "--device", "neuron", "--steps", "6", "--size", size],
                   env=child_env(), check=False, capture_output=True, text=True, timeout=1800)
    doc = json.loads(report.read_text())
    return StepWork.from_json(doc["estimate"]["work"])


def measured_step(model: str, size: str, steps: int, folder: Path) -> tuple[float, float]:
    """(median CPU seconds of the steady steps on the workload's thread, median wall seconds)."""
    times = folder / f"{model}-cpu.json"
    subprocess.run([sys.executable, str(HERE / "workloads.py"), "--model", model, "--device", "cpu",
                    "--steps", str(steps), "--size", size, "--times", str(times)],
                   env=child_env(), check=True, timeout=1800)
    recorded = json.loads(times.read_text())
    return statistics.median(recorded["step_cpu_seconds"][2:]), statistics.median(recorded["step_seconds"][2:])


def validate(models: list[str], size: str, steps: int) -> dict:
    import torch

    from neuron_port.check.estimate.assumptions import assumptions
    from neuron_port.check.estimate.calibrate import measure_cpu
    from neuron_port.check.estimate.model import estimate

    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory(prefix="neuron-port-estimate-") as tmp:
        folder = Path(tmp)
        for model in models:
            work = recorded_work(model, size, folder)
            measured, wall = measured_step(model, size, steps, folder)
            cpu, figures = measure_cpu()  # right before the prediction: the same load as the measurement
            a = assumptions({"dispatch_seconds_per_op": figures["dispatch_seconds"]})
            section = estimate(work, [cpu], a, cores=1)
            step = section["per_device"][0]["step_seconds"]
            rows.append({"model": model, "size": size, "measured_seconds": measured, "measured_wall_seconds": wall,
                         "load": os.getloadavg()[0], "lower_seconds": step["lower"],
                         "expected_seconds": step["expected"], "ratio": measured / step["expected"],
                         "cpu": figures, "ops_per_step": section["per_step"]["ops"],
                         "flops_per_step": sum(r["flops"] for r in section["per_step"]["by_family"])})
    return {"threads": 1, "steps": steps, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", choices=("bench", "small"), default="bench")
    parser.add_argument("--models", default="mlp,gpt,conv")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--json")
    args = parser.parse_args()
    result = validate(args.models.split(","), args.size, args.steps)
    print(f"{'workload':8} {'measured':>10} {'(wall)':>10} {'lower':>10} {'expected':>10} {'measured/expected':>18}"
          f" {'load':>5}")
    for r in result["rows"]:
        print(f"{r['model']:8} {r['measured_seconds'] * 1e3:8.1f}ms {r['measured_wall_seconds'] * 1e3:8.1f}ms "
              f"{r['lower_seconds'] * 1e3:8.1f}ms {r['expected_seconds'] * 1e3:8.1f}ms {r['ratio']:18.2f} "
              f"{r['load']:5.1f}")
    c = result["rows"][0]["cpu"] if result["rows"] else {}
    if c:
        print(f"CPU: {c['flops'] / 1e9:.1f} GFLOP/s fp32 matmul, {c['conv_flops'] / 1e9:.1f} conv, "
              f"{c['bytes_per_second'] / 1e9:.1f} GB/s copy, {c['dispatch_seconds'] * 1e6:.1f} us per op (1 thread)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
