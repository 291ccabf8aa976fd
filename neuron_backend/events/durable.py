"""The crash-proof records of a process (EVENTS.md, "Records"): what survives a death that runs no Python.

The C++ core keeps every call counter in a memory-mapped counters file and appends each new signature
to a journal; this module opens both (in a folder that must exist: a folder removed by ``neuron-port
check`` is never re-created) and appends what only Python knows: the process line, the first sighting
of each signature (site and step clock), ``record()`` events and unsupported features with a counter.
Each append is one ``write()`` of one line, done when the event happens, never per op.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

TOKEN_ENV = "NEURON_PORT_EVENTS_TOKEN"  # the run's token; check's reader ignores records of another run

_C = None
_pid = -1  # the process that opened them: a forked child writes nothing (the C++ core closes them too)


def paths(events_file: Path) -> tuple[Path, Path]:
    """The counters file and the journal next to a process's events file."""
    stem = events_file.name[: -len(".jsonl")].replace("neuron-events-", "neuron-records-", 1)
    return events_file.with_name(stem + ".counters"), events_file.with_name(stem + ".journal")


def open_records(c_module, events_file: Path, process_line: dict) -> str | None:
    """Open this process's records next to ``events_file``; None, or why they are not kept."""
    global _C, _pid
    if not events_file.parent.is_dir():
        return f"the events folder {events_file.parent} does not exist"
    counters, journal = paths(events_file)
    err = c_module.records_open(str(counters), str(journal), os.environ.get(TOKEN_ENV, ""))
    if err:
        return err
    _C, _pid = c_module, os.getpid()
    append({**process_line, "records_format": c_module.records_format(), "explicit_ops": list(c_module.EXPLICIT_OPS)})
    return None


def inherited_from() -> int | None:
    """In a forked child of a process that kept records: that process's pid (None otherwise)."""
    return _pid if _C is not None and _pid != os.getpid() else None


def is_open() -> bool:
    return _C is not None and os.getpid() == _pid


def append(event: dict) -> None:
    """One journal line (``default=str``: fields the recording module chose stay JSON)."""
    if is_open():
        _C.records_append(json.dumps(event, default=str, separators=(",", ":")))


def sighting(seq: int, site: dict | None, optimizer_step: int, forward: int, phase: int = 0,
             phase_forward: int = 0) -> None:
    if is_open():
        append({"kind": "sighting", "seq": seq, "site": site, "optimizer_step": optimizer_step, "forward": forward,
                "phase": phase, "phase_forward": phase_forward})


def new_counter(initial: int = 0) -> int:
    """A counter slot in the counters file (-1 when closed)."""
    return _C.records_new_counter(initial) if is_open() else -1


def add(slot: int, n: int = 1) -> None:
    if slot >= 0 and is_open():
        _C.records_add(slot, n)


def set_clock(optimizer_step: int, forward: int) -> None:
    """The step clock (steps.py calls it when a counter moves: once per optimizer step or outermost forward)."""
    if is_open():
        _C.records_set_clock(optimizer_step, forward)
