"""Runs the user's command in a child process with the simulated neuron device switched on.

The child gets NEURON_PORT_SIMULATE=1 and an events folder (created here before the command starts; the
caller removes it); its stdout and stderr go to files, which a follower thread passes on as they grow
(``on_output``: the program's output shows live, as it would without `check`), and whose last lines
land in the report. Under torchrun each rank's output is also kept apart (torchrun's own ``--log-dir``
with ``--tee``), so a failing rank's traceback can be shown. However the run ends (exit, timeout,
SIGINT or SIGTERM to `check`), every process the command started, in its session or not, is ended
(process_tree.py: SIGTERM, which the simulator answers by flushing its events, a grace period, then
SIGKILL), and the caller gets a RunStatus and the events written so far; should `check` itself be
SIGKILLed, its watcher (watcher.py) ends them.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from neuron_port.check.events import run_environment
from neuron_port.check.interrupts import Interrupted, InterruptGuard, signal_name
from neuron_port.check.process_tree import ProcessTree, new_marker
from neuron_port.check.scratch import OUTPUT_PREFIX, scratch_folder
from neuron_port.check.watcher import Watcher

STDERR_TAIL_LINES = 50
TERM_GRACE_SECONDS = 10.0  # after SIGTERM, before SIGKILL; NEURON_PORT_KILL_GRACE overrides it
from neuron_port.check import DEFAULT_TIMEOUT_SECONDS  # noqa: F401 (re-exported)


class CommandError(Exception):
    """The command cannot be started (usage error)."""


@dataclass
class RankLog:
    """What one torchrun worker printed (its last lines)."""

    rank: int
    stdout_tail: list[str] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"rank": self.rank, "stdout_tail": self.stdout_tail, "stderr_tail": self.stderr_tail}


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
    ranks: list[RankLog] = field(default_factory=list)  # torchrun runs: each worker's own output
    interrupted: Optional[str] = None  # "SIGINT" / "SIGTERM": `check` itself was stopped, and the command
    events_token: Optional[str] = None  # this run's token in its records (not in the report): see EVENTS.md
    worker_exits: list = field(default_factory=list)  # torchrun's workers' ends (events/workers.py; not in the report)

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None and self.interrupted is None

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
            **({"ranks": [r.to_json() for r in self.ranks]} if self.ranks else {}),
            **({"interrupted": self.interrupted} if self.interrupted else {}),
        }


# on_output(stream, text): the child's output as it is written; stream is "stdout" or "stderr"
OutputSink = Callable[[str, str], None]

PYTHON_NAMES = {"python", "python3", f"python{sys.version_info.major}.{sys.version_info.minor}"}


TORCHRUN = ("-m", "torch.distributed.run")
# torchrun options that decide where workers' output goes: when the user sets any, theirs win
TORCHRUN_LOG_OPTIONS = ("--log-dir", "--log_dir", "--redirects", "-r", "--tee", "-t")


def build_command(command: Sequence[str], nproc: Optional[int], cwd: Optional[Path] = None,
                  rank_logs: Optional[Path] = None, notes: Optional[list[str]] = None) -> list[str]:
    """The argv to run. ``python`` means the interpreter neuron-port runs in (the one that has torch
    and the simulator); with ``nproc`` the command runs under torchrun, with the interpreter the command
    names when neuron-port is installed there (a project's own ``.venv/bin/python``), else with neuron-port's
    own (one line in ``notes`` says so). A relative program path is looked up from ``cwd``, the folder the
    command runs in. ``rank_logs``: under torchrun, each worker's stdout and stderr are also written below
    this folder (and still printed)."""
    if not command:
        raise CommandError("no command to run")
    argv = list(command)
    if argv[0] in PYTHON_NAMES:
        argv[0] = sys.executable
    elif argv[0] == "torchrun":
        argv = [sys.executable, "-m", "torch.distributed.run", *argv[1:]]
    if nproc:
        if argv[1:3] == ["-m", "torch.distributed.run"]:
            raise CommandError("--nproc cannot be combined with a command that is already torchrun")
        if argv[0] != sys.executable and INTERPRETER.fullmatch(os.path.basename(argv[0])) and len(argv) >= 2:
            argv[0] = nproc_interpreter(argv[0], cwd or Path.cwd(), notes)
        elif argv[0] != sys.executable or len(argv) < 2:
            raise CommandError("--nproc needs a Python command (python script.py ... or python -m module ...)")
        interpreter, rest = argv[0], argv[1:]
        argv = [interpreter, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *rest]
    else:
        check_program(argv[0], cwd or Path.cwd())
    # torchrun's options come first; a log option anywhere (even the script's own) leaves the user's setup alone
    if rank_logs is not None and tuple(argv[1:3]) == TORCHRUN and not any(
            a.split("=")[0] in TORCHRUN_LOG_OPTIONS for a in argv[3:]):
        argv[3:3] = ["--log-dir", str(rank_logs), "--tee", "3"]
    return argv


INTERPRETER = re.compile(r"python(?:\d+(?:\.\d+)*)?")  # a command's program that is a Python interpreter
# exits 0 where neuron-port's simulator (neuron_backend) and torch can be imported, without importing them
HAS_NEURON_PORT = ("import importlib.util as u, sys; "
                   "sys.exit(0 if u.find_spec('neuron_backend') and u.find_spec('torch') else 3)")


def nproc_interpreter(program: str, cwd: Path, notes: Optional[list[str]]) -> str:
    """The interpreter of an ``--nproc`` run whose command names one (``.venv/bin/python train.py``): that one
    when neuron-port is installed there (its ranks then load the simulator), else the one neuron-port runs in,
    with one line in ``notes`` that says so."""
    check_program(program, cwd)
    found = program if os.sep not in program else str(cwd.joinpath(program))
    try:
        has = subprocess.run([found, "-c", HAS_NEURON_PORT], cwd=cwd, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        has = False
    if has:
        return found
    if notes is not None:
        notes.append(f"--nproc: {program} has no neuron-port (neuron_backend and torch are not both importable "
                     f"there), so the ranks run with neuron-port's own interpreter, {sys.executable}; install "
                     "neuron-port[sim] into the project's environment to use its interpreter")
    return sys.executable


def check_program(program: str, cwd: Path) -> None:
    """A clear CommandError for a program that cannot run: missing, a folder, not executable."""
    if os.sep not in program:
        if shutil.which(program) is None:
            if cwd.joinpath(program).exists():  # as a shell would: a bare name is looked up in PATH only
                raise CommandError(f"command not found: {program} (to run the file in {cwd}, write ./{program})")
            raise CommandError(f"command not found: {program}")
        return
    where = cwd.joinpath(program)
    if not where.exists():
        raise CommandError(f"command not found: {program} (no such file: {where})")
    if where.is_dir():
        raise CommandError(f"cannot run {program}: {where} is a folder, not a program")
    if not os.access(where, os.X_OK):
        raise CommandError(f"cannot run {program}: {where} is not executable "
                           f"(chmod +x {program}, or name its interpreter: bash {program} / python {program})")


def read_rank_logs(folder: Path, lines: int = STDERR_TAIL_LINES) -> list[RankLog]:
    """The last lines of each worker's output under torchrun's ``--log-dir`` (newest attempt per rank)."""
    newest: dict[int, Path] = {}
    for stderr in sorted(folder.glob("*/attempt_*/*/stderr.log")):
        rank_dir = stderr.parent
        if rank_dir.name.isdigit():
            newest[int(rank_dir.name)] = rank_dir  # attempts sort in order: the last one wins
    return [RankLog(rank, _tail(d / "stdout.log", 20), _tail(d / "stderr.log", lines))
            for rank, d in sorted(newest.items())]


def kill_grace() -> float:
    """Seconds between SIGTERM and SIGKILL when the command's processes are ended."""
    value = os.environ.get("NEURON_PORT_KILL_GRACE")
    if value is None:
        return TERM_GRACE_SECONDS
    try:
        grace = float(value)
    except ValueError:
        raise CommandError(f"NEURON_PORT_KILL_GRACE={value!r}: not a number of seconds") from None
    if not grace >= 0:
        raise CommandError(f"NEURON_PORT_KILL_GRACE={value!r}: must be 0 or more seconds")
    return grace


def early_import_path() -> Optional[str]:
    """The folder whose ``torch_neuronx`` lets a program import it before torch (found without importing
    neuron_backend, which the static half does not load)."""
    import importlib.util

    spec = importlib.util.find_spec("neuron_backend")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "identity" / "early"
    return str(folder) if (folder / "torch_neuronx" / "__init__.py").is_file() else None


def run_command(
    argv: list[str],
    cwd: Path,
    events_dir: Path,
    timeout: float,
    extra_env: Optional[dict[str, str]] = None,
    on_tick: Optional[Callable[[float], None]] = None,
    while_running: Optional[Callable[[], None]] = None,
    on_output: Optional[OutputSink] = None,
    rank_logs: Optional[Path] = None,
    guard: Optional[InterruptGuard] = None,
) -> RunStatus:
    """Run ``argv``; ``while_running`` is called once right after the child started (the parent's own
    work, e.g. the static scan, then overlaps with the child's start-up instead of adding to it).
    ``on_output(stream, text)`` gets the child's output as it is written ("stdout" or "stderr").
    ``rank_logs``: the folder given to torchrun's ``--log-dir`` (see build_command). ``guard``: the
    signals `check` got (then ``status.interrupted`` is set and the command's processes are ended).
    Raises CommandError when the command cannot be started."""
    guard = guard or InterruptGuard()  # not entered: only a record nobody writes to
    grace = kill_grace()
    status = RunStatus(command=argv)
    tree = ProcessTree(new_marker())
    env = dict(os.environ)
    events_env, status.events_token = run_environment(events_dir)
    env.update({"NEURON_PORT_SIMULATE": "1", "PYTHONUNBUFFERED": "1", tree.marker: "1", **events_env})
    early = early_import_path()
    if early:  # `import torch_neuronx` before `import torch` (neuron_backend/identity/early/)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), early) if p)
    if extra_env:
        env.update(extra_env)
    events_dir.mkdir(parents=True, exist_ok=True)  # before the command starts; the caller removes it
    out_dir: Optional[Path] = None
    follower: Optional[_OutputFollower] = None
    proc: Optional[subprocess.Popen] = None
    start = time.monotonic()
    watcher = Watcher(tree.marker)  # ends the tree should `check` be SIGKILLed (watcher.py)
    try:
        out_dir = scratch_folder(OUTPUT_PREFIX)
        stdout_path, stderr_path = out_dir / "stdout", out_dir / "stderr"
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            try:
                proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
            except OSError as exc:
                raise CommandError(f"cannot run {shlex.join(argv)}: {_start_failure(exc)}") from None
            tree.leader = proc.pid
            watcher.leader(proc.pid)
            deadline = start + timeout
            if on_output is not None:
                follower = _OutputFollower(stdout_path, stderr_path, on_output)
            try:
                if while_running is not None:
                    with guard.cuttable():
                        while_running()
                while guard.signum is None:
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
                        break
            except Interrupted:
                pass  # recorded in the guard
            # the command's processes, wherever they are: all of them on a timeout or an interrupt, the
            # ones left behind (daemons, a setsid grandchild) after a normal exit
            tree.end(grace, hurry=guard.hurry)
            proc.wait()
            status.interrupted = guard.interrupted
            status.duration = time.monotonic() - start
            code = proc.returncode
            status.exit_code = code
            if code is not None and code < 0:
                status.signal = signal_name(-code)
            # torchrun reports a child's signal as exit code 1 and says so in its log; shells use 128+n
        status.stderr_tail = _tail(stderr_path, STDERR_TAIL_LINES)
        status.stdout_tail = _tail(stdout_path, 20)
        if rank_logs is not None and rank_logs.is_dir():
            status.ranks = read_rank_logs(rank_logs)
    finally:
        if proc is None or proc.returncode is None:  # an error of our own: still leave nothing running
            tree.end(grace, hurry=guard.hurry)
            if proc is not None:
                proc.wait()
        if follower is not None:  # the rest of the output, before the files go
            follower.finish()
        if out_dir is not None:
            shutil.rmtree(out_dir, ignore_errors=True)
        watcher.close()
    return status


def _start_failure(exc: OSError) -> str:
    if exc.errno == errno.ENOEXEC:
        return "not a program the system can start (a script needs a #! line, or name its interpreter)"
    if exc.errno == errno.EACCES:
        return "permission denied (not executable, or a folder)"
    return exc.strerror or str(exc)


class _OutputFollower:
    """Passes on what the child writes to its output files, as it grows (like ``tail -f``): the child
    writes to plain files, so nothing it does (a grandchild keeping the stream open, a full pipe) can
    block it or the parent."""

    POLL_SECONDS = 0.1

    def __init__(self, stdout: Path, stderr: Path, sink: OutputSink) -> None:
        self._files = [("stdout", stdout), ("stderr", stderr)]
        self._offsets = [0, 0]
        self._decoders = [codecs.getincrementaldecoder("utf-8")("replace") for _ in self._files]
        self._sink = sink
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="neuron-port-output", daemon=True)
        self._thread.start()

    def _pass_on(self) -> None:
        for i, (name, path) in enumerate(self._files):
            try:
                with open(path, "rb") as handle:
                    handle.seek(self._offsets[i])
                    data = handle.read()
            except OSError:
                continue
            if data:
                self._offsets[i] += len(data)
                text = self._decoders[i].decode(data)
                if text:
                    self._sink(name, text)

    def _run(self) -> None:
        while not self._stop.wait(self.POLL_SECONDS):
            self._pass_on()

    def finish(self) -> None:
        """Stop following and pass on the rest."""
        self._stop.set()
        self._thread.join()
        self._pass_on()


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
