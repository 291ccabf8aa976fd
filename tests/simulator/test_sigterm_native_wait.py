"""SIGTERM reaches a simulated process whose main thread waits in native code (neuron_backend/events/sigterm.py):
it ends at once with -15 and writes its snapshot as `sigterm`, as a process without the simulator ends at once.
Before, the simulator's Python handler waited for the main thread to come back to the interpreter: a rank in a
store rendezvous for a peer that had failed ignored torchrun's SIGTERM for the 30 s of torchrun's grace."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import simulator_env

pytestmark = pytest.mark.slow

PRELUDE = """\
import os, sys, signal, datetime, torch
from torch.distributed import TCPStore
torch.ones(1, device="neuron")  # the simulator is loaded and its hooks installed
store = TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds={timeout}))
"""

BLOCKED = PRELUDE + """\
print("READY", flush=True)
store.wait(["a key no peer will ever set"])  # a native wait that retries on EINTR (gloo connecting its peers)
print("UNREACHED", flush=True)
"""

USER_HANDLER = PRELUDE + """\
signal.signal(signal.SIGTERM, lambda *a: print("USER HANDLER", flush=True))  # the user's, after the simulator's
print("READY", flush=True)
try:
    store.wait(["a key no peer will ever set"])
except Exception as e:
    print("WAIT ENDED", type(e).__name__, flush=True)
"""

FORKED_CHILD = PRELUDE + """\
import time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, b"1")  # after the fork's own work: a signal before it may be dropped (CPython resets them)
    time.sleep(60)
    os._exit(0)
os.read(r, 1)
os.kill(pid, signal.SIGTERM)
_, status = os.waitpid(pid, 0)
time.sleep(1.5)  # longer than the watcher's grace: the child's signal must not end the parent
print("PARENT ALIVE", os.WIFSIGNALED(status) and os.WTERMSIG(status), flush=True)
"""


def _start(tmp_path: Path, code: str, timeout: int) -> subprocess.Popen:
    script = tmp_path / "train.py"
    script.write_text(code.replace("{timeout}", str(timeout)))
    events = tmp_path / "events"
    events.mkdir()
    env = simulator_env(NEURON_PORT_SIMULATE="1", NEURON_PORT_EVENTS_DIR=str(events))
    return subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _status(tmp_path: Path) -> str:
    (events,) = (tmp_path / "events").glob("neuron-events-*.jsonl")
    (line,) = [json.loads(x) for x in events.read_text().splitlines() if '"kind": "process"' in x]
    return line["status"]


def test_sigterm_ends_a_process_blocked_in_a_native_wait_at_once(sim_build, tmp_path):
    proc = _start(tmp_path, BLOCKED, timeout=120)
    assert proc.stdout.readline().strip() == "READY", proc.stderr.read()[-3000:]
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=30)  # the old code: until the store's 120 s timeout
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGTERM, err[-3000:]
    assert "UNREACHED" not in out
    assert _status(tmp_path) == "sigterm"


def test_a_handler_the_user_installed_is_left_to_run(sim_build, tmp_path):
    proc = _start(tmp_path, USER_HANDLER, timeout=4)
    assert proc.stdout.readline().strip() == "READY", proc.stderr.read()[-3000:]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    assert "WAIT ENDED" in out and "USER HANDLER" in out  # as without the simulator: after the native wait


def test_a_forked_childs_sigterm_does_not_end_the_parent(sim_build, tmp_path):
    proc = _start(tmp_path, FORKED_CHILD, timeout=4)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    assert f"PARENT ALIVE {int(signal.SIGTERM)}" in out
