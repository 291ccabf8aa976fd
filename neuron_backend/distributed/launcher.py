"""In torchrun's own process (the elastic agent): when and how each worker process ended.

A worker killed by a signal (SIGKILL by the OOM killer or a user, a segfault) writes no exception, and its
peers then fail on their next collective ("Connection reset by peer"); torchrun's own summary tells the
signals but dates the failures to the second in which it polled them. So in the agent's process (where the
simulator is not enabled: it runs no model) `check`'s runs watch each worker torchrun starts: a thread per
worker waits for its end without reaping it (``waitid(..., WEXITED | WNOWAIT)``: torchrun still reaps and
reports it as usual) and appends one JSON line to ``neuron-workers-pid<PID>.jsonl`` in the events folder
(neuron_backend/EVENTS.md "Worker ends"): the end's wall-clock time, the rank, the exit code or signal, and
whether torchrun had stopped it (``SubprocessHandler.close``, its SIGTERM after the first failure). `check`
then names the rank that ended first and how (NP909; neuron_port/check/events/workers.py reads the file).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

# elastic's handler module: patched on first use, when torchrun imports it
HANDLER_MODULE = "torch.distributed.elastic.multiprocessing.subprocess_handler.subprocess_handler"

EVENTS_DIR_ENV = "NEURON_PORT_EVENTS_DIR"
TOKEN_ENV = "NEURON_PORT_EVENTS_TOKEN"
FILE_PREFIX = "neuron-workers-pid"  # neuron-workers-pid<PID>.jsonl: one line per worker that ended

_lock = threading.Lock()
_stopped: dict[int, float] = {}  # pid -> when torchrun signalled it to stop
_installed = False


def install() -> None:
    """Watch the workers torchrun starts (called in torchrun's process only: neuron_backend._autoload; idempotent)."""
    global _installed
    if _installed or not hasattr(os, "waitid") or not os.environ.get(EVENTS_DIR_ENV):
        return
    _installed = True
    try:
        import importlib

        handler = importlib.import_module(HANDLER_MODULE).SubprocessHandler
    except Exception:  # noqa: BLE001 - another torch layout: torchrun's own report stands
        return
    popen, close = handler._popen, handler.close

    def _popen(self, args, env):
        proc = popen(self, args, env)
        rank = env.get("RANK") if isinstance(env, dict) else None
        threading.Thread(target=_watch, args=(proc, rank, getattr(self, "local_rank_id", None)),
                         name=f"neuron-port-worker-{proc.pid}", daemon=True).start()
        return proc

    def _close(self, death_sig=None):
        with _lock:
            _stopped.setdefault(self.proc.pid, time.time())
        return close(self, death_sig)

    handler._popen, handler.close = _popen, _close


def _watch(proc, rank, local_rank) -> None:
    """Wait for the worker's end (leaving it to torchrun to reap) and record it."""
    code = sig = None
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        ended = time.time()
        if info is not None:
            if info.si_code == os.CLD_EXITED:
                code = info.si_status
            else:  # CLD_KILLED, CLD_DUMPED
                sig = info.si_status
    except ChildProcessError:  # torchrun reaped it first: its return code says how
        ended = time.time()
        for _ in range(50):
            if proc.returncode is not None:
                break
            time.sleep(0.01)
        rc = proc.returncode
        if rc is not None:
            code, sig = (rc, None) if rc >= 0 else (None, -rc)
    except Exception:  # noqa: BLE001 - never disturb torchrun
        return
    with _lock:
        stopped_at = _stopped.get(proc.pid)
    _write({"pid": proc.pid, "rank": int(rank) if rank is not None and str(rank).isdigit() else None,
            "local_rank": local_rank, "ended": ended, "exit_code": code,
            "signal": _signal_name(sig) if sig is not None else None, "signal_number": sig,
            "stopped_by_launcher": stopped_at is not None and stopped_at <= ended})


def _write(record: dict) -> None:
    """One line, appended in one write (the file is this process's alone), with the run's token."""
    folder = os.environ.get(EVENTS_DIR_ENV)
    if not folder or not os.path.isdir(folder):
        return
    token = os.environ.get(TOKEN_ENV)
    line = json.dumps({"kind": "worker_exit", **({"token": token} if token else {}), **record}) + "\n"
    try:
        fd = os.open(os.path.join(folder, f"{FILE_PREFIX}{os.getpid()}.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                     0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
