"""SIGINT and SIGTERM held back while a step must not be cut in half: a file's write and rename (writer.py),
a worker's fork and the pool's record of it (pool.py). They are delivered, and act, when the block ends."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM in the main thread until the block ends (elsewhere, or where the platform
    cannot block signals, nothing changes)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, set(HELD))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def release_held() -> None:
    """In a process forked inside ``signals_held``: it inherited the blocked signals; let them act again."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(HELD))
