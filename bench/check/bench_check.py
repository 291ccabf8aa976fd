"""Benchmark: the cost of `neuron-port check` on a trivial script against running the script itself.

Goal (issue 4): check <= 1.5x `python script.py`, with the simulator's C++ extension already built.
Both commands run as child processes, interleaved, N rounds; we report the median of each and the
ratio of medians (medians, not minimums: the cost that matters includes process start-up).

    .venv/bin/python bench/check/bench_check.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import platform
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


def timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("NEURON_PORT_SIMULATE", None)
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "script.py").write_text(SCRIPT)
        plain = [sys.executable, str(project / "script.py")]
        check = [sys.executable, "-m", "neuron_port", "check", str(project), "-q", "--", "python", "script.py"]
        subprocess.run(check, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # warm: build, caches
        plain_times, check_times = [], []
        for _ in range(args.rounds):
            plain_times.append(timed(plain, env))
            check_times.append(timed(check, env))
    p, c = statistics.median(plain_times), statistics.median(check_times)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"python script.py       median {p:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in plain_times)})")
    print(f"neuron-port check      median {c:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in check_times)})")
    print(f"ratio check / plain    {c / p:.2f}x   (goal <= 1.50x)")


if __name__ == "__main__":
    main()
