"""SIGTERM while the main thread waits in native code: end as a process without the simulator would.

A Python signal handler runs only when the main thread is back in the interpreter. A rank blocked in a
native wait (``init_process_group``'s store rendezvous for a peer that already failed, a collective, a
long kernel) never gets there, so with ``hooks._sigterm`` installed it ignored torchrun's SIGTERM until
torchrun's grace ran out (30 s) and SIGKILLed it; the same process without the simulator (a real
TorchNeuron run has no handler) ends at once with -15.

So the C-level handler CPython installs also writes the signal number to a pipe
(``signal.set_wakeup_fd``), and a daemon thread reading it ends the process in the main thread's stead
when the Python handler has not started within ``GRACE_S``: it writes the snapshot (``status:
"sigterm"``, when the shared lock is free) and dies of SIGTERM with the default action (exit code -15).
It does nothing when a handler other than the simulator's is in place (the user's own: a real run would
wait for it too), or when someone else (asyncio) took the wakeup fd over.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading

GRACE_S = 0.5  # the main thread's own handler, when it is in the interpreter, runs within microseconds

_started = threading.Event()  # the Python handler began: it does the work
_fds: tuple[int, int] | None = None


def handler_started() -> None:
    _started.set()


def install(handler, end) -> None:
    """Watch SIGTERM for ``handler`` (the simulator's SIGTERM handler); ``end()`` writes the snapshot. Call
    from the main thread, after ``signal.signal(SIGTERM, handler)``."""
    global _fds
    if _fds is not None:
        return
    r, w = os.pipe()  # non-inheritable: a spawned child does not share it
    os.set_blocking(w, False)
    try:
        previous = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        os.close(r), os.close(w)
        return
    if previous != -1:  # someone else's: give it back, keep today's behaviour
        signal.set_wakeup_fd(previous)
        os.close(r), os.close(w)
        return
    _fds = (r, w)
    threading.Thread(target=_watch, args=(r, w, handler, end), name="neuron-sigterm", daemon=True).start()
    os.register_at_fork(after_in_child=_forked)


def _forked() -> None:
    # the child would write its signals into the parent's pipe, and its watcher thread is gone
    global _fds
    if _fds is not None:
        try:
            signal.set_wakeup_fd(-1)  # the forking thread is the child's main thread
        except (ValueError, OSError):
            pass
        _fds = None


def _watch(r: int, w: int, handler, end) -> None:
    while True:
        try:
            data = os.read(r, 64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGTERM not in data or _fds != (r, w):
            continue
        if _started.wait(GRACE_S):
            continue  # the main thread is handling it
        if signal.getsignal(signal.SIGTERM) is not handler:
            continue
        end()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.signal(signal.SIGTERM, ctypes.c_void_p(0))  # SIG_DFL; Python allows signal.signal in the main thread only
        os.kill(os.getpid(), signal.SIGTERM)
