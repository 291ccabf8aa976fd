"""How many worker processes a rewrite starts, and that they end with it (issue 33, item 3): `-j N` is
capped by the files and the cores (the pool forks all its workers at once: `-j 99999` grew to 840
processes), and a SIGKILLed `rewrite` takes its workers along (PR_SET_PDEATHSIG; they used to wait for
work for good). Through the real CLI; the processes are found by a marker in their environment."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

# passes the pre-filter (so each file goes to a worker) and takes a while to parse
SLOW = "import torch\ntorch.cuda.synchronize()\n" + "".join(f"x{i} = ({i}, [{i}], {{{i}: {i}}})\n" for i in range(3000))


def _environ(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return b"\0" + handle.read()
    except OSError:
        return b""


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return "X"


def marked(marker: str) -> list[int]:
    """The living processes whose environment holds ``marker`` (zombies have ended)."""
    needle = b"\0" + marker.encode() + b"="
    return [int(name) for name in os.listdir("/proc")
            if name.isdigit() and needle in _environ(int(name)) and _state(int(name)) not in ("Z", "X")]


def _children(pid: int) -> int:
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            count += fields[1] == str(pid).encode() and fields[0] not in (b"Z", b"X")
    return count


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "project").mkdir()
    return tmp_path / "project"


@pytest.fixture
def marker():
    name = "NEURON_PORT_TEST_" + secrets.token_hex(6).upper()
    yield name
    for pid in marked(name):  # whatever a failing run left behind
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _start(root: Path, marker: str, *args: str) -> subprocess.Popen:
    """The rewrite, its output to files (a pipe nobody reads while the test watches would block it)."""
    env = {k: v for k, v in os.environ.items() if k != "NEURON_PORT_SIMULATE"}
    env[marker] = "1"
    with open(root.parent / "out", "w") as out, open(root.parent / "err", "w") as err:
        return subprocess.Popen([sys.executable, "-m", "neuron_port", "rewrite", "--check", "--no-cache", *args,
                                 "."], cwd=root, env=env, stdout=out, stderr=err)


def _output(root: Path) -> tuple[str, str]:
    return (root.parent / "out").read_text(), (root.parent / "err").read_text()


def _files(root: Path, count: int) -> None:
    for i in range(count):
        (root / f"m{i:02d}.py").write_text(SLOW)


@pytest.mark.parametrize(("requested", "files", "cores", "expected"), [
    (99999, 3, 2, 2), (99999, 3, 64, 3), (None, 3, 64, 3), (None, 100, 8, 8), (4, 100, 8, 4), (1, 100, 8, 1),
    (8, 0, 8, 1), (None, 1, 1, 1)])
def test_worker_count(requested, files, cores, expected):
    from neuron_port.rewrite.runner import worker_count

    assert worker_count(requested, files, cores) == expected


def test_many_jobs_start_no_more_workers_than_files_and_cores(project, marker):
    _files(project, 12)
    proc = _start(project, marker, "-j", "40")  # 40, not 99999: the old code forks every one of them
    most = 0
    while proc.poll() is None:
        most = max(most, _children(proc.pid))
        time.sleep(0.005)
    out, err = _output(project)
    assert proc.returncode == 1, out + err
    assert "12 file(s) scanned" in out, out
    cores = len(os.sched_getaffinity(0))
    assert 1 <= most <= min(12, cores), (most, cores)
    if cores < 40:
        assert err.count(f"--jobs 40 is more than the {cores} CPU core(s)") == 1, err


def test_sigkill_ends_the_workers(project, marker):
    _files(project, 40)
    proc = _start(project, marker, "-j", "2")
    deadline = time.monotonic() + 120
    while len(marked(marker)) < 3 and proc.poll() is None and time.monotonic() < deadline:  # the main + 2 workers
        time.sleep(0.01)
    assert proc.poll() is None and len(marked(marker)) >= 3, "the pool did not start"
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marked(marker) == [], "workers outlived the SIGKILLed rewrite"
