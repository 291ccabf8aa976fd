"""The layout property test at scale: many more random chains than the suite's 48
(tests/simulator/compile/layout_chains.py), each compiled on the simulated ``neuron`` device and
compared with eager on the CPU, forward and backward (issue 39).

    nice -n 10 .venv/bin/python bench/zoo/layout_property.py [--examples 400] [--seed 1]
        [--out bench/zoo/results/layout_property.json]

One user-style process runs every chain (``NEURON_PORT_SIMULATE=1``, its own NEFF cache and events
folder under a temporary directory); the summary counts the chains per layout and op family and
lists every chain over the suite's tolerance with its errors.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CHAINS = REPO / "tests" / "simulator" / "compile" / "layout_chains.py"
TOLERANCE = 1e-4  # as tests/simulator/compile/test_layout_property.py


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(HERE / "results" / "layout_property.json"))
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_", "TORCH_NEURONX_"))}
        if os.environ.get("NEURON_PORT_CACHE_DIR"):
            env["NEURON_PORT_CACHE_DIR"] = os.environ["NEURON_PORT_CACHE_DIR"]
        env.update(NEURON_PORT_SIMULATE="1", NEURON_PORT_EVENTS_DIR=str(Path(tmp) / "events"),
                   TORCH_NEURONX_NEFF_CACHE_DIR=str(Path(tmp) / "neff"), OMP_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p))
        (Path(tmp) / "events").mkdir()
        t0 = time.time()
        proc = subprocess.run([sys.executable, str(CHAINS), "--examples", str(a.examples), "--seed", str(a.seed)],
                              cwd=tmp, env=env, capture_output=True, text=True)
        wall = round(time.time() - t0, 1)
    lines = [json.loads(x[len("RESULT:"):]) for x in proc.stdout.splitlines() if x.startswith("RESULT:")]
    repro = next((x["repro"] for x in lines if "repro" in x), None)
    examples = [x for x in lines if "id" in x]
    bad = [x for x in examples if x["error"] or any(v > TOLERANCE for v in x["errors"].values())]
    worst = max((v for x in examples for v in x["errors"].values()), default=None)
    worst_example = next((x for x in examples if worst is not None and worst in x["errors"].values()), None)
    doc = {"command": " ".join(["bench/zoo/layout_property.py", *(argv if argv is not None else sys.argv[1:])]),
           "returncode": proc.returncode, "wall_seconds": wall, "examples": len(examples), "repro": repro,
           "failed": len(bad), "worst_error": worst, "worst_example": worst_example, "tolerance": TOLERANCE,
           "layouts": dict(collections.Counter(x["layout"] for x in examples)),
           "ops": dict(collections.Counter(op for x in examples for op in x["ops"])),
           "failures": bad, "stderr_tail": proc.stderr[-2000:] if proc.returncode else ""}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(examples)} chains in {wall} s: {len(bad)} over {TOLERANCE} (worst {worst}); repro {repro}")
    return 1 if bad or proc.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
