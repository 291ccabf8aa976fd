"""The one atomic write: a temporary file in the target's folder, renamed over the target.

Used for the user's files (the rewrite writer), the result cache, the simulator's NEFF cache and
`check --output`. Readers see the old content or the new one, never a mix; an interrupted write leaves
no temporary file behind when Python can still clean up.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Optional

TEMP_SUFFIX = ".neuron-port.tmp"
# The temporary name is ".<start of the name>.<8 random>.neuron-port.tmp": at most 58 bytes, so any name
# the filesystem accepts (NAME_MAX, 255 bytes) can be written.
TEMP_NAME_BYTES = 32


def temp_prefix(name: str) -> str:
    """``.`` + the start of ``name`` (at most TEMP_NAME_BYTES bytes, cut between characters) + ``.``."""
    while len(os.fsencode(name)) > TEMP_NAME_BYTES:
        name = name[:-1]
    return f".{name}."


STALE_TEMP_SECONDS = 60.0  # a write takes milliseconds: a temporary file this old was left by a killed process


def remove_stale_temp_files(path: Path) -> int:
    """Remove the temporary files that earlier writes of ``path`` left behind when their process was killed
    (SIGKILL, a power cut: nothing could clean up) and that are older than STALE_TEMP_SECONDS, so a
    concurrent write's file is never touched. Returns how many were removed."""
    removed = 0
    try:
        candidates = list(path.parent.glob(glob_escape(temp_prefix(path.name)) + "*" + TEMP_SUFFIX))
    except OSError:
        return 0
    now = time.time()
    for candidate in candidates:
        try:
            st = candidate.lstat()
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime > STALE_TEMP_SECONDS:
                candidate.unlink()
                removed += 1
        except OSError:
            continue
    return removed


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
    try:
        fd, probe = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=TEMP_SUFFIX, dir=path.parent)
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
    try:
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=TEMP_SUFFIX, dir=path.parent)
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
