"""The per-process events file (EVENTS.md): ``neuron-events-rank<R>-pid<P>.jsonl`` in
``NEURON_PORT_EVENTS_DIR``, one JSON object per line, rewritten whole and atomically (temporary
file + rename) from a snapshot: at most once a second while new signatures appear, at once when an
unsupported feature, a process-group violation or a failed compile is recorded, and when the
process ends (hooks.py).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from . import state
from .aggregate import snapshot

FLUSH_INTERVAL_S = 1.0  # at most one snapshot per second while new signatures appear

_last_flush = 0.0


_named: dict[tuple[int, str], Path] = {}  # (pid, events folder) -> the file name chosen first


def events_path() -> Path | None:
    """This process's events file. Its name is chosen once, at the first call in the process (the
    simulator's install), with the ``RANK`` seen then: a script that sets ``RANK`` itself before
    ``init_process_group`` stays one process with one file (and one set of records, named after it),
    its rank read from the process line."""
    d = os.environ.get("NEURON_PORT_EVENTS_DIR")
    if not d:
        return None
    key = (os.getpid(), d)
    if key not in _named:
        rank = os.environ.get("RANK")
        tag = f"rank{rank}" if rank is not None else "norank"
        _named[key] = Path(d) / f"neuron-events-{tag}-pid{os.getpid()}.jsonl"
    return _named[key]


def to_lines(snap: dict) -> list[dict]:
    lines = [snap["process"]]
    for key in ("ops", "fallbacks", "eager_compiles", "eager_compiles_truncated", "demotions", "unsupported",
                "events"):
        lines.extend(snap[key])
    lines.append({"kind": "explicit_ops", "counts": snap["explicit_ops"]})
    lines.append({**snap["summary"], "complete": snap["process"]["status"] != "running"})
    return lines


def flush(status: str | None = None) -> Path | None:
    """Write the current snapshot atomically (temp file + rename). Safe to call at any time."""
    global _last_flush
    if status is not None:
        state.status = status
    path = events_path()
    if path is None or os.getpid() != state.install_pid:  # forked children (DataLoader workers) write nothing
        return None
    if not path.parent.is_dir():  # never re-created: check removed it, this process outlived its run
        return None
    with state.lock:
        try:
            tmp = path.with_name(path.name + f".tmp{threading.get_ident()}")
            with open(tmp, "w", encoding="utf-8") as f:
                for line in to_lines(snapshot()):
                    f.write(json.dumps(line, default=str) + "\n")
            os.replace(tmp, path)
            _last_flush = time.monotonic()
        except Exception as e:  # noqa: BLE001
            print(f"neuron-port: could not write events to {path}: {e}", file=sys.stderr)
    return path


def maybe_flush() -> None:
    if time.monotonic() - _last_flush >= FLUSH_INTERVAL_S and events_path() is not None:
        flush()
