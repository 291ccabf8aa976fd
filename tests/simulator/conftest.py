"""Shared fixtures for the simulator tests.

Every test runs user-style torch code in a subprocess with NEURON_PORT_SIMULATE=1 and its own
events folder, so tests are isolated from each other and from the pytest process. The C++ core is
built once per session (or reused from the cache).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import simulator_env

RESULT_MARK = "RESULT:"


class SimRun:
    def __init__(self, proc: subprocess.CompletedProcess, events_dir: Path, script: Path):
        self.proc = proc
        self.events_dir = events_dir
        self.script = script

    @property
    def result(self):
        for line in reversed(self.proc.stdout.splitlines()):
            if line.startswith(RESULT_MARK):
                return json.loads(line[len(RESULT_MARK):])
        raise AssertionError(f"no result line\nstdout:\n{self.proc.stdout[-3000:]}\nstderr:\n{self.proc.stderr[-5000:]}")

    def event_files(self) -> list[Path]:
        return sorted(self.events_dir.glob("neuron-events-*.jsonl"))

    def events(self) -> list[dict]:
        files = self.event_files()
        assert len(files) == 1, f"expected one events file, found {files}\nstderr:\n{self.proc.stderr[-3000:]}"
        return [json.loads(line) for line in files[0].read_text().splitlines()]

    def kind(self, kind: str) -> list[dict]:
        return [e for e in self.events() if e["kind"] == kind]

    def line_of(self, marker: str) -> int:
        for i, line in enumerate(self.script.read_text().splitlines(), 1):
            if marker in line:
                return i
        raise AssertionError(f"marker {marker!r} not in script")


@pytest.fixture
def run_sim(sim_build, tmp_path):
    """run_sim(code, env=None, simulate=True, timeout=240, make_events_dir=True) -> SimRun"""

    def run(code: str, env: dict | None = None, simulate: bool = True, timeout: int = 240,
            name: str = "user_script.py", make_events_dir: bool = True) -> SimRun:
        script = tmp_path / name
        script.write_text(textwrap.dedent(code))
        events_dir = tmp_path / "events"
        if make_events_dir:
            events_dir.mkdir(exist_ok=True)  # as `neuron-port check` does: the simulator never creates it
        e = simulator_env()
        e["NEURON_PORT_EVENTS_DIR"] = str(events_dir)
        if simulate:
            e["NEURON_PORT_SIMULATE"] = "1"
        e.update(env or {})
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=e, capture_output=True,
                              text=True, timeout=timeout)
        return SimRun(proc, events_dir, script)

    return run


# Every script starts like this: autoload through the entry point when the package is installed,
# and an explicit enable() (idempotent) when it is only on PYTHONPATH.
PRELUDE = """\
import json, os, sys
import torch
import neuron_backend
assert neuron_backend.enable()
def result(obj):
    print("RESULT:" + json.dumps(obj), flush=True)
"""
