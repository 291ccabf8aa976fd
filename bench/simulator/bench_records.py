"""The cost of the crash-proof records on the simulator's per-op path: this checkout against a baseline
checkout (e.g. the commit before the records), in one run.

    .venv/bin/python bench/simulator/bench_records.py --baseline /path/to/baseline/checkout [--rounds 5]

Each round runs `bench_step.py --only add16 --records` (events and records written into a temporary
folder, as under `neuron-port check`) once with this checkout's `neuron_backend` and once with the
baseline's (its folder first on PYTHONPATH), alternating, so load from other processes hits both alike.
Reported: the minimum over rounds of the per-op overhead over CPU (`x + y`, 16 elements) of each side,
and the difference. Goal (simulator section of bench/README.md): <= 3 us over CPU with the records.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]


def run_side(root: Path, repeats: int) -> dict:
    env = dict(os.environ, NEURON_PORT_SIMULATE="1", PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, str(HERE.parent / "bench_step.py"), "--only", "add16", "--records",
                          "--skip-import", "--repeats", str(repeats)], env=env, capture_output=True, text=True,
                         check=True, cwd=root)
    return json.loads(out.stdout)["add16"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, required=True, help="a checkout (or export) of the baseline commit")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    sides = {"records": REPO, "baseline": args.baseline.resolve()}
    runs: dict[str, list[dict]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, root in sides.items():
            runs[name].append(run_side(root, args.repeats))
    best = {name: min(r["overhead_us"] for r in rs) for name, rs in runs.items()}
    print(json.dumps({"loadavg": os.getloadavg(), "overhead_us": best,
                      "records_minus_baseline_us": best["records"] - best["baseline"],
                      "sim_us": {name: min(r["sim_us"] for r in rs) for name, rs in runs.items()},
                      "cpu_us": {name: min(r["cpu_us"] for r in rs) for name, rs in runs.items()},
                      "goal_add_overhead<=3us": best["records"] <= 3.0}, indent=2))


if __name__ == "__main__":
    main()
