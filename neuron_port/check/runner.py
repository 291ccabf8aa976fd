"""Runs the user's command in a child process with the simulated neuron device switched on.

The child gets NEURON_PORT_SIMULATE=1 and an events folder; its stdout and stderr go to files (the
last lines of stderr land in the report). A timeout sends SIGTERM to the whole process group (the
simulator flushes its events on SIGTERM), then SIGKILL after a grace period. Whatever happens to the
child (exit code, signal, timeout, OOM kill), the caller gets a RunStatus and the events written so far.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

STDERR_TAIL_LINES = 50
TERM_GRACE_SECONDS = 10.0
DEFAULT_TIMEOUT_SECONDS = 1800


class CommandError(Exception):
    """The command cannot be started (usage error)."""


@dataclass
class RunStatus:
    command: list[str]
    exit_code: Optional[int] = None
    signal: Optional[str] = None
    timed_out: bool = False
    duration: float = 0.0
    processes: int = 0
    stderr_tail: list[str] = field(default_factory=list)
    stdout_tail: list[str] = field(default_factory=list)
    error: Optional[str] = None  # could not start

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None

    def to_json(self) -> dict:
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "timed_out": self.timed_out,
            "duration": round(self.duration, 3),
            "processes": self.processes,
            "stderr_tail": self.stderr_tail,
            "stdout_tail": self.stdout_tail,
            **({"error": self.error} if self.error else {}),
        }


PYTHON_NAMES = {"python", "python3", f"python{sys.version_info.major}.{sys.version_info.minor}"}


def build_command(command: Sequence[str], nproc: Optional[int], cwd: Optional[Path] = None) -> list[str]:
    """The argv to run. ``python`` means the interpreter neuron-port runs in (the one that has torch
    and the simulator); with ``nproc`` the command runs under torchrun. A relative program path is
    looked up from ``cwd``, the folder the command runs in."""
    if not command:
        raise CommandError("no command to run")
    argv = list(command)
    if argv[0] in PYTHON_NAMES:
        argv[0] = sys.executable
    elif argv[0] == "torchrun":
        argv = [sys.executable, "-m", "torch.distributed.run", *argv[1:]]
    if nproc:
        if argv[:3] == [sys.executable, "-m", "torch.distributed.run"]:
            raise CommandError("--nproc cannot be combined with a command that is already torchrun")
        if argv[0] != sys.executable or len(argv) < 2:
            raise CommandError("--nproc needs a Python command (python script.py ... or python -m module ...)")
        rest = argv[1:]
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *rest]
    elif shutil.which(argv[0]) is None and not (cwd or Path.cwd()).joinpath(argv[0]).exists():
        raise CommandError(f"command not found: {argv[0]}")
    return argv


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def run_command(
    argv: list[str],
    cwd: Path,
    events_dir: Path,
    timeout: float,
    extra_env: Optional[dict[str, str]] = None,
    on_tick: Optional[Callable[[float], None]] = None,
    while_running: Optional[Callable[[], None]] = None,
) -> RunStatus:
    """Run ``argv``; ``while_running`` is called once right after the child started (the parent's own
    work, e.g. the static scan, then overlaps with the child's start-up instead of adding to it)."""
    status = RunStatus(command=argv)
    env = dict(os.environ)
    env.update(
        NEURON_PORT_SIMULATE="1",
        NEURON_PORT_EVENTS_DIR=str(events_dir),
        PYTHONUNBUFFERED="1",
    )
    if extra_env:
        env.update(extra_env)
    out_dir = Path(tempfile.mkdtemp(prefix="neuron-port-output-"))
    stdout_path, stderr_path = out_dir / "stdout", out_dir / "stderr"
    start = time.monotonic()
    try:
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            try:
                proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
            except OSError as exc:
                status.error = f"cannot start {shlex.join(argv)}: {exc.strerror or exc}"
                return status
            deadline = start + timeout
            if while_running is not None:
                try:
                    while_running()
                except BaseException:
                    _terminate_group(proc)
                    raise
            while True:
                try:
                    proc.wait(timeout=0.25)
                    break
                except subprocess.TimeoutExpired:
                    pass
                now = time.monotonic()
                if on_tick:
                    on_tick(now - start)
                if now >= deadline:
                    status.timed_out = True
                    _terminate_group(proc)
                    break
            status.duration = time.monotonic() - start
            code = proc.returncode
            if code is not None and code < 0:
                status.signal = _signal_name(-code)
                status.exit_code = code
            else:
                status.exit_code = code
                # torchrun reports a child's signal as exit code 1 and says so in its log; shells use 128+n
        status.stderr_tail = _tail(stderr_path, STDERR_TAIL_LINES)
        status.stdout_tail = _tail(stdout_path, 20)
    finally:
        status.processes = len(list(events_dir.glob("*.jsonl"))) if events_dir.exists() else 0
        shutil.rmtree(out_dir, ignore_errors=True)
    return status


def _terminate_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=TERM_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _tail(path: Path, lines: int) -> list[str]:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 256 * 1024))
            data = handle.read()
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace")
    return list(deque(text.splitlines(), maxlen=lines))
