"""One simulator build per build key, shared by every install of the same sources, torch, Python and compiler
(issue 33 item 1): two installs at different paths building at once into a fresh cache while their builder is
SIGKILLed, a damaged library rebuilt rather than loaded, a failed load one line that fails `check`.

The race is one cold build (about 1-2 minutes of 2 cores), the damaged library a second; the rest is cheap.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_cli, simulator_env

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc")]

SCRIPT = """\
import json, torch, neuron_backend
x = torch.ones(2, device="neuron") + 1
print("RESULT:" + json.dumps({"file": neuron_backend.__file__, "value": x.cpu().tolist()}), flush=True)
"""
COLD_BUILD_TIMEOUT_S = 900  # a cold build under load from the other tests, with room to spare


def _install(root: Path) -> Path:
    """A copy of the simulator's package at its own path, as a second clone or another venv has it."""
    for package in ("neuron_backend", "rules"):  # rules/: the op policy the simulator reads
        shutil.copytree(REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "project").mkdir()
    (root / "project" / "user_script.py").write_text(SCRIPT)  # apart from the package: `check .` scans only it
    return root


def _env(install: Path, cache: Path) -> dict:
    return simulator_env(PYTHONPATH=str(install), NEURON_PORT_CACHE_DIR=str(cache), NEURON_PORT_SIMULATE="1")


def _start(argv: list[str], install: Path, cache: Path, log: Path) -> subprocess.Popen:
    # a session of its own: the cleanup kills the compilers a killed builder leaves running
    with open(log, "w") as stderr:
        return subprocess.Popen(argv, cwd=install / "project", env=_env(install, cache), stdout=subprocess.PIPE,
                                stderr=stderr, text=True, start_new_session=True)


def _holders_of(lock: Path) -> set[int]:
    """The processes that have the lock file open: the holder and its waiters."""
    pids = set()
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) == str(lock) for fd in fd_dir.iterdir()):
                pids.add(int(fd_dir.parent.name))
        except OSError:
            continue
    return pids


def _lock_pid(lock: Path):
    """The pid the lock file names (None while it is empty or being written)."""
    try:
        return json.loads(lock.read_text())["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _wait_for(what: str, condition, timeout: float, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _result(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT:")]
    assert lines, stdout
    return json.loads(lines[-1][len("RESULT:"):])


@pytest.fixture(scope="module")
def race(tmp_path_factory):
    """A fresh cache; a builder from install A, killed (SIGKILL) while it compiles; meanwhile a `check` from
    install B and a script from install A wait on its lock. Records when the lock changed hands."""
    base = tmp_path_factory.mktemp("installs")
    cache = base / "cache"
    a, b = _install(base / "clone-a"), _install(base / "elsewhere" / "clone-b")
    started: list[subprocess.Popen] = []
    try:
        builder = _start([sys.executable, "user_script.py"], a, cache, base / "builder.log")
        started.append(builder)
        folders = cache / "torch-extensions"
        folder = _wait_for("the build folder", lambda: next(folders.glob("*"), None) if folders.exists() else None, 120)
        lock = folder / "build.lock"
        staging = folder / f"building-{builder.pid}"
        _wait_for("the builder to start compiling", lambda: (staging / "build.ninja").exists(), COLD_BUILD_TIMEOUT_S)
        doctor_during = run_cli("doctor", env={"PYTHONPATH": str(a), "NEURON_PORT_CACHE_DIR": str(cache)})
        check = _start([sys.executable, "-m", "neuron_port", "check", ".", "--timeout", str(COLD_BUILD_TIMEOUT_S),
                        "--", sys.executable, "user_script.py"], b, cache, base / "check.log")
        script = _start([sys.executable, "user_script.py"], a, cache, base / "script.log")
        started += [check, script]
        # both waiting: the builder, the check's command and the script have the lock file open
        _wait_for("both waiters at the lock", lambda: len(_holders_of(lock) - {builder.pid}) >= 2, 300)
        os.kill(builder.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        builder.wait()
        new_holder = _wait_for("a waiter to take the lock over",
                               lambda: _lock_pid(lock) not in (None, builder.pid) and _lock_pid(lock), 120, every=0.1)
        took_over_after = time.monotonic() - killed_at
        os.killpg(builder.pid, signal.SIGKILL)  # the killed builder's compilers: they would only cost time here
        staging_seen, library = set(), None
        while check.poll() is None or script.poll() is None:
            staging_seen |= {p.name for p in folder.glob("building-*")}
            if library is None and (folder / "manifest.json").exists():
                library = (folder / "neuron_port_sim.so").stat().st_ino
            assert time.monotonic() - killed_at < COLD_BUILD_TIMEOUT_S, "the waiters did not finish"
            time.sleep(0.2)
        outputs = {name: (proc.returncode, proc.stdout.read(), (base / f"{name}.log").read_text())
                   for name, proc in (("check", check), ("script", script))}
        yield {"a": a, "b": b, "cache": cache, "folder": folder, "outputs": outputs, "new_holder": new_holder,
               "took_over_after": took_over_after, "staging_seen": staging_seen, "library_inode": library,
               "builder": builder.pid, "waiters": {check.pid, script.pid}, "doctor_during": doctor_during,
               "builder_log": (base / "builder.log").read_text()}
    finally:
        for proc in started:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            proc.stdout.close()


def test_a_waiter_takes_over_from_a_sigkilled_builder_within_seconds(race):
    assert race["took_over_after"] < 60, race["took_over_after"]
    assert race["new_holder"] != race["builder"]
    assert "being built now by pid" in race["doctor_during"].stdout, race["doctor_during"].stdout
    assert f"pid {race['builder']} " in race["doctor_during"].stdout


def test_two_installs_share_one_build_and_both_run(race):
    check_rc, check_out, check_err = race["outputs"]["check"]
    script_rc, script_out, script_err = race["outputs"]["script"]
    assert script_rc == 0, script_err[-3000:]
    assert _result(script_out) == {"file": str(race["a"] / "neuron_backend" / "__init__.py"), "value": [2.0, 2.0]}
    assert check_rc == 0, (check_out[-3000:], check_err[-3000:])
    assert "succeeded" in check_out, check_out[-3000:]
    for text in (check_out, check_err, script_err):
        assert "Traceback" not in text and "Failed to load" not in text, text[-3000:]
    # one folder for both installs, one build after the kill: one new staging folder, the library never replaced
    assert [p.name for p in (race["cache"] / "torch-extensions").iterdir()] == [race["folder"].name]
    assert race["staging_seen"] <= {f"building-{race['builder']}", f"building-{race['new_holder']}"}
    assert (race["folder"] / "neuron_port_sim.so").stat().st_ino == race["library_inode"]
    manifest = json.loads((race["folder"] / "manifest.json").read_text())
    assert manifest["pid"] == race["new_holder"], "the library is not the build of the waiter that took over"
    assert not list(race["folder"].glob("building-*")), "a staging folder was left behind"
    # the script waited from before the kill: it named the builder (pid, since when)
    assert f"waiting for the simulated neuron device's build by {sys.executable}, pid {race['builder']} on " in script_err
    # the build the builder started said how long a build takes
    assert "building the simulated neuron device for this install (first use; about" in race["builder_log"]


def test_a_third_process_loads_the_shared_build_without_building(race):
    proc = subprocess.run([sys.executable, "user_script.py"], cwd=race["b"] / "project",
                          env=_env(race["b"], race["cache"]), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _result(proc.stdout)["value"] == [2.0, 2.0]
    assert "building" not in proc.stderr and "waiting" not in proc.stderr, proc.stderr
    doctor = run_cli("doctor", env={"PYTHONPATH": str(race["b"]), "NEURON_PORT_CACHE_DIR": str(race["cache"])})
    assert f"simulator core: built for this install in {race['folder']}" in doctor.stdout, doctor.stdout


def test_a_damaged_library_is_rebuilt_not_loaded(race, tmp_path):
    """Bytes of the library changed in place (same size): the manifest's sha256 no longer matches, so the next
    process does not load it but rebuilds (stopped once its compiler runs: a whole second cold build would only
    repeat the race's)."""
    so = race["folder"] / "neuron_port_sim.so"
    data = bytearray(so.read_bytes())
    data[len(data) // 2: len(data) // 2 + 64] = b"\xff" * 64
    so.write_bytes(bytes(data))
    log = tmp_path / "rebuild.log"
    proc = _start([sys.executable, "user_script.py"], race["a"], race["cache"], log)
    try:
        _wait_for("the rebuild's compiler", lambda: (race["folder"] / f"building-{proc.pid}" / "build.ninja").exists()
                  or proc.poll() is not None, 300)
        assert proc.poll() is None, (proc.stdout.read(), log.read_text())
        assert "rebuilding the simulated neuron device" in log.read_text(), log.read_text()
        assert "the library does not match its manifest (damaged or replaced)" in log.read_text()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
