"""Runtime events of the simulated neuron device: user sites, the public ``record()`` API and the
per-process JSON-lines file. The format is documented in EVENTS.md.

Hot path: none of this runs per op. The C++ core calls back once per new (op, signature) and when
an unsupported feature is hit; the step clock runs once per optimizer step and twice per module call.

The package, by concern:

* ``sites.py``: user-site capture (the first frame outside torch, neuron_backend and the standard
  library) and the first sightings of new signatures;
* ``steps.py``: the step clock, the phases and the module paths of first sightings; ``loaders.py``:
  DataLoader batches (what fed a phase, a partial last batch);
* ``aggregate.py``: the snapshot (what ``neuron_backend.stats()`` returns), ``cost_fields.py`` the
  fields of it that feed the cost model;
* ``process.py``: the ``process`` line; ``writer.py``: the events file and ``flush()``;
* ``durable.py``: the crash-proof records (counters and journal, EVENTS.md "Records");
* ``hooks.py``: the C++ core's callbacks, the exit / exception / SIGTERM hooks and ``install()``;
  ``sigterm.py``: SIGTERM while the main thread waits in native code;
* ``state.py``: what these share, under one lock.

Public API (other modules use only these): ``record()``, ``records()``, ``flush()``, ``user_site()``,
``unsupported()``, ``unsupported_mode()``, ``snapshot()``, ``op_table()``, ``install()``.
"""

from __future__ import annotations

import sys
import time

from . import durable, state, steps
from .aggregate import MAX_SIGNATURES_PER_OP, op_table, snapshot
from .hooks import install, unsupported
from .process import SCHEMA_VERSION, unsupported_mode
from .sites import extra_skip_prefixes, is_internal, site_by_id, user_site
from .writer import FLUSH_INTERVAL_S, events_path, flush, maybe_flush, to_lines

__all__ = ["record", "records", "flush", "user_site", "unsupported", "unsupported_mode", "snapshot", "op_table",
           "install", "events_path", "to_lines", "site_by_id", "is_internal", "extra_skip_prefixes",
           "SCHEMA_VERSION", "FLUSH_INTERVAL_S", "MAX_SIGNATURES_PER_OP"]


def record(kind: str, *, site: dict | None = None, frame=None, **fields) -> dict:
    """Append an event (e.g. kind="compile" or "distributed") with the user site; returns it.

    ``fields`` must be JSON-serialisable. Pass ``site=`` to override the captured site, or
    ``frame=`` to start the user-frame search from a given frame.
    """
    ev = {"kind": kind, **fields}
    ev["site"] = site if site is not None else user_site(frame if frame is not None else sys._getframe(1))
    ev["time"] = round(time.time() - state.started, 6)
    with state.lock:
        state.recorded.append(ev)
    durable.append(ev)
    maybe_flush()
    return ev


steps.record_sink = record  # phases and DataLoader facts (steps.py, loaders.py) are record() events


def records(kind: str | None = None) -> list[dict]:
    """Copies of the events ``record()`` appended so far (of one kind, or all)."""
    with state.lock:
        return [dict(r) for r in state.recorded if kind is None or r["kind"] == kind]
