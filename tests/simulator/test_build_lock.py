"""The simulator build's lock, manifest and load errors, without compiling (issue 33 item 1): a dead holder's lock
is free within seconds, even while the compilers it started run on; a library is loaded only when its manifest
matches; a core that cannot be built or loaded is one line that fails `check`."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, run_cli

from neuron_backend import build
from neuron_backend.build_lock import BuildLock, Holder, process_start, read_holder

HOLD = textwrap.dedent("""\
    import subprocess, sys, time
    from pathlib import Path
    from neuron_backend.build_lock import BuildLock
    lock = BuildLock(Path(sys.argv[1])).__enter__()
    # a long child started as torch starts ninja, but keeping every descriptor it may: the lock must not go with it
    child = subprocess.Popen(["sleep", "600"], close_fds=False)
    print(child.pid, flush=True)
    time.sleep(600)
""")


def _holder(lock: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
    return proc, int(proc.stdout.readline())


def test_a_sigkilled_holders_lock_is_taken_within_seconds_though_its_child_runs_on(tmp_path):
    lock = tmp_path / "build.lock"
    holder, child = _holder(lock)
    seen: list = []
    try:
        threading.Timer(2.0, os.kill, (holder.pid, signal.SIGKILL)).start()
        t0 = time.monotonic()
        with BuildLock(lock, on_wait=lambda h, waited: seen.append(h)) as taken:
            took = time.monotonic() - t0
            assert os.path.exists(f"/proc/{child}") or sys.platform != "linux", "the holder's child should still run"
            assert taken.waited and taken.previous is not None and taken.previous.pid == holder.pid
            assert read_holder(lock).pid == os.getpid()
        assert 2.0 <= took < 6.0, took
        assert seen and seen[0] is not None and seen[0].pid == holder.pid
        assert lock.read_text() == "", "a normal release leaves no holder record"
        with BuildLock(lock) as again:
            assert not again.waited and again.previous is None
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
        holder.stdout.close()


def test_a_holder_is_alive_only_while_its_pid_names_the_same_process(tmp_path):
    me = Holder.me()
    assert me.alive() is True
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert Holder(int(gone.stdout), None, me.host, me.since, "").alive() is False
    if process_start(os.getpid()) is not None:  # /proc: a reused pid has another start time
        assert Holder(os.getpid(), str(int(me.start) - 1), me.host, me.since, "").alive() is False
    assert Holder(os.getpid(), me.start, "another-host.example", me.since, "").alive() is None


def _built(folder: Path, key: dict, data: bytes = b"\x7fELF not really a library") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / build.LIBRARY).write_bytes(data)
    manifest = {"key": key, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pid": os.getpid()}
    (folder / build.MANIFEST).write_text(json.dumps(manifest))
    return folder / build.LIBRARY


@pytest.mark.parametrize("damage, reason", [
    (None, "built"),
    ("flip", "does not match its manifest"),
    ("truncate", "does not match its manifest"),
    ("other key", "another build key"),
    ("no manifest", "without a manifest"),
    ("bad manifest", "unreadable"),
    ("no library", "library its manifest names is missing"),
])
def test_a_library_is_loaded_only_when_its_manifest_matches(tmp_path, damage, reason):
    key = {"torch": "2.13.0+cpu", "python": "cpython-312", "sources": "abc"}
    so = _built(tmp_path, key)
    if damage == "flip":
        so.write_bytes(so.read_bytes().replace(b"really", b"REALLY"))
    elif damage == "truncate":
        so.write_bytes(so.read_bytes()[:-1])
    elif damage == "other key":
        key = {**key, "python": "cpython-311"}
    elif damage == "no manifest":
        (tmp_path / build.MANIFEST).unlink()
    elif damage == "bad manifest":
        (tmp_path / build.MANIFEST).write_text("{not json")
    elif damage == "no library":
        so.unlink()
    found, why = build.verified_library(tmp_path, key)
    assert (found == so) is (damage is None) and reason in why


def _failed_check(tmp_path: Path, cache: Path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("import torch\nprint(torch.ones(2, device='neuron').sum().item())\n")
    return run_cli("check", str(project), "--", sys.executable, "train.py", env={"NEURON_PORT_CACHE_DIR": str(cache)})


@pytest.mark.slow
def test_a_core_that_does_not_load_is_one_line_and_fails_check(tmp_path, monkeypatch):
    """A library whose manifest matches but that the dynamic loader refuses: one line naming the file and
    `neuron-port doctor`, no traceback, and the run fails (it said "succeeded" before, or printed torch's
    60-line "Failed to load the backend extension")."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("NEURON_PORT_CACHE_DIR", str(cache))
    so = _built(build.build_dir(), build.current_key())
    result = _failed_check(tmp_path, cache)
    text = result.stdout + result.stderr
    assert result.returncode != 0, text
    assert "Traceback" not in text and "Failed to load the backend extension" not in text, text
    line = f"neuron-port: could not load the simulated neuron device's core {so} ("
    assert line in result.stdout and "neuron-port doctor" in result.stdout, text
    assert "NP909 the command exited with code 3: " + line in result.stdout, result.stdout
    assert not (so.parent / build.LOCK).exists(), "a verified library was loaded without a build"


@pytest.mark.slow
def test_an_unusable_cache_folder_is_one_line_and_fails_check(tmp_path):
    cache = tmp_path / "a-file"
    cache.write_text("not a folder\n")
    result = _failed_check(tmp_path, cache)
    text = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in text, text
    assert "NP909 the command exited with code 3: neuron-port: cannot create the simulated neuron device's build " \
           f"folder {cache}/torch-extensions/" in result.stdout, text
    assert "`neuron-port doctor` checks the set-up" in result.stdout, text


def test_doctor_names_a_build_that_died_and_where_the_core_goes(tmp_path, monkeypatch):
    """A lock file still naming a builder that is gone (SIGKILLed mid-build): doctor says the core is not built,
    where it will be, and that the last build did not finish; nothing is taken or changed."""
    monkeypatch.setenv("NEURON_PORT_CACHE_DIR", str(tmp_path))
    folder = build.build_dir()
    folder.mkdir(parents=True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    record = {"pid": int(gone.stdout), "start": None, "host": Holder.me().host, "since": time.time() - 90,
              "python": sys.executable}
    (folder / build.LOCK).write_text(json.dumps(record))
    doctor = run_cli("doctor", env={"NEURON_PORT_CACHE_DIR": str(tmp_path)})
    line = doctor.stdout.strip().splitlines()[-1]
    assert line.startswith(f"simulator core: not built yet for this install; the last build, by pid {record['pid']} "), \
        doctor.stdout
    assert "did not finish" in line and f"into {folder}, or now with `neuron-port doctor --build`" in line
    assert json.loads((folder / build.LOCK).read_text()) == record
