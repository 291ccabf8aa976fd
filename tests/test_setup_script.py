"""scripts/setup.sh takes the CPU build of torch (issue 22, item 6): from PyTorch's CPU wheel index when it
answers, else from what pip's own configuration finds, never the CUDA build, and it says which. The real
script runs in a scratch copy whose `.venv/bin/python` records every pip call and hands everything else
(the index probe, the checks of the result) to this interpreter; a local HTTP server plays the index."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow

STUB = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  echo "$*" >> "$PIP_LOG"
  case "$*" in
    *"pip install"*torch==*) exit "${TORCH_INSTALL_STATUS:-0}" ;;
  esac
  exit 0
fi
exec "$REAL_PYTHON" "$@"
"""


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    root = tmp_path / "clone"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "setup.sh", root / "scripts" / "setup.sh")
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(STUB)
    python.chmod(0o755)
    return root


def run_setup(root: Path, index: str, torch_status: int = 0) -> tuple[subprocess.CompletedProcess, list[str]]:
    log = root / "pip.log"
    env = dict(os.environ, PIP_LOG=str(log), REAL_PYTHON=sys.executable, NEURON_PORT_NO_APT="1",
               NEURON_PORT_TORCH_INDEX=index, TORCH_INSTALL_STATUS=str(torch_status))
    result = subprocess.run(["bash", "scripts/setup.sh"], cwd=root, env=env, capture_output=True, text=True,
                            timeout=300)
    return result, log.read_text().splitlines() if log.exists() else []


def torch_calls(calls: list[str]) -> list[str]:
    return [c for c in calls if "pip install" in c and "torch==" in c]


@pytest.fixture
def index_server():
    """A local HTTP server that answers for /torch/, as PyTorch's CPU wheel index does."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 (http.server's name)
            self.send_response(200 if self.path == "/whl/cpu/torch/" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/whl/cpu"
    server.shutdown()


def test_cpu_index_when_it_answers(scratch, index_server):
    result, calls = run_setup(scratch, index_server)
    assert result.returncode == 0, result.stderr
    assert torch_calls(calls) == [f"-m pip install -q --disable-pip-version-check --index-url {index_server} "
                                  "torch==2.13.0+cpu"], calls
    assert f"from PyTorch's CPU wheel index ({index_server})" in result.stderr
    assert "(CPU build, no CUDA packages)" in result.stderr  # the check of what is installed
    assert any(c.endswith("-e .[sim,dev,zoo,html,ray]") for c in calls), calls


def test_pips_own_sources_when_the_index_does_not_answer(scratch):
    unreachable = "http://127.0.0.1:9/whl/cpu"  # the discard port: nothing listens
    result, calls = run_setup(scratch, unreachable)
    assert result.returncode == 0, result.stderr
    assert torch_calls(calls) == ["-m pip install -q --disable-pip-version-check torch==2.13.0+cpu"], calls
    assert f"PyTorch's CPU wheel index ({unreachable}) is not reachable" in result.stderr
    assert "from pip's own configuration" in result.stderr


def test_no_cpu_build_anywhere_stops_instead_of_taking_the_cuda_build(scratch):
    result, calls = run_setup(scratch, "", torch_status=1)  # empty: the index is not tried
    assert result.returncode == 1
    assert torch_calls(calls) == ["-m pip install -q --disable-pip-version-check torch==2.13.0+cpu"], calls
    assert "torch==2.13.0+cpu is in neither place" in result.stderr
    assert not any(c.endswith("-e .[sim,dev,zoo,html,ray]") for c in calls)  # nothing else installed
    assert not (scratch / ".venv" / ".neuron-port-installed").exists()
