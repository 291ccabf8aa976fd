"""`check`'s temporary folders (``neuron-port-check-*``: events, rank logs, the preview copy;
``neuron-port-output-*``: the command's output) and the removal of those a dead run left.

A `check` that is SIGKILLed (or OOM-killed) cannot remove its folders. Each is named with its owner, as
the rewrite's temporary files are (neuron_port/atomic.py ``owner_token``: pid, start time, host), so a
later `check` removes the folders whose owner is gone: only our own prefixes, only folders (not links)
of the current user, on the host, boot and pid namespace that named them, and never a live run's (a pid
that now names another process does not protect a folder: the start time differs). A folder without an
owner in its name (older versions, no /proc) is never judged.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Optional

from neuron_port.atomic import owner_token
from neuron_port.check.process_tree import read_stat

CHECK_PREFIX = "neuron-port-check-"
OUTPUT_PREFIX = "neuron-port-output-"
# "<prefix><pid>-<start time>-<host>-<mkdtemp's random part>"
_OWNED = re.compile(r"neuron-port-(?:check|output)-(\d+)-(\d+)-([0-9a-f]{8})-[^/]+")


def scratch_folder(prefix: str) -> Path:
    """A new private folder in TMPDIR named ``prefix`` + this process's owner token."""
    token = owner_token()
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{token}-" if token else prefix))


def _gone(pid: int, start: int) -> bool:
    info = read_stat(pid)  # our own user's processes are always readable (hidepid hides others' only)
    return info is None or info.start != start or info.state in ("Z", "X")


def remove_dead_runs_folders(owner_pid: Optional[int] = None, folder: Optional[str] = None) -> int:
    """Remove the temporary folders of `check` runs that are gone (``owner_pid``: only that process's);
    returns how many were removed."""
    token = owner_token()
    if token is None:  # no /proc: owners cannot be judged
        return 0
    host, uid = token.rsplit("-", 1)[1], os.geteuid()
    removed = 0
    try:
        entries = list(os.scandir(folder or tempfile.gettempdir()))
    except OSError:
        return 0
    for entry in entries:
        match = _OWNED.fullmatch(entry.name)
        if match is None or match.group(3) != host:
            continue
        pid, start = int(match.group(1)), int(match.group(2))
        if owner_pid is not None and pid != owner_pid:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or not _gone(pid, start):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)  # never follows a link inside it
        removed += not os.path.lexists(entry.path)
    return removed
