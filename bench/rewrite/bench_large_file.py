"""Benchmark: `neuron-port rewrite --check` on one very large file: peak memory and time (issue 22).

Generates, with generate_large_file.py, a 60,000-line training module (about 2.0 MB, just under the default
size limit) and a script with 20,000 `.cuda()` calls on one line, then runs on each, interleaved
``--rounds`` times, this tree's CLI and (``--baseline-python``) another install's:

    python -m neuron_port rewrite --check -q --no-cache -j 1 FILE

and reports per run the wall seconds, the CPU seconds and the peak RSS of the process (``ru_maxrss`` of the
waited child), the peak per source line, and whether the two installs printed the same findings.

    .venv/bin/python bench/rewrite/bench_large_file.py [--rounds 2] [--baseline-python PY] [--lines 60000]
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

HERE = Path(__file__).resolve().parent


def measure(python: str, path: Path) -> tuple[float, float, float, float, bytes]:
    """(wall s, CPU s, peak RSS in MB, load before, stdout) of one run on ``path``."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([python, "-m", "neuron_port", "rewrite", "--check", "-q", "--no-cache", "-j", "1",
                                 path.name], cwd=path.parent, stdout=out, stderr=err)
        _pid, status, usage = os.wait4(proc.pid, 0)  # the child's own rusage: its peak RSS, its CPU
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{python} on {path}: exit {proc.returncode}: {err.read().decode()[-2000:]}")
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, load, out.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--lines", type=int, default=60_000)
    parser.add_argument("--calls", type=int, default=20_000, help=".cuda() calls on the one line")
    parser.add_argument("--baseline-python", help="python of another neuron-port install to compare with")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="np-bench-large-"))
    files = {"module": folder / "long_trainer.py", "one line": folder / "one_line.py"}
    subprocess.run([sys.executable, str(HERE / "generate_large_file.py"), str(files["module"]),
                    "--lines", str(args.lines)], check=True)
    subprocess.run([sys.executable, str(HERE / "generate_large_file.py"), str(files["one line"]),
                    "--one-line", str(args.calls)], check=True)
    installs = {"this tree": sys.executable}
    if args.baseline_python:
        installs["baseline"] = args.baseline_python

    results: dict[tuple[str, str], list] = {}
    for round_number in range(args.rounds):
        for kind, path in files.items():
            for label, python in installs.items():
                run = measure(python, path)
                results.setdefault((kind, label), []).append(run)
                print(f"round {round_number + 1}: {kind}, {label}: {run[0]:.1f} s wall, {run[1]:.1f} CPU-s, "
                      f"{run[2]:.0f} MB @load {run[3]:.1f}", file=sys.stderr, flush=True)

    print(f"machine: {platform.machine()} {os.cpu_count()} cores, {platform.platform()}, "
          f"Python {platform.python_version()}")
    for kind, path in files.items():
        text = path.read_bytes()
        lines = text.count(b"\n")
        print(f"\n{kind}: {path.name}, {lines} lines, {len(text)} bytes")
        print(f"  {'install':10} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} {'KB/line':>8}  runs (wall s @ load)")
        for label in installs:
            rows = results[(kind, label)]
            peak = max(r[2] for r in rows)
            print(f"  {label:10} {statistics.median(r[0] for r in rows):8.1f} "
                  f"{statistics.median(r[1] for r in rows):8.1f} {peak:8.0f} {peak * 1024 / lines:8.2f}  "
                  + ", ".join(f"{r[0]:.1f}@{r[3]:.1f}" for r in rows))
        if args.baseline_python:
            same = all(r[4] == results[(kind, "baseline")][0][4]
                       for label in installs for r in results[(kind, label)])
            print(f"  findings printed: {'identical' if same else 'DIFFERENT'} "
                  f"({results[(kind, 'this tree')][0][4].count(b' NP')} findings)")


if __name__ == "__main__":
    main()
