"""Benchmark: the peak memory of `neuron-port rewrite --check` on one flat module and on the same lines
inside functions, against the pool's memory budget estimate (issue 33).

Generates with generate_large_file.py a script of ``--lines`` top-level statements (``--shape flat``) and
the same statements cut into functions of 20 (``--shape functions``), plus a 2-line file (the process's own
memory), then runs on each, ``--rounds`` times, this tree's CLI and (``--baseline-python``, optionally with
``--baseline-path`` put first on its PYTHONPATH) another install's:

    python -m neuron_port rewrite --check -q --no-cache -j 1 FILE

each in a fresh wrapper process that reads ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` after the run:
the peak RSS of the CLI and of any worker it started. It prints the peak, the peak above the 2-line run
per source byte, and that against the estimate of neuron_port/rewrite/memory.py (MEMORY_PER_SOURCE_BYTE).

    .venv/bin/python bench/rewrite/bench_flat_memory.py [--lines 30000] [--rounds 1]
        [--baseline-python PY [--baseline-path DIR]]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# run in the wrapper process: the CLI as its only child, then that child's (and its children's) peak
WRAPPER = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": done.returncode, "wall": time.perf_counter() - start, "peak_kb": usage.ru_maxrss,
                  "cpu": usage.ru_utime + usage.ru_stime, "findings": done.stdout.decode().count(" NP"),
                  "stderr": done.stderr.decode()[-2000:]}))
"""


def measure(python: str, path: Path, pythonpath: str = "") -> dict:
    env = dict(os.environ)
    env.pop("NEURON_PORT_SIMULATE", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    load = os.getloadavg()[0]
    done = subprocess.run([sys.executable, "-c", WRAPPER, python, "-m", "neuron_port", "rewrite", "--check", "-q",
                           "--no-cache", "-j", "1", path.name], cwd=path.parent, env=env, check=True,
                          stdout=subprocess.PIPE, text=True)
    run = json.loads(done.stdout)
    if run["rc"] not in (0, 1):
        raise SystemExit(f"{python} on {path}: exit {run['rc']}: {run['stderr']}")
    run["load"] = load
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline-python", help="python of another neuron-port install to compare with")
    parser.add_argument("--baseline-path", default="", help="PYTHONPATH for the baseline (a source tree)")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from neuron_port.rewrite.memory import MEMORY_PER_SOURCE_BYTE

    folder = Path(tempfile.mkdtemp(prefix="np-bench-flat-"))
    files = {"2-line": folder / "tiny.py"}
    files["2-line"].write_text("import torch\nx = torch.zeros(2).cuda()\n")
    for shape in ("flat", "functions"):
        files[shape] = folder / f"{shape}.py"
        subprocess.run([sys.executable, str(HERE / "generate_large_file.py"), str(files[shape]),
                        "--lines", str(args.lines), "--shape", shape], check=True, stdout=subprocess.DEVNULL)
    installs = {"this tree": (sys.executable, "")}
    if args.baseline_python:
        installs["baseline"] = (args.baseline_python, args.baseline_path)

    results: dict[tuple[str, str], list[dict]] = {}
    for round_number in range(args.rounds):
        for kind, path in files.items():
            for label, (python, pythonpath) in installs.items():
                run = measure(python, path, pythonpath)
                results.setdefault((kind, label), []).append(run)
                print(f"round {round_number + 1}: {kind}, {label}: {run['wall']:.1f} s wall, {run['cpu']:.1f} CPU-s, "
                      f"{run['peak_kb'] / 1024:.0f} MB @load {run['load']:.1f}", file=sys.stderr, flush=True)

    print(f"machine: {platform.machine()} {os.cpu_count()} cores, {platform.platform()}, "
          f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}")
    print(f"estimate: {MEMORY_PER_SOURCE_BYTE} bytes per source byte (neuron_port/rewrite/memory.py)")
    print(f"{'file':10} {'install':10} {'bytes':>9} {'lines':>6} {'wall s':>7} {'CPU s':>6} {'peak MB':>8} "
          f"{'B/byte':>7} {'x est.':>6} {'findings':>8}")
    for kind, path in files.items():
        text = path.read_bytes()
        lines = text.count(b"\n")
        for label in installs:
            rows = results[(kind, label)]
            peak = max(r["peak_kb"] for r in rows) * 1024
            idle = min(r["peak_kb"] for r in results[("2-line", label)]) * 1024
            per_byte = (peak - idle) / len(text) if kind != "2-line" else 0.0
            print(f"{kind:10} {label:10} {len(text):9} {lines:6} "
                  f"{min(r['wall'] for r in rows):7.1f} {min(r['cpu'] for r in rows):6.1f} {peak / 2**20:8.0f} "
                  f"{per_byte:7.0f} {per_byte / MEMORY_PER_SOURCE_BYTE:6.2f} {rows[0]['findings']:8}")


if __name__ == "__main__":
    main()
