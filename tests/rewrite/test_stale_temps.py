"""Temporary files that a killed `rewrite` leaves (issue 22, item 4): SIGKILL lands while files are being
written, so nothing can clean up; the next writing run in the tree removes every temporary file whose
writer is gone, and never one that a running process is writing (its name carries the writer's pid, start
time and host: neuron_port/atomic.py). Through the real CLI."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from neuron_port.atomic import TEMP_SUFFIX, owner_token, temp_prefix

CUDA = "import torch\ntorch.cuda.synchronize()\n"
BIG = "X = '" + "x" * 1_500_000 + "'\n"  # cheap to parse, slow to write (and fsync): a long write phase


def make_tree(root: Path, count: int) -> dict[Path, str]:
    files = {}
    for i in range(count):
        folder = root / ("pkg" if i % 2 else "") / ("deep" if i % 3 == 0 else "")
        folder.mkdir(parents=True, exist_ok=True)
        files[folder / f"m{i:02d}.py"] = CUDA + BIG
    for path, text in files.items():
        path.write_text(text)
    return files


def start(root: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "NEURON_PORT_SIMULATE"}
    return subprocess.Popen([sys.executable, "-m", "neuron_port", "rewrite", "--no-cache", "-j", "2", "."], cwd=root,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def temp_files(root: Path) -> list[Path]:
    return sorted(root.rglob(f"*{TEMP_SUFFIX}"))


def old_or_new(files: dict[Path, str]) -> int:
    """Every file is its original text or its complete rewrite; returns how many were rewritten."""
    rewritten = 0
    for path, old in files.items():
        now = path.read_text()
        assert now in (old, old.replace("torch.cuda.synchronize", "torch.neuron.synchronize")), path
        rewritten += now != old
    return rewritten


def kill_while_writing(root: Path, rng: random.Random) -> bool:
    """Start a rewrite, wait for its first temporary file (the write phase), SIGKILL it a random moment
    later; whether the run was killed before it ended."""
    folders = [root, root / "pkg", root / "deep", root / "pkg" / "deep"]
    proc = start(root)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if any(entry.name.endswith(TEMP_SUFFIX) for folder in folders for entry in os.scandir(folder)):
            time.sleep(rng.uniform(0, 0.03))
            break
    killed = proc.poll() is None
    if killed:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    return killed


def test_a_run_after_sigkills_in_the_write_phase_removes_their_temp_files(tmp_path):
    rng = random.Random(22)
    left_behind = 0
    for _round in range(6):
        files = make_tree(tmp_path, 12)
        assert kill_while_writing(tmp_path, rng)
        old_or_new(files)
        left_behind += len(temp_files(tmp_path))
    assert left_behind, "no kill landed in a write: the test did not test anything"
    files = {p: CUDA + BIG for p in files}
    again = start(tmp_path)  # right away: a dead writer's file is removed whatever its age
    _out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert temp_files(tmp_path) == []
    assert old_or_new(files) == len(files)


def test_a_temp_file_a_live_process_writes_is_kept(tmp_path):
    """A temporary file named for a running process (a concurrent run) stays, however old; one named for
    a process that has exited, or for a pid now used by another process (a start time that does not
    match), is removed; so is an old one whose writer cannot be judged (no owner in the name)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(CUDA)
    (tmp_path / "model.py").write_text("import torch\n")  # nothing to rewrite beside these
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        live_token, dead_token = owner_token(live.pid), owner_token(dead.pid)
        dead.wait()
        pid, start_time, host = live_token.split("-")
        reused_token = f"{pid}-{int(start_time) + 1}-{host}"  # the live pid, another process's start time
        prefix = temp_prefix("model.py")
        kept = tmp_path / f"{prefix}abcd1234.{live_token}{TEMP_SUFFIX}"
        gone = [tmp_path / "pkg" / f"{temp_prefix('train.py')}efgh5678.{dead_token}{TEMP_SUFFIX}",
                tmp_path / f"{prefix}ijkl9012.{reused_token}{TEMP_SUFFIX}",
                tmp_path / f"{prefix}mnop3456{TEMP_SUFFIX}"]
        for path in (kept, *gone):
            path.write_text("half a file")
            os.utime(path, (time.time() - 3600, time.time() - 3600))
        young = tmp_path / f"{prefix}qrst7890{TEMP_SUFFIX}"  # no owner, young: could be a writer's elsewhere
        young.write_text("being written")

        checked = start_check(tmp_path)
        assert checked.returncode == 1, checked.stderr
        assert set(temp_files(tmp_path)) == {kept, young, *gone}  # --check writes (and removes) nothing

        run = start(tmp_path)
        _out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        assert set(temp_files(tmp_path)) == {kept, young}
        assert (tmp_path / "pkg" / "train.py").read_text() == CUDA.replace("cuda", "neuron")
    finally:
        live.kill()
        live.wait()


def start_check(root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NEURON_PORT_SIMULATE"}
    return subprocess.run([sys.executable, "-m", "neuron_port", "rewrite", "--check", "."], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
