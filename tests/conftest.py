from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


TERMINAL_SIZE = ("COLUMNS", "LINES")

# The whole-corpus sweeps of a few property tests (the parse reuse, the dataclass-code corruptions, the
# pre-filter, the lowering verdicts) run a fixed subset that keeps every kind of case unless this is set
# (CONTRIBUTING.md, "Full sweeps"): the project's rule puts full sweeps in bench/, one subset in the suite.
FULL_SWEEPS = os.environ.get("NEURON_PORT_FULL_SWEEPS", "").strip() == "1"


def fixture_and_example_sources():
    """Every fixture's Python text and every rule example's source: the corpus the engine's whole-file
    properties are checked over (tests/rewrite/test_traversal.py, test_incremental_followup.py)."""
    from neuron_port.rules.registry import all_rules

    for path in sorted(FIXTURES.rglob("*.py")):
        yield path.read_text(encoding="utf-8", errors="replace")
    for rule in all_rules():
        for example in list(rule.VALID) + list(rule.INVALID):
            yield example if isinstance(example, str) else example.source()


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real console entry point in a child process (what users run)."""
    full_env = dict(os.environ)
    full_env.pop("NEURON_PORT_SIMULATE", None)
    for key in TERMINAL_SIZE:  # a pytest-xdist worker exports COLUMNS=80: panels would wrap where a user's pipe does not
        full_env.pop(key, None)
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


def simulator_env(**extra: str) -> dict[str, str]:
    """The environment of a user script run on the simulator: this checkout on PYTHONPATH, no Neuron or
    torchrun variables inherited from the caller, one intra-op thread, the shared build cache kept."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NEURON_", "TORCH_NEURONX_")) and k not in TERMINAL_SIZE}
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["OMP_NUM_THREADS"] = "1"
    if os.environ.get("NEURON_PORT_CACHE_DIR"):
        env["NEURON_PORT_CACHE_DIR"] = os.environ["NEURON_PORT_CACHE_DIR"]
    env.update(extra)
    return env


def run_script(tmp_path: Path, script: str, shape_only: bool, timeout: int = 300, **env: str) -> str:
    """A user's script run on the simulator, real or shape-only (its own file, so both runs of one test
    sit side by side); its stdout. A failure shows the script's stderr."""
    path = tmp_path / ("shape_only.py" if shape_only else "real.py")
    path.write_text(script)
    proc = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True,
                          env=simulator_env(NEURON_PORT_SIMULATE="1", NEURON_PORT_SHAPE_ONLY="1" if shape_only else "0",
                                            **env), timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def tagged_json(stdout: str, *keys: str) -> dict:
    """The script's ``KEY <json>`` lines, parsed."""
    lines = dict(line.split(" ", 1) for line in stdout.splitlines() if line.startswith(keys))
    return {key: json.loads(value) for key, value in lines.items()}


@pytest.fixture(scope="session")
def sim_build() -> Path:
    """Build (or find in the cache) the simulator's C++ core once per session, before any test runs a
    script on it (several ranks would otherwise race to build it, and timed runs would include it)."""
    proc = subprocess.run(
        [sys.executable, "-c", "import neuron_backend.build as b; print(b.build())"],
        cwd=REPO, env=simulator_env(), capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def report_schema():
    return json.loads((REPO / "neuron_port" / "schema" / "report.schema.json").read_text())
