"""Every process a `check` run started, and how to end them all (Linux /proc, no cgroups needed).

The command runs in its own session, but its children can leave it (``setsid``, double forks) and
outlive their parents. So each run gets a marker: an environment variable whose *name* holds a random
token (``NEURON_PORT_RUN_<token>=1``; a name, not a value, so a nested `check` adds its own marker
instead of replacing ours), which every descendant inherits. A process belongs to the run when its
environment has the marker, when it is in the command's session or process group, or when one of its
ancestors belongs. Only a process that clears its environment *and* leaves the session *and* loses its
parent escapes; that needs cgroups to catch, which `check` does not require.

Ending the tree: SIGTERM (and SIGCONT, so a stopped process can act on it) to every member, a grace
period while members exit (new members found meanwhile get SIGTERM too), then SIGKILL until none is
left. Signals go through a pidfd opened after checking the process's start time, so a pid reused by an
unrelated process is never signalled.
"""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from dataclasses import dataclass
from typing import Iterator, Optional

MARKER_PREFIX = "NEURON_PORT_RUN_"
PROC = "/proc"
SCAN_INTERVAL = 0.05
KILL_ROUNDS = 100  # SIGKILL rounds: ends a tree that keeps forking while it is being killed


def new_marker() -> str:
    """The environment variable name that marks one run's processes."""
    return MARKER_PREFIX + secrets.token_hex(8).upper()


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    pgrp: int
    session: int
    state: str
    start: int  # clock ticks after boot: with the pid, names one process for its whole life


def read_stat(pid: int) -> Optional[ProcInfo]:
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: the fields after it follow the last ")"
    fields = data[data.rfind(b")") + 2:].split()
    try:
        return ProcInfo(pid=pid, ppid=int(fields[1]), pgrp=int(fields[2]), session=int(fields[3]),
                        state=fields[0].decode(), start=int(fields[19]))
    except (IndexError, ValueError):
        return None


def _all_processes() -> Iterator[ProcInfo]:
    for name in os.listdir(PROC):
        if name.isdigit():
            info = read_stat(int(name))
            if info is not None:
                yield info


def _has_marker(pid: int, marker: bytes) -> bool:
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:  # gone, or another user's process (then it is not ours either)
        return False
    return (b"\0" + environ).find(b"\0" + marker + b"=") >= 0


class ProcessTree:
    """The processes of one run: those carrying ``marker``, those in the session or process group
    led by ``leader`` (the command, started with start_new_session), and their descendants."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.leader: Optional[int] = None
        self._me = os.getpid()

    def members(self) -> list[ProcInfo]:
        """The living members (zombies have exited: only their parent's wait is missing)."""
        processes = {p.pid: p for p in _all_processes() if p.state not in ("Z", "X") and p.pid != self._me}
        marker = self.marker.encode()
        leader = self.leader
        ours = {pid for pid, p in processes.items()
                if (leader is not None and leader in (p.session, p.pgrp, pid)) or _has_marker(pid, marker)}
        changed = True
        while changed:  # descendants of members (a child that cleared its environment)
            changed = False
            for pid, p in processes.items():
                if pid not in ours and p.ppid in ours:
                    ours.add(pid)
                    changed = True
        return [processes[pid] for pid in sorted(ours)]

    def end(self, grace: float, hurry: Optional[threading.Event] = None) -> int:
        """End every member: SIGTERM, up to ``grace`` seconds to exit (less if ``hurry`` is set), then
        SIGKILL. Returns how many processes were signalled."""
        termed: set[tuple[int, int]] = set()
        deadline = time.monotonic() + grace
        while True:
            members = self.members()
            if not members:
                return len(termed)
            for p in members:
                if (p.pid, p.start) not in termed:
                    termed.add((p.pid, p.start))
                    send_signal(p, signal.SIGTERM)
                    send_signal(p, signal.SIGCONT)
            if time.monotonic() >= deadline or (hurry is not None and hurry.is_set()):
                break
            time.sleep(SCAN_INTERVAL)
        for _ in range(KILL_ROUNDS):
            members = self.members()
            if not members:
                break
            for p in members:
                termed.add((p.pid, p.start))
                send_signal(p, signal.SIGKILL)
            time.sleep(SCAN_INTERVAL / 5)
        return len(termed)


def send_signal(process: ProcInfo, signum: int) -> None:
    """Signal ``process`` if that very process still lives (not a later one that got its pid)."""
    try:
        fd = os.pidfd_open(process.pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd (old kernel): a pid check right before the kill
        now = read_stat(process.pid)
        if now is not None and now.start == process.start:
            try:
                os.kill(process.pid, signum)
            except ProcessLookupError:
                pass
        return
    try:
        now = read_stat(process.pid)  # the pidfd pins the process: its pid cannot be reused meanwhile
        if now is not None and now.start == process.start:
            signal.pidfd_send_signal(fd, signum)
    except ProcessLookupError:
        pass
    finally:
        os.close(fd)
