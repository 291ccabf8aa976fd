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
from pathlib import Path
from typing import Optional

TEMP_SUFFIX = ".neuron-port.tmp"


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
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    except OSError as exc:
        raise OSError(exc.errno, f"no file can be created in {path.parent} ({exc.strerror})", str(path)) from None
    os.close(fd)
    os.unlink(probe)


def atomic_write(path: Path, data: bytes, *, durable: bool = False, mode: Optional[int] = None) -> None:
    """Replace ``path`` by ``data`` atomically.

    An existing file keeps its mode (and its owner and group where permitted); a new file gets ``mode``,
    or what ``open()`` would give it (0o666 minus the umask). ``durable`` fsyncs the data before the
    rename (the user's source files: a crash right after the rename must not leave an empty file).
    Whatever fails (the write, the rename over a folder, an exception in between), the temporary file
    is removed.
    """
    try:
        st: Optional[os.stat_result] = path.stat()
    except FileNotFoundError:
        st = None
    tmp: Optional[str] = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if st is not None:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            try:
                os.chown(tmp, st.st_uid, st.st_gid)
            except OSError:
                pass  # not permitted for other owners unless root; the mode is what matters
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
