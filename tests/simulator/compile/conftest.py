"""Helpers for the torch.compile / NEFF cache tests: user-style scripts run in subprocesses with
NEURON_PORT_SIMULATE=1, their own events folder and their own NEFF cache folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import REPO, simulator_env

RESULT = "RESULT:"


def base_env(events_dir: Path, neff_dir: Path) -> dict[str, str]:
    events_dir.mkdir(parents=True, exist_ok=True)  # as `neuron-port check` does: the simulator never creates it
    return simulator_env(NEURON_PORT_SIMULATE="1", NEURON_PORT_EVENTS_DIR=str(events_dir),
                         TORCH_NEURONX_NEFF_CACHE_DIR=str(neff_dir))


class Run:
    def __init__(self, proc, events_dir: Path, script: Path):
        self.proc, self.events_dir, self.script = proc, events_dir, script

    def results(self) -> dict:
        out = {}
        for line in self.proc.stdout.splitlines():
            if line.startswith(RESULT):
                out.update(json.loads(line[len(RESULT):]))
        assert out, f"no result\nstdout:\n{self.proc.stdout[-3000:]}\nstderr:\n{self.proc.stderr[-5000:]}"
        return out

    def events(self) -> list[dict]:
        files = sorted(self.events_dir.glob("neuron-events-*.jsonl"))
        assert len(files) == 1, (files, self.proc.stderr[-3000:])
        return [json.loads(line) for line in files[0].read_text().splitlines()]

    def kind(self, kind: str) -> list[dict]:
        return [e for e in self.events() if e["kind"] == kind]

    def line_of(self, marker: str) -> int:
        return next(i for i, line in enumerate(self.script.read_text().splitlines(), 1) if marker in line)


def run_script(code: str, workdir: Path, neff_dir: Path, env: dict | None = None, tag: str = "run",
               timeout: int = 300) -> Run:
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / "user_script.py"
    script.write_text(textwrap.dedent(code))
    events_dir = workdir / f"events-{tag}"
    e = base_env(events_dir, neff_dir)
    e.update(env or {})
    proc = subprocess.run([sys.executable, str(script)], cwd=workdir, env=e, capture_output=True, text=True,
                          timeout=timeout)
    return Run(proc, events_dir, script)
