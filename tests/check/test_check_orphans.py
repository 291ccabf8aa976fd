"""A SIGKILLed `check` leaves nothing behind (issue 33, item 3): its command's whole process tree ends
within seconds (check/watcher.py; the command used to run on with parent 1), and the temporary folders
a dead run left in TMPDIR are removed by the watcher, or else by the next `check` (check/scratch.py),
never a live run's. Through the real CLI, with a command that starts a grandchild; the processes are
found by a marker in their environment, the folders in a TMPDIR of the test's own."""

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

# the command: a grandchild that sleeps for good, then the command itself does
COMMAND = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(0.1)"])
open(sys.argv[1], "w").close()
while True:
    time.sleep(0.1)
"""
PREFIXES = ("neuron-port-check-", "neuron-port-output-")


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def marked(marker: str) -> dict[int, bytes]:
    """The living processes whose environment holds ``marker``: their command lines."""
    needle = b"\0" + marker.encode() + b"="
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and needle in b"\0" + _read(f"/proc/{name}/environ"):
            stat = _read(f"/proc/{name}/stat")
            if stat and stat.rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X"):
                found[int(name)] = _read(f"/proc/{name}/cmdline")
    return found


def _kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def run(tmp_path):
    """Starts `check` runs that share a TMPDIR (tmp_path/tmp) and a marker; kills what a failure left."""
    marker = "NEURON_PORT_TEST_" + secrets.token_hex(6).upper()
    (tmp_path / "tmp").mkdir()
    (tmp_path / "command.py").write_text(COMMAND)
    started = []

    def start(name: str, *command: str) -> subprocess.Popen:
        project = tmp_path / name
        project.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "NEURON_PORT_SIMULATE"}
        env.update({marker: "1", "TMPDIR": str(tmp_path / "tmp")})
        command = command or (sys.executable, str(tmp_path / "command.py"), str(tmp_path / f"{name}.started"))
        proc = subprocess.Popen([sys.executable, "-m", "neuron_port", "check", str(project), "--", *command],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(proc)
        return proc

    def wait_started(name: str) -> None:
        deadline = time.monotonic() + 120
        while not (tmp_path / f"{name}.started").exists():
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.05)

    start.marker, start.wait_started, start.tmp = marker, wait_started, tmp_path / "tmp"
    yield start
    for proc in started:
        proc.kill()
        proc.wait()
    _kill(marked(marker))


def _folders(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith(PREFIXES))


def _settles(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def test_sigkill_ends_the_command_tree_and_its_folders(run):
    check = run("a")
    run.wait_started("a")
    commands = [cmd for cmd in marked(run.marker).values() if b"neuron_port" not in cmd]
    assert len(commands) == 2, commands  # the command and its grandchild
    assert len(_folders(run.tmp)) == 2, _folders(run.tmp)
    check.kill()
    check.wait()
    assert _settles(lambda: not marked(run.marker)), marked(run.marker)  # the watcher too, once done
    assert _folders(run.tmp) == []


def test_the_next_check_removes_a_dead_runs_folders_and_no_live_ones(run):
    live = run("live")
    run.wait_started("live")
    live_folders = _folders(run.tmp)
    dead = run("dead")
    run.wait_started("dead")
    # the watcher too (an OOM kill of both, a `kill -9` of every process): nothing is left to clean up
    _kill(pid for pid, cmd in marked(run.marker).items()  # the watcher's last word: the pid it watches
          if b"neuron_port.check.watcher" in cmd and cmd.split(b"\0")[-2] == str(dead.pid).encode())
    dead.kill()
    dead.wait()
    _kill(pid for pid, cmd in marked(run.marker).items() if b"dead.started" in cmd)  # its command, by hand
    left = [name for name in _folders(run.tmp) if name not in live_folders]
    assert len(left) == 2, _folders(run.tmp)  # what the issue saw: the dead run's folders stay

    after = run("after", sys.executable, "-c", "pass")
    assert after.wait(timeout=300) == 0
    assert _folders(run.tmp) == live_folders  # the dead run's gone, the live run's kept
    assert live.poll() is None
    live.send_signal(signal.SIGTERM)  # a live run ends as always: it removes its own
    live.wait(timeout=60)
    assert _folders(run.tmp) == []


def test_only_a_dead_owners_folders_are_removed(tmp_path):
    """The rules, on folders made by hand: a dead owner's (no such process; a pid that now names another
    process) go; a live owner's, another host's, an untagged one, a link and a file stay."""
    from neuron_port.atomic import owner_token
    from neuron_port.check.scratch import remove_dead_runs_folders

    token = owner_token()
    if token is None:
        pytest.skip("no owner tokens here (/proc)")
    pid, start, host = token.split("-")
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    names = {
        "gone": f"neuron-port-check-{pid_max - 1}-{start}-{host}-abc",
        "reused": f"neuron-port-output-{pid}-{int(start) + 1}-{host}-abc",
        "live": f"neuron-port-check-{pid}-{start}-{host}-abc",
        "other_host": f"neuron-port-check-{pid_max - 1}-{start}-{'0' * 8 if host != '0' * 8 else '1' * 8}-abc",
        "untagged": "neuron-port-check-abc12345",
        "other_prefix": f"neuron-port-cache-{pid_max - 1}-{start}-{host}-abc",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "events").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    (tmp_path / f"neuron-port-check-{pid_max - 2}-{start}-{host}-link").symlink_to(outside)
    (tmp_path / f"neuron-port-check-{pid_max - 3}-{start}-{host}-file").write_text("x")
    (tmp_path / names["gone"] / "link").symlink_to(outside)  # inside a removed folder: not followed

    assert remove_dead_runs_folders(folder=str(tmp_path)) == 2
    left = sorted(p.name for p in tmp_path.iterdir())
    assert names["gone"] not in left and names["reused"] not in left
    for kept in ("live", "other_host", "untagged", "other_prefix"):
        assert names[kept] in left
    assert (outside / "keep").read_text() == "x"
    assert len(left) == 4 + 3  # the kept four, the link, the file, outside
