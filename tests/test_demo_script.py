"""The README's demo and the test set-up's browser step (issue 33, item 8): the demo fails visibly when a
step fails, never installs anything through apt, and the browser step never waits on another apt's lock.
The real scripts run in a scratch copy whose tools (`neuron-port`, `apt-get`) are small recording stubs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow

NEURON_PORT_STUB = """#!/bin/sh
echo "neuron-port $*" >> "$CALLS"
case "$1" in
  check) echo "check summary"; exit "${CHECK_STATUS:-0}" ;;
esac
echo "diff or findings"
"""

APT_STUB = """#!/bin/sh
echo "apt-get $*" >> "$CALLS"
case "$APT_MODE" in
  locked) echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)" >&2
          echo "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?" >&2
          exit 100 ;;
  broken) echo "E: Unable to locate package chromium" >&2; exit 100 ;;
esac
exit 0
"""


def stub(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A scratch clone whose .venv is already set up (the stamp is newer than pyproject.toml), so setup.sh
    installs nothing, and whose neuron-port and apt-get are stubs that record their calls."""
    root = tmp_path / "clone"
    shutil.copytree(REPO / "scripts", root / "scripts")
    shutil.copytree(REPO / "fixtures" / "gpt_trainer", root / "fixtures" / "gpt_trainer")
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    stub(root / ".venv" / "bin" / "neuron-port", NEURON_PORT_STUB)
    stub(root / ".venv" / "bin" / "python", "#!/bin/sh\nexit 0\n")
    stamp = root / ".venv" / ".neuron-port-installed"
    stamp.touch()
    later = (root / "pyproject.toml").stat().st_mtime + 10
    os.utime(stamp, (later, later))
    stub(tmp_path / "bin" / "apt-get", APT_STUB)
    return root


def run(clone: Path, script: str, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    calls = clone.parent / "calls.log"
    full = {k: v for k, v in os.environ.items() if k != "NEURON_PORT_NO_APT"}
    full.update(CALLS=str(calls), PATH=f"{clone.parent / 'bin'}{os.pathsep}{os.environ['PATH']}", **env)
    proc = subprocess.run(["bash", script], cwd=clone, env=full, capture_output=True, text=True, timeout=120)
    return proc, calls.read_text().splitlines() if calls.exists() else []


def test_demo_runs_every_step_and_exits_zero(clone):
    proc, calls = run(clone, "scripts/demo.sh", NEURON_PORT_BROWSER="no-such-browser")
    assert proc.returncode == 0, proc.stderr
    assert [c.split()[1] for c in calls] == ["rewrite", "rewrite", "rewrite", "check"], calls
    assert "check summary" in proc.stdout
    assert not any(c.startswith("apt-get") for c in calls), calls  # the demo installs no browser


def test_demo_whose_check_fails_exits_non_zero_and_says_which_step(clone):
    proc, calls = run(clone, "scripts/demo.sh", CHECK_STATUS="1")
    assert proc.returncode == 1
    assert 'the step "check" failed (exit status 1)' in proc.stderr
    assert "check summary" in proc.stdout  # what the check printed is still shown


def test_browser_step_skips_with_one_line_when_apt_is_locked(clone):
    if os.geteuid() != 0:
        pytest.skip("the browser step installs only as root")  # CI and these machines run as root
    proc, calls = run(clone, "scripts/setup_browser.sh", NEURON_PORT_BROWSER="no-such-browser", APT_MODE="locked")
    assert proc.returncode == 0
    assert all("DPkg::Lock::Timeout=0" in c for c in calls), calls  # never waits on the lock
    lines = [line for line in proc.stderr.splitlines() if "skipped" in line]
    assert len(lines) == 1 and "held by process 4242" in lines[0], proc.stderr


def test_browser_step_warns_when_the_package_cannot_be_installed(clone):
    if os.geteuid() != 0:
        pytest.skip("the browser step installs only as root")
    proc, _ = run(clone, "scripts/setup_browser.sh", NEURON_PORT_BROWSER="no-such-browser", APT_MODE="broken")
    assert proc.returncode == 0
    assert "chromium could not be installed" in proc.stderr and "Unable to locate package" in proc.stderr


def test_browser_step_does_nothing_when_the_browser_is_there(clone):
    proc, calls = run(clone, "scripts/setup_browser.sh", NEURON_PORT_BROWSER="sh")
    assert proc.returncode == 0 and calls == [] and proc.stderr == ""
