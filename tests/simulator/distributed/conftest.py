"""Helpers for the distributed tests: user-style scripts launched with torchrun (2 ranks) under the
simulator, each rank writing its own events file into a temporary folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import simulator_env

RESULT = "RESULT:"


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
    events_dir.mkdir(exist_ok=True)  # as `neuron-port check` does: the simulator never creates it
    env = simulator_env(NEURON_PORT_SIMULATE="1", NEURON_PORT_EVENTS_DIR=str(events_dir),
                        TORCH_NEURONX_NEFF_CACHE_DIR=str(workdir / "neff-cache"))
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                           str(script)], cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    return TorchrunResult(proc, events_dir, script)
