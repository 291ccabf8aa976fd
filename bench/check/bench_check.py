"""Benchmark: the cost of `neuron-port check` against running the program itself on the CPU.

Workloads:
  trivial  a script with one matmul: check <= 1.5x `python script.py` (issue 4)
  gpt      the gpt_trainer fixture end to end: `neuron-port check` of the rewritten fixture
           (fixtures/expected/gpt_trainer) against the original fixture run on the CPU
           (`--device cpu`), both in float32, N training steps: <= 1.3x (issue 10)
Both commands run as child processes, interleaved, N rounds, with the simulator's C++ extension
already built; we report the median of each and the ratio of medians (medians, not minimums: the
cost that matters includes process start-up).

    .venv/bin/python bench/check/bench_check.py [--workload trivial|gpt] [--rounds 7] [--steps 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = """\
import torch
device = "neuron" if hasattr(torch, "neuron") else "cpu"
x = torch.ones(4, 4, device=device)
print((x @ x).sum().item())
"""


def timed(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + sys of the command and all its descendants)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def commands(workload: str, folder: Path, steps: int) -> tuple[list[str], list[str], float]:
    """(the plain CPU run, the check run, the goal) for a workload set up in ``folder``."""
    check = [sys.executable, "-m", "neuron_port", "check", "-q", "--no-cache"]
    if workload == "trivial":
        (folder / "script.py").write_text(SCRIPT)
        return [sys.executable, str(folder / "script.py")], check + [str(folder), "--", "python", "script.py"], 1.5
    shutil.copytree(FIXTURES / "gpt_trainer", folder / "original")
    shutil.copytree(FIXTURES / "expected" / "gpt_trainer", folder / "rewritten")
    # float32 on both sides: on the CPU the fixture runs without autocast, so bfloat16 would compare
    # float32 CPU work with bfloat16 device work
    args = ["--steps", str(steps), "--dtype", "float32", "--out-dir", str(folder / "out")]
    plain = [sys.executable, str(folder / "original" / "train.py"), "--device", "cpu", *args]
    return plain, check + [str(folder / "rewritten"), "--", "python", "train.py", *args], 1.3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", choices=("trivial", "gpt"), default="trivial")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=30, help="training steps of the gpt workload")
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("NEURON_PORT_SIMULATE", None)
    with tempfile.TemporaryDirectory() as folder:
        plain, check, goal = commands(args.workload, Path(folder), args.steps)
        subprocess.run(check, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # warm: build, caches
        load_before = os.getloadavg()[0]
        plain_runs, check_runs = [], []
        for _ in range(args.rounds):
            plain_runs.append(timed(plain, env))
            check_runs.append(timed(check, env))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load {load_before:.1f} before / {os.getloadavg()[0]:.1f} after; workload {args.workload}")
    # wall time is what the goal is about; CPU time (user + sys of the whole process tree) is what stays
    # comparable when other processes share the machine
    for i, what in enumerate(("wall", "CPU")):
        p = statistics.median(r[i] for r in plain_runs)
        c = statistics.median(r[i] for r in check_runs)
        print(f"{what:4} plain run on the CPU   median {p:.2f} s  (runs: {', '.join(f'{r[i]:.2f}' for r in plain_runs)})")
        print(f"{what:4} neuron-port check      median {c:.2f} s  (runs: {', '.join(f'{r[i]:.2f}' for r in check_runs)})")
        print(f"{what:4} ratio check / plain    {c / p:.2f}x   (goal <= {goal:.2f}x)")


if __name__ == "__main__":
    main()
