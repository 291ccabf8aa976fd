"""`check` stopped by SIGINT / SIGTERM, by --timeout, or finishing while the command left processes
behind: through the real CLI in a child process, with a command whose tree holds a grandchild in its
own group, one in a new session (setsid) and one that ignores SIGTERM. Afterwards: the shell's exit code,
a schema-valid report, no process of the tree alive, and an empty TMPDIR."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import jsonschema
import pytest

from conftest import simulator_env

pytestmark = pytest.mark.slow

# Each process of the tree carries TAG in its command line, so the test finds them without the tool's
# own marker; it records its pid in ``pids`` once started.
TRAIN = textwrap.dedent("""\
    import os, signal, subprocess, sys, time
    import torch

    tag = sys.argv[1]
    x = torch.ones(4, device="neuron")
    (x * 2).sum().item()
    child = "import os, signal, sys, time; {setup}; open('pids', 'a').write(f'{{os.getpid()}}\\\\n'); time.sleep(300)"
    for setup in ("os.setsid()", "signal.signal(signal.SIGTERM, signal.SIG_IGN)", "pass"):
        subprocess.Popen([sys.executable, "-c", child.format(setup=setup), tag])
    open("pids", "a").write(f"{os.getpid()}\\n")
    time.sleep(float(sys.argv[2]))
""")


def make_project(root: Path) -> Path:
    project = root / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    (project / "data.txt").write_text("data\n")
    return project


def start_check(tmp_path: Path, project: Path, *args: str, sleep: float = 300) -> tuple[subprocess.Popen, str, Path]:
    tag = f"np-test-{uuid.uuid4().hex}"
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    report = tmp_path / "report.json"
    env = simulator_env(TMPDIR=str(tmpdir), NEURON_PORT_KILL_GRACE="1")
    proc = subprocess.Popen([sys.executable, "-m", "neuron_port", "check", str(project), "-q", "-o", str(report),
                             *args, "--", "python", "train.py", tag, str(sleep)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, tag, report


def tagged_processes(tag: str) -> list[int]:
    """Living processes (not zombies) whose command line holds ``tag`` (`check` itself too, while it runs)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if tag.encode() in cmdline and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def finish(proc: subprocess.Popen, tag: str) -> tuple[int, str]:
    try:
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(0.3)  # a signalled process needs a moment to go
    survivors = tagged_processes(tag)
    for pid in survivors:  # do not leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert not survivors, f"processes of the command outlived check: {survivors}"
    return proc.returncode, stderr


@pytest.mark.parametrize("iteration", range(6))
def test_sigint_and_sigterm_at_random_moments_end_the_tree_and_write_the_report(
        tmp_path, report_schema, sim_build, iteration):
    rng = random.Random(iteration * 7919 + os.getpid())
    signum = signal.SIGINT if iteration % 2 == 0 else signal.SIGTERM
    preview = iteration % 3 == 2
    project = make_project(tmp_path)
    proc, tag, report = start_check(tmp_path, project, *(["--preview"] if preview else []))
    # once the command is running (check is past its start-up): any moment from its first second, while
    # it imports torch, runs ops and starts its children, to well after
    wait_for(lambda: set(tagged_processes(tag)) - {proc.pid} or proc.poll() is not None, 120,
             "the command to start")
    time.sleep(rng.uniform(0, 4))
    proc.send_signal(signum)
    code, stderr = finish(proc, tag)

    assert code == 128 + signum, stderr
    doc = json.loads(report.read_text())
    jsonschema.validate(doc, report_schema)
    status = doc["runtime"]["status"]
    assert status["interrupted"] == signum.name
    (np909,) = [f for f in doc["findings"] if f["code"] == "NP909"]
    assert f"check was interrupted ({signum.name})" in np909["message"]  # not "killed by" the child's signal
    assert not list((tmp_path / "tmpdir").iterdir()), "check left temporary files"
    assert (project / "data.txt").read_text() == "data\n"


def test_a_second_signal_ends_the_grace_period_at_once(tmp_path, report_schema, sim_build):
    project = make_project(tmp_path)
    proc, tag, report = start_check(tmp_path, project)
    wait_for(lambda: (project / "pids").exists() and len((project / "pids").read_text().split()) == 4, 120,
             "the command and its three children")
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    code, stderr = finish(proc, tag)
    assert code == 143, stderr  # the first signal decides
    jsonschema.validate(json.loads(report.read_text()), report_schema)


def test_timeout_kills_a_grandchild_that_ignores_sigterm_after_the_command_died(tmp_path, report_schema, sim_build):
    project = make_project(tmp_path)
    # long enough for the command to start its whole tree (torch's import and the device's first op took over
    # 4 s with the other test worker busy on the 2-core CI machine), short enough to end it long before its sleep
    proc, tag, report = start_check(tmp_path, project, "--timeout", "12")
    code, stderr = finish(proc, tag)
    assert code == 1, stderr
    doc = json.loads(report.read_text())
    jsonschema.validate(doc, report_schema)
    assert doc["runtime"]["status"]["timed_out"] is True
    assert "interrupted" not in doc["runtime"]["status"]
    assert len((project / "pids").read_text().split()) == 4  # all of them ran, and none is left
    assert not list((tmp_path / "tmpdir").iterdir())


def test_processes_left_behind_by_a_command_that_succeeded_are_ended(tmp_path, report_schema, sim_build):
    project = make_project(tmp_path)
    proc, tag, report = start_check(tmp_path, project, sleep=0)
    code, stderr = finish(proc, tag)
    doc = json.loads(report.read_text())
    jsonschema.validate(doc, report_schema)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    assert code == 0, stderr
    assert not list((tmp_path / "tmpdir").iterdir())


def test_interrupted_while_the_preview_copy_is_made(tmp_path, report_schema):
    project = make_project(tmp_path)
    for i in range(4000):  # a copy that takes a while
        (project / f"file{i}.txt").write_text("x")
    proc, tag, report = start_check(tmp_path, project, "--preview")
    tmpdir = tmp_path / "tmpdir"
    wait_for(lambda: any(tmpdir.glob("neuron-port-check-*/tree")) or proc.poll() is not None, 120,
             "the preview copy to start")
    proc.send_signal(signal.SIGINT)
    code, stderr = finish(proc, tag)
    assert code == 130, stderr
    doc = json.loads(report.read_text())
    jsonschema.validate(doc, report_schema)
    assert doc["runtime"]["status"]["interrupted"] == "SIGINT"
    assert doc["runtime"]["status"]["exit_code"] is None  # the command never started
    assert not (project / "pids").exists()
    assert not list(tmpdir.iterdir())
