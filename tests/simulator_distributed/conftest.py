"""Helpers for the distributed tests: user-style scripts launched with torchrun (2 ranks) under the
simulator, each rank writing its own events file into a temporary folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULT = "RESULT:"


@pytest.fixture(scope="session")
def sim_build():
    """Build (or find in the cache) the C++ core once, before the ranks race to build it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_", "TORCH_NEURONX_"))}
    env["PYTHONPATH"] = str(REPO)
    if os.environ.get("NEURON_PORT_CACHE_DIR"):
        env["NEURON_PORT_CACHE_DIR"] = os.environ["NEURON_PORT_CACHE_DIR"]
    proc = subprocess.run([sys.executable, "-c", "import neuron_backend.build as b; print(b.build())"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]


class TorchrunResult:
    def __init__(self, proc, events_dir: Path, script: Path):
        self.proc, self.events_dir, self.script = proc, events_dir, script

    def results(self) -> dict[int, dict]:
        out: dict[int, dict] = {}
        for line in self.proc.stdout.splitlines():
            if line.startswith(RESULT):
                r = json.loads(line[len(RESULT):])
                out[r["rank"]] = r
        return out

    def rank_events(self, rank: int) -> list[dict]:
        files = sorted(self.events_dir.glob(f"neuron-events-rank{rank}-pid*.jsonl"))
        assert len(files) == 1, (files, self.proc.stderr[-3000:])
        return [json.loads(line) for line in files[0].read_text().splitlines()]

    def line_of(self, marker: str) -> int:
        return next(i for i, line in enumerate(self.script.read_text().splitlines(), 1) if marker in line)


def torchrun(code: str, workdir: Path, nproc: int = 2, timeout: int = 300) -> TorchrunResult:
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / "train_dist.py"
    script.write_text(textwrap.dedent(code))
    events_dir = workdir / "events"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_", "TORCH_NEURONX_"))}
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(OMP_NUM_THREADS="1", NEURON_PORT_SIMULATE="1", NEURON_PORT_EVENTS_DIR=str(events_dir),
               TORCH_NEURONX_NEFF_CACHE_DIR=str(workdir / "neff-cache"))
    if os.environ.get("NEURON_PORT_CACHE_DIR"):
        env["NEURON_PORT_CACHE_DIR"] = os.environ["NEURON_PORT_CACHE_DIR"]
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                           str(script)], cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    return TorchrunResult(proc, events_dir, script)
