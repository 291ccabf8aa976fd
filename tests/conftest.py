from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real console entry point in a child process (what users run)."""
    full_env = dict(os.environ)
    full_env.pop("NEURON_PORT_SIMULATE", None)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "neuron_port", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def report_schema():
    return json.loads((REPO / "neuron_port" / "schema" / "report.schema.json").read_text())
