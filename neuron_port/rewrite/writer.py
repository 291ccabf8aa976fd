"""The write step: the one place that puts rewritten files on disk, and the diff shown instead of a write.

Workers only compute; the main process writes each changed file atomically (neuron_port/atomic.py),
keeping its mode, owner and group, and records what happened once: a written result says so (its
findings' fixes count as applied), a file that could not be written keeps its old content, comes back
without its rewrite and adds an error naming it.

Just before a file is replaced, its bytes are read again and compared with the bytes its rewrite was
computed from (``note_read``, called by the runner when it reads a file): a file the user edited while
the run was in progress is left alone ("changed during the run"), never overwritten with the older
content plus the fix. SIGINT and SIGTERM are held while one file is written and act between files. A
temporary file that a killed earlier run left is removed by the next writing run: those in the folders
discovery walked (whatever that run writes), and those beside each file it writes; a temporary file whose
writer is still running is kept (neuron_port/atomic.py ``is_orphan``).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import stat
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from neuron_port.atomic import atomic_write, remove_orphaned_temp_files, remove_stale_temp_files
from neuron_port.results import FileError, FileResult
from neuron_port.rewrite.discovery import seen_temp_files
from neuron_port.rewrite.signals import signals_held
from neuron_port.rewrite.sources import SourceError, read_regular_bytes

# real path -> sha256 of the bytes the latest scan computed its rewrite from (main process only)
_read_digests: dict[str, bytes] = {}


def note_read(real_path: str, digest: bytes) -> None:
    """Record that the rewrite of ``real_path`` was computed from bytes with this sha256 digest."""
    _read_digests[real_path] = digest


def check_writable(path: Path, display: str) -> None:
    """Raise SourceError unless the file and its folder can be written (the rename needs the folder)."""
    try:
        st = path.stat()
    except OSError as exc:
        raise SourceError(f"{display}: cannot stat: {exc.strerror or exc}") from None
    if not st.st_mode & stat.S_IWUSR:
        raise SourceError(f"{display}: file is read-only; not rewritten (make it writable to apply fixes)")
    if not os.access(path.parent, os.W_OK):
        raise SourceError(f"{display}: its folder is not writable; not rewritten")


_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def unified_diff(old: str, new: str, path: str) -> str:
    """What `--diff` prints for one file instead of writing it (git's a/ b/ prefixes)."""
    # lines end at Python's line ends only: str.splitlines also ends one at a form feed (and \v, \x1c-\x1e,
    # \x85, \u2028, \u2029), which showed a line no fix touched as changed and cut in two
    lines = difflib.unified_diff(
        _LINES.findall(old), _LINES.findall(new), fromfile=f"a/{path.lstrip('/')}", tofile=f"b/{path.lstrip('/')}"
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _check_unchanged(result: FileResult) -> None:
    """Raise SourceError unless the file still has the bytes its rewrite was computed from."""
    expected = _read_digests.get(result.real_path)
    if expected is None:
        raise SourceError(f"{result.path}: not rewritten: there is no record of the content its rewrite was "
                          "computed from")
    current = read_regular_bytes(Path(result.real_path), result.path)
    if hashlib.sha256(current).digest() != expected:
        raise SourceError(f"{result.path}: changed during the run; not rewritten (run again to rewrite it)")


def _check_owner(path: Path, display: str) -> None:
    """A rewrite creates a new file: only root can give it another user's ownership. As anyone else, a
    file owned by another user is skipped rather than silently taken over."""
    if not hasattr(os, "geteuid") or os.geteuid() == 0:
        return
    owner = path.stat().st_uid
    if owner != os.geteuid():
        raise SourceError(f"{display}: owned by another user (uid {owner}); not rewritten (the rewritten file "
                          "would belong to you). Run as its owner to apply fixes")


def write_results(results: Sequence[FileResult]) -> tuple[list[FileResult], list[FileError]]:
    """Write every changed result; returns the results as they now stand and the files that failed."""
    out: list[FileResult] = []
    errors: list[FileError] = []
    remove_orphaned_temp_files(seen_temp_files())  # what killed earlier runs left in the walked folders
    for result in results:
        if not result.changed:
            out.append(result)
            continue
        path = Path(result.real_path)
        try:
            with signals_held():
                check_writable(path, result.path)
                _check_owner(path, result.path)
                _check_unchanged(result)
                remove_stale_temp_files(path)  # what a killed earlier run could not clean up
                atomic_write(path, result.new_bytes or b"", durable=True, keep_owner=True)
        except (SourceError, OSError) as exc:
            message = str(exc) if isinstance(exc, SourceError) else f"{result.path}: cannot write: {exc}"
            errors.append(FileError(path=result.path, message=message))
            out.append(result.without_rewrite())
            continue
        _read_digests.pop(result.real_path, None)
        out.append(replace(result, written=True))
    return out, errors
