"""The build folder's lock: one builder at a time, and a dead builder's lock freed at once.

The lock is ``flock`` on a file in the build folder (``msvcrt.locking`` on Windows): the kernel releases it
when its holder dies however it dies (SIGKILL, OOM, a timeout), so a waiter, polling every second, takes over
within about a second. The file also names its holder (pid, the process's start time, host, since when), for
the waiters' messages and `neuron-port doctor`; the lock itself never depends on it, so a reused pid or a
stale record cannot keep anyone waiting.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

POLL_S = 1.0
_WINDOWS_LOCK_OFFSET = 1 << 30  # a byte far past the record: a locked range cannot be read on Windows


def process_start(pid: int) -> Optional[str]:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22): with the pid, it names
    one process even after the pid is reused. None where /proc is not there or the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # field 2 (the command name) may hold spaces and parentheses: count from the last ')'
    return stat.rsplit(")", 1)[1].split()[19]


@dataclass(frozen=True)
class Holder:
    pid: int
    start: Optional[str]
    host: str
    since: float
    python: str

    @classmethod
    def me(cls) -> "Holder":
        return cls(os.getpid(), process_start(os.getpid()), socket.gethostname(), time.time(), sys.executable)

    def alive(self) -> Optional[bool]:
        """Whether the holder still runs (None: on another host, so this one cannot tell)."""
        if self.host != socket.gethostname():
            return None
        if self.start is not None and Path("/proc/self/stat").exists():
            return process_start(self.pid) == self.start  # None when gone; another start time: a reused pid
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass  # it exists, owned by someone else
        return True

    def describe(self) -> str:
        ago = max(0, int(time.time() - self.since))
        since = time.strftime("%H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid} on {self.host}, since {since} ({ago} s ago)"


def read_holder(path: Path) -> Optional[Holder]:
    """The holder the lock file names (its last holder when the lock is free), or None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "null")
        return Holder(int(data["pid"]), data.get("start"), str(data["host"]), float(data["since"]),
                      str(data.get("python", "")))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _try_lock(fd: int) -> bool:
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except (BlockingIOError, PermissionError):
        return False
    except OSError as exc:
        if getattr(exc, "errno", None) in (11, 13, 35):  # EAGAIN / EACCES / macOS EWOULDBLOCK
            return False
        raise
    return True


def _unlock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
    else:
        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


def is_held(path: Path) -> bool:
    """Whether some process holds the lock now (takes and drops it at once when it is free)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        if _try_lock(fd):
            _unlock(fd)
            return False
        return True
    finally:
        os.close(fd)


class BuildLock:
    """``with BuildLock(path, on_wait):`` holds the lock; ``on_wait(holder, waited_s)`` is called every poll
    while another process holds it. After entering, ``previous`` is the holder a dead builder left recorded
    (None when the last one released it normally) and ``waited`` whether this process had to wait."""

    def __init__(self, path: Path, on_wait: Callable[[Optional[Holder], float], None] = lambda h, s: None):
        self.path = path
        self.on_wait = on_wait
        self.previous: Optional[Holder] = None
        self.waited = False
        self._fd: Optional[int] = None

    def __enter__(self) -> "BuildLock":
        # os.open's descriptors are not inherited (PEP 446): the compiler's processes never hold the lock
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        t0 = time.monotonic()
        while not _try_lock(fd):
            self.waited = True
            self.on_wait(read_holder(self.path), time.monotonic() - t0)
            time.sleep(POLL_S)
        self._fd = fd
        self.previous = read_holder(self.path)  # still there: its holder died while building
        record = json.dumps(asdict(Holder.me())).encode()
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, record)
        return self

    def __exit__(self, *exc) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)  # an empty record: released normally
        finally:
            _unlock(fd)
            os.close(fd)
