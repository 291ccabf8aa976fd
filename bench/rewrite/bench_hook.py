"""Benchmark: the pre-commit hook on one file, `neuron-port rewrite --check --diff -q --no-cache FILE` (what
.pre-commit-hooks.yaml runs, without the cache), against another install.

Runs each install's ``neuron-port`` console script (next to its python; what pre-commit runs, and unlike
``python -m`` it does not put the working folder on ``sys.path``, where a project's ``logging.py`` would
shadow the standard library's) ``--rounds`` times, interleaved (this tree, baseline, this tree, ...), from
``--cwd`` (default: the file's folder), and reports per install the median and range of the wall seconds and the CPU seconds of the
process (``wait4``'s rusage), the load average before each run, and whether both installs printed the same
bytes (stdout: the diff; stderr: the findings).

    .venv/bin/python bench/rewrite/bench_hook.py FILE [--rounds 7] [--python PY] [--baseline-python PY]
        [--cwd DIR]

``--python`` defaults to this interpreter. An editable install pays its import finder on every start
(~0.1 s): for the hook's absolute numbers, give both installs as non-editable ones (``git archive`` of
each commit ``pip install``ed into its own venv).
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


def measure(python: str, path: Path, cwd: Path) -> tuple[float, float, float, bytes, bytes]:
    """(wall s, CPU s, load before, stdout, stderr) of one hook run on ``path``, from ``cwd``."""
    load = os.getloadavg()[0]
    script = str(Path(python).parent / "neuron-port")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([script, "rewrite", "--check", "--diff", "-q", "--no-cache",
                                 os.path.relpath(path, cwd)], cwd=cwd, stdout=out, stderr=err)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if code not in (0, 1) or b"Traceback" in stderr or b"internal error" in stderr:
        raise SystemExit(f"{python} on {path}: exit {code}: {stderr.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, load, stdout, stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--python", default=sys.executable, help="python of the install measured")
    parser.add_argument("--baseline-python", help="python of another neuron-port install to compare with")
    parser.add_argument("--cwd", type=Path, help="folder the hook runs from (default: the file's folder)")
    args = parser.parse_args()
    path = args.file.resolve()
    cwd = (args.cwd or path.parent).resolve()
    installs = {"this tree": args.python}
    if args.baseline_python:
        installs["baseline"] = args.baseline_python
    runs: dict[str, list] = {label: [] for label in installs}
    for round_number in range(args.rounds):
        for label, python in installs.items():
            run = measure(python, path, cwd)
            runs[label].append(run)
            print(f"round {round_number + 1}: {label}: {run[0]:.2f} s wall, {run[1]:.2f} CPU-s @load {run[2]:.1f}",
                  file=sys.stderr, flush=True)
    lines = path.read_bytes().count(b"\n")
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, {platform.platform()}, "
          f"Python {platform.python_version()}")
    print(f"hook: neuron-port rewrite --check --diff -q --no-cache {os.path.relpath(path, cwd)} ({lines} lines), "
          f"{args.rounds} rounds, from {cwd}")
    print(f"  {'install':10} {'wall s':>7} {'(min-max)':>12} {'CPU s':>6}  runs (wall s @ load)")
    for label, rows in runs.items():
        walls = [r[0] for r in rows]
        print(f"  {label:10} {statistics.median(walls):7.2f} {min(walls):5.2f}-{max(walls):<6.2f} "
              f"{statistics.median(r[1] for r in rows):6.2f}  " + ", ".join(f"{r[0]:.2f}@{r[2]:.1f}" for r in rows))
    if args.baseline_python:
        first = runs["baseline"][0]
        same = all(r[3:] == first[3:] for rows in runs.values() for r in rows)
        print(f"  output (diff on stdout, findings on stderr): {'identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
