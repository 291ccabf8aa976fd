"""The rewrite pool's memory budget: how much a file may take in a worker, and how much may be in flight.

Files are handed to workers only while the memory they may take together stays under the budget (one file
is always allowed, however large), so large files are not run side by side and ``--jobs N`` cannot
multiply the peak of the largest files by N. A large file (over half the budget) runs in a process of its
own that ends with it: CPython keeps most of a freed tree's memory in the process (its object arenas are
fragmented), so a pool worker that once had a large file would go on holding most of that file's peak.

A worker's peak for a Python file is about MEMORY_PER_SOURCE_BYTE bytes per byte of source above the
worker's own memory (measured on generated 8,000- to 60,000-line modules: bench/README.md, "Issue 20/22"; and
on 30,000 top-level statements, 102 bytes per byte, since a flat module is parsed in pieces too: "Issue 33").
NEURON_PORT_REWRITE_MEMORY_MB sets the budget in MB.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from neuron_port.errors import UsageError

MEMORY_PER_SOURCE_BYTE = 120
# two 2 MB files (the default size limit) at a time, or one and every small file
DEFAULT_MEMORY_MB = 512


def memory_budget() -> int:
    """The pool's memory budget in bytes (NEURON_PORT_REWRITE_MEMORY_MB, default DEFAULT_MEMORY_MB)."""
    value = os.environ.get("NEURON_PORT_REWRITE_MEMORY_MB", "").strip()
    if not value:
        return DEFAULT_MEMORY_MB * 2**20
    try:
        megabytes = float(value)
    except ValueError:
        raise UsageError(f"NEURON_PORT_REWRITE_MEMORY_MB={value!r}: not a number of megabytes") from None
    if not 0 < megabytes < float("inf"):
        raise UsageError(f"NEURON_PORT_REWRITE_MEMORY_MB={value!r}: must be a number of megabytes above 0")
    return int(megabytes * 2**20)


def memory_estimate(path: Path, raw: Optional[bytes]) -> int:
    """What a worker may take for this file at its peak, from its size (``raw``: its bytes, when read)."""
    if raw is not None:
        size = len(raw)
    else:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
    return size * MEMORY_PER_SOURCE_BYTE


def is_large(estimate: int, budget: int) -> bool:
    """A file that takes over half the budget: it waits aside when it does not fit, and runs alone."""
    return 2 * estimate > budget
