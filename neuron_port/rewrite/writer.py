"""The write loop: the one place that puts rewritten files on disk.

Workers only compute; the main process writes each changed file atomically (neuron_port/atomic.py),
keeping its mode, and records what happened once: a written result says so (its findings' fixes count
as applied), a file that could not be written keeps its old content, comes back without its rewrite and
adds an error naming it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

from neuron_port.atomic import atomic_write
from neuron_port.results import FileError, FileResult
from neuron_port.rewrite.sources import SourceError, check_writable


def write_results(results: Sequence[FileResult]) -> tuple[list[FileResult], list[FileError]]:
    """Write every changed result; returns the results as they now stand and the files that failed."""
    out: list[FileResult] = []
    errors: list[FileError] = []
    for result in results:
        if not result.changed:
            out.append(result)
            continue
        try:
            check_writable(Path(result.real_path), result.path)
            atomic_write(Path(result.real_path), result.new_bytes or b"", durable=True)
        except (SourceError, OSError) as exc:
            message = str(exc) if isinstance(exc, SourceError) else f"{result.path}: cannot write: {exc}"
            errors.append(FileError(path=result.path, message=message))
            out.append(result.without_rewrite())
            continue
        out.append(replace(result, written=True))
    return out, errors
