"""The one atomic write: a temporary file in the target's folder, renamed over the target.

Used for the user's files (the rewrite writer), the result cache, the simulator's NEFF cache and
`check --output`. Readers see the old content or the new one, never a mix; an interrupted write leaves
no temporary file behind when Python can still clean up, and one that a killed process left is removed
by a later run (``remove_orphaned_temp_files``: its name says which process wrote it).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import time
from pathlib import Path
from typing import Iterable, Optional

TEMP_SUFFIX = ".neuron-port.tmp"
# The temporary name is ".<start of the name>.<8 random>.<owner>.neuron-port.tmp", the owner being
# "<pid>-<start time>-<host>" of the writing process (owner_token): at most about 100 bytes, so any name
# the filesystem accepts (NAME_MAX, 255 bytes) can be written.
TEMP_NAME_BYTES = 32


def temp_prefix(name: str) -> str:
    """``.`` + the start of ``name`` (at most TEMP_NAME_BYTES bytes, cut between characters) + ``.``."""
    while len(os.fsencode(name)) > TEMP_NAME_BYTES:
        name = name[:-1]
    return f".{name}."


STALE_TEMP_SECONDS = 60.0  # a write takes milliseconds: a temporary file this old was left by a killed process

# -- who owns a temporary file --------------------------------------------------------------------------
# A process killed with SIGKILL (or a power cut) cannot remove its temporary file. The name says who wrote
# it: the pid, the process's start time (clock ticks since boot, /proc/PID/stat), so a dead writer whose
# pid was reused does not protect its file, and a host token (the boot id and the pid namespace), so a pid
# is only judged on the machine, boot and namespace that can see it. A temporary file whose owner is not
# alive is an orphan; one whose owner cannot be judged here (another host or container, a name without an
# owner, a system without /proc) is one once it is older than STALE_TEMP_SECONDS.
_OWNER = re.compile(r"\.(\d+)-(\d+)-([0-9a-f]{8})" + re.escape(TEMP_SUFFIX) + "$")


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _process(pid: int) -> Optional[tuple[str, int]]:
    """(state, start time in clock ticks since boot) of process ``pid`` (Linux), None when unknown."""
    text = _read(f"/proc/{pid}/stat")
    if not text or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()
    try:
        return fields[0], int(fields[19])  # fields 3 and 22 of proc_pid_stat(5)
    except (IndexError, ValueError):
        return None


def _host_token() -> Optional[str]:
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = None
    if not boot or not namespace:
        return None
    return hashlib.sha256(f"{boot.strip()} {namespace}".encode()).hexdigest()[:8]


_HOST = _host_token()


def owner_token(pid: Optional[int] = None) -> Optional[str]:
    """"<pid>-<start time>-<host>" of process ``pid`` (default: this one); None where it cannot be known."""
    pid = os.getpid() if pid is None else pid
    process = _process(pid)
    return None if process is None or _HOST is None else f"{pid}-{process[1]}-{_HOST}"


def _owner_alive(pid: int, start: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: alive
    process = _process(pid)
    if process is None:  # alive, but /proc does not show it (hidepid): it may be writing
        return True
    # a different start time: the pid now names another process; a zombie writes nothing
    return process[1] == start and process[0] not in ("Z", "X")


def is_orphan(path: Path, now: Optional[float] = None) -> bool:
    """Whether the temporary file ``path`` belongs to no running write: its owner (the name's pid, start
    time and host) is not alive, or, when the owner cannot be judged here, it is older than
    STALE_TEMP_SECONDS. Not a regular file, or gone: False."""
    try:
        st = path.lstat()
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    match = _OWNER.search(path.name)
    if match is not None and _HOST is not None and match.group(3) == _HOST:
        return not _owner_alive(int(match.group(1)), int(match.group(2)))
    return (time.time() if now is None else now) - st.st_mtime > STALE_TEMP_SECONDS


_SEEN: list[Path] = []


def seen_temp_files() -> list[Path]:
    """The temporary files the latest folder walk (neuron_port/rewrite/discovery.py) passed, for a writing
    run to remove the orphans among them (the walk lists every folder anyway: no second walk)."""
    return _SEEN


def remove_orphaned_temp_files(candidates: Iterable[Path]) -> int:
    """Remove those of ``candidates`` (temporary files: names ending in TEMP_SUFFIX) that no running write
    owns (``is_orphan``); a concurrent run's file is never touched. Returns how many were removed."""
    removed = 0
    now = time.time()
    for candidate in candidates:
        if candidate.name.endswith(TEMP_SUFFIX) and is_orphan(candidate, now):
            try:
                candidate.unlink()
                removed += 1
            except OSError:
                continue
    return removed


def remove_stale_temp_files(path: Path) -> int:
    """Remove the temporary files that earlier writes of ``path`` left behind when their process was killed
    (SIGKILL, a power cut: nothing could clean up) and that no running write owns (``is_orphan``).
    Returns how many were removed."""
    try:
        candidates = list(path.parent.glob(glob_escape(temp_prefix(path.name)) + "*" + TEMP_SUFFIX))
    except OSError:
        return 0
    return remove_orphaned_temp_files(candidates)


def temp_suffix() -> str:
    """The end of this process's temporary names: its owner token, then TEMP_SUFFIX."""
    token = owner_token()
    return f".{token}{TEMP_SUFFIX}" if token else TEMP_SUFFIX


def glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _read_umask() -> int:
    # os.umask() can only be read by setting it; do that once, at import, not while threads write files
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def check_writable(path: Path) -> None:
    """Raise OSError (strerror says why) when ``atomic_write(path)`` cannot succeed: ``path`` is a
    folder, its folder is missing, or no file can be created there (``/proc``, a read-only mount).
    Tries by creating and removing a temporary file; leaves nothing behind."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "it is a folder", str(path))
    if not path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, "its folder does not exist", str(path.parent))
    import tempfile  # only a write needs it (a --check or --diff run does not import it)

    try:
        fd, probe = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=temp_suffix(), dir=path.parent)
    except OSError as exc:
        raise OSError(exc.errno, f"no file can be created in {path.parent} ({exc.strerror})", str(path)) from None
    os.close(fd)
    os.unlink(probe)


def atomic_write(path: Path, data: bytes, *, durable: bool = False, mode: Optional[int] = None,
                 keep_owner: bool = False) -> None:
    """Replace ``path`` by ``data`` atomically.

    An existing file keeps its mode (and its owner and group where permitted; with ``keep_owner``, a
    file whose owner or group cannot be kept is not replaced: PermissionError); a new file gets
    ``mode``, or what ``open()`` would give it (0o666 minus the umask). ``durable`` fsyncs the data
    before the rename (the user's source files: a crash right after the rename must not leave an
    empty file). Whatever fails (the write, the rename over a folder, an exception in between), the
    temporary file is removed.
    """
    try:
        st: Optional[os.stat_result] = path.stat()
    except FileNotFoundError:
        st = None
    tmp: Optional[str] = None
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=temp_suffix(), dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if st is not None:
            created = os.stat(tmp)
            if (created.st_uid, created.st_gid) != (st.st_uid, st.st_gid):
                try:
                    os.chown(tmp, st.st_uid, st.st_gid)
                except OSError as exc:
                    if keep_owner:
                        raise PermissionError(exc.errno, f"its owner and group (uid {st.st_uid}, gid "
                                              f"{st.st_gid}) cannot be kept: {exc.strerror}", str(path)) from None
                    # caches: not permitted for other owners unless root; the mode is what matters
            os.chmod(tmp, stat.S_IMODE(st.st_mode))  # after chown, which clears set-user-ID bits
        else:
            os.chmod(tmp, mode if mode is not None else 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise
