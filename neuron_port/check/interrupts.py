"""SIGINT and SIGTERM while `check` runs: the command's processes are ended, the report of what ran
is still built, and temporary folders are still removed.

While the guard is active the two signals are recorded instead of being fatal; the runner looks at
the record between polls of the command, and the sections that may be cut short at any point (the
static scan, the preview copy: plain Python work that cleans up after itself) run under
``cuttable()``, where the first signal raises ``Interrupted``. Nowhere else is an exception thrown in
at a random point, so a temporary folder is never created without being recorded for clean-up. A
second signal sets ``hurry``: the grace period before SIGKILL ends at once.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator, Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def shell_exit_code(name: str) -> int:
    """What a shell reports for a program ended by the signal ``name``: 128 + its number (130, 143)."""
    return 128 + signal.Signals[name].value


class Interrupted(KeyboardInterrupt):
    """`check` got SIGINT or SIGTERM while a cuttable section ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


class InterruptGuard:
    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self.hurry = threading.Event()
        self._cuttable = False
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "InterruptGuard":
        # handlers can only be set from the main thread; elsewhere (the API called from a thread) Ctrl-C
        # stays a KeyboardInterrupt, which the runner also answers by ending the command's processes
        if threading.current_thread() is threading.main_thread():
            for number in SIGNALS:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _handle(self, signum: int, frame: object) -> None:
        if self.signum is not None:
            self.hurry.set()
            return
        self.signum = signum
        if self._cuttable:
            raise Interrupted(signum)

    @property
    def interrupted(self) -> Optional[str]:
        return signal_name(self.signum) if self.signum is not None else None

    def raise_if_interrupted(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum)

    @contextmanager
    def cuttable(self) -> Iterator[None]:
        """A section the first signal may end at any point (with ``Interrupted``)."""
        self.raise_if_interrupted()
        self._cuttable = True
        try:
            yield
        finally:
            self._cuttable = False
