"""Reads the simulator's per-process event files (neuron_backend/EVENTS.md) into typed, frozen events.

One dataclass per event kind (``process.py``: process and summary; ``ops.py``: the C++ core's op,
fallback, eager_compile, demotion and unsupported lines; ``records.py``: compile, distributed,
neff_cache and shape_only from ``record()``), each parsed from one JSON line. A line that is not JSON,
not an object, of an unknown kind, or with a field of the wrong type is skipped, counted in
``ProcessEvents.bad_lines`` and named in ``ProcessEvents.notes``; an unreadable file is skipped.

A process that died without a complete snapshot (SIGKILL, SIGSEGV, ``os._exit``) is rebuilt from its
crash-proof records (``recovery.py``). ``run_environment()`` gives a run its folder and token.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional, Union, get_args

from neuron_port.check.events.fields import EventFields, MalformedEvent, Site
from neuron_port.check.events.ops import (
    DemotionEvent,
    EagerCompileEvent,
    EagerCompileTruncatedEvent,
    ExplicitOpsEvent,
    FallbackEvent,
    FallbackSite,
    FirstSeen,
    FirstSeenCount,
    OpEvent,
    SignatureCalls,
    UnsupportedEvent,
)
from neuron_port.check.events.phases import DataLoaderEvent, PhaseEvent
from neuron_port.check.events.process import ExceptionInfo, ProcessEvent, SummaryEvent
from neuron_port.check.events.lost import LostRecords, lost_records
from neuron_port.check.events.workers import WORKERS_NAME, WorkerExit, read_worker_exits
from neuron_port.check.events.recovery import RECORDS_NAME, recover
from neuron_port.check.events.records import (
    CompileEvent,
    CompileInput,
    DistributedEvent,
    FunctionRef,
    GraphOp,
    GraphWorkEvent,
    NeffCacheCounts,
    NeffCacheEvent,
    ShapeOnlyEvent,
)

__all__ = [
    "CompileEvent", "CompileInput", "DataLoaderEvent", "DemotionEvent", "DistributedEvent", "EagerCompileEvent",
    "EagerCompileTruncatedEvent", "Event", "EVENT_TYPES", "ExceptionInfo", "ExplicitOpsEvent", "FallbackEvent",
    "FallbackSite", "FirstSeen", "FirstSeenCount", "FunctionRef", "GraphOp", "GraphWorkEvent", "LostRecords",
    "MalformedEvent", "NeffCacheCounts", "NeffCacheEvent", "OpEvent",
    "PhaseEvent", "ProcessEvent", "ProcessEvents", "ShapeOnlyEvent", "SignatureCalls", "Site", "SummaryEvent", "UnsupportedEvent", "WorkerExit", "read_worker_exits",
    "lost_records", "parse_event", "parse_events_file", "read_events", "run_environment", "EVENTS_DIR_ENV",
    "EVENTS_TOKEN_ENV",
]

EVENTS_DIR_ENV = "NEURON_PORT_EVENTS_DIR"
EVENTS_TOKEN_ENV = "NEURON_PORT_EVENTS_TOKEN"
MAX_NOTES_PER_FILE = 20


def run_environment(events_dir: Path) -> tuple[dict[str, str], str]:
    """The environment a run's command gets (its events folder, which must exist, and a fresh token) and
    the token to pass to ``read_events``: records of another run in the folder are then ignored."""
    token = secrets.token_hex(16)
    return {EVENTS_DIR_ENV: str(events_dir), EVENTS_TOKEN_ENV: token}, token

# Every event kind, listed here once: the reader's table of kinds is made from it.
Event = Union[ProcessEvent, OpEvent, FallbackEvent, EagerCompileEvent, EagerCompileTruncatedEvent, DemotionEvent,
              UnsupportedEvent, ExplicitOpsEvent, CompileEvent, DistributedEvent, NeffCacheEvent, GraphWorkEvent,
              ShapeOnlyEvent, PhaseEvent, DataLoaderEvent, SummaryEvent]
EVENT_TYPES: dict[str, type[Event]] = {event_type.KIND: event_type for event_type in get_args(Event)}


@dataclass(frozen=True)
class ProcessEvents:
    """One events file: its process line, the other events in file order, its summary line."""

    path: Path
    process: Optional[ProcessEvent] = None
    events: tuple[Event, ...] = ()
    summary: Optional[SummaryEvent] = None
    bad_lines: int = 0  # skipped: not JSON, not an object, unknown kind, or a field of the wrong type
    notes: tuple[str, ...] = ()  # what was ignored ("file:line: ignored: why") or rebuilt, for the user
    rebuilt: bool = False  # the events come from the crash-proof records, not from a complete snapshot

    @property
    def rank(self) -> Optional[int]:
        return self.process.rank if self.process is not None else None

    @property
    def mode(self) -> str:
        """real | shape_only, as the process line says (real without one)."""
        return self.process.mode if self.process is not None else "real"


def parse_event(line: str) -> Event:
    """One line of an events file; MalformedEvent for anything but a well-typed event of a known kind."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
        raise MalformedEvent(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise MalformedEvent(f"not an object: {type(data).__name__}")
    kind = data.get("kind")
    event_type = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if event_type is None:
        raise MalformedEvent(f"unknown kind {kind!r:.40}")
    return event_type.from_fields(EventFields(data))


def parse_events_file(path: Path, text: str) -> ProcessEvents:
    """The events of one file's text; the last process and summary lines win (there is one of each)."""
    process: Optional[ProcessEvent] = None
    summary: Optional[SummaryEvent] = None
    events: list[Event] = []
    notes: list[str] = []
    bad_lines = 0
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = parse_event(line)
        except MalformedEvent as exc:
            bad_lines += 1  # a torn line cannot happen with atomic snapshots; tolerate anyway
            if len(notes) < MAX_NOTES_PER_FILE:
                notes.append(f"{path.name}:{number}: ignored: {exc}"[:300])
            continue
        if isinstance(event, ProcessEvent):
            process = event
        elif isinstance(event, SummaryEvent):
            summary = event
        else:
            events.append(event)
    if bad_lines > len(notes):
        notes.append(f"{path.name}: ignored {bad_lines - len(notes)} more line(s)")
    return ProcessEvents(path=path, process=process, events=tuple(events), summary=summary, bad_lines=bad_lines,
                         notes=tuple(notes))


EVENTS_NAME = re.compile(r"^neuron-events-(?P<tag>(?:rank\d+|norank)-pid\d+)\.jsonl$")  # writer.events_path
TEMPORARY_NAME = re.compile(r"\.(tmp\d*|counters\.tmp)$")  # a writer's file before its rename


def _print_note(note: str) -> None:
    print(f"neuron-port: events: {note}", file=sys.stderr)


def read_events(folder: Path, token: Optional[str] = None,
                on_note: Optional[Callable[[str], None]] = _print_note) -> list[ProcessEvents]:
    """Every process of ``folder``, in name order: its ``*.jsonl`` snapshot, or, when the snapshot is
    missing or incomplete (the process died without writing one), its events rebuilt from its records.
    With ``token`` (``run_environment``), records of another run are ignored. Each file or line ignored
    is named in the process's ``notes`` and passed to ``on_note`` (default: printed to stderr)."""
    if not folder.is_dir():
        return []
    snapshots: dict[str, Path] = {}
    records: dict[str, dict[str, Path]] = {}
    folder_notes: list[str] = []
    for path in sorted(folder.iterdir()):
        m = RECORDS_NAME.match(path.name)
        named = EVENTS_NAME.match(path.name)
        if named:
            snapshots[named.group("tag")] = path
        elif m:
            records.setdefault(m.group("tag"), {})[m.group("part")] = path
        elif WORKERS_NAME.match(path.name):  # torchrun's process: how each worker ended (workers.py)
            continue
        elif not TEMPORARY_NAME.search(path.name):
            folder_notes.append(f"{path.name}: ignored: not a file the simulator writes")
    out = []
    for tag in sorted(set(snapshots) | set(records)):
        process = _read_process(folder, tag, snapshots.get(tag), records.get(tag, {}), token)
        if process is not None:
            out.append(process)
    if on_note is not None:
        for note in folder_notes + [n for p in out for n in p.notes]:
            on_note(note)
    return out


def _read_process(folder: Path, tag: str, snapshot_path: Optional[Path], parts: dict[str, Path],
                  token: Optional[str]) -> Optional[ProcessEvents]:
    snapshot = None
    if snapshot_path is not None:
        try:
            text = snapshot_path.read_text(encoding="utf-8", errors="replace")
            snapshot = parse_events_file(snapshot_path, text)
        except OSError:
            pass
    if snapshot is not None and token and snapshot.process is not None and snapshot.process.token != token:
        return None  # another run's process (a late grandchild of an earlier run), or not the simulator's file
    if (snapshot is not None and snapshot.summary is not None and snapshot.summary.complete) or "journal" not in parts:
        return snapshot
    notes = list(snapshot.notes) if snapshot else []
    journal = parts["journal"]
    rebuilt = recover(journal, parts.get("counters", journal.with_suffix(".counters")), notes, parse_event)
    if rebuilt is None:
        return replace(snapshot, notes=tuple(notes)) if snapshot else None
    if token and rebuilt.token and rebuilt.token != token:
        return snapshot
    if rebuilt.process is not None and rebuilt.process.forked_from is not None:
        return None  # a forked child's calls are not rebuilt into the counts: lost.py reports them
    process = snapshot.process if snapshot is not None and snapshot.process is not None else rebuilt.process
    notes.append(f"{journal.name}: the process ended without a complete snapshot: its events were rebuilt "
                 "from its crash-proof records")
    return ProcessEvents(path=snapshot_path or journal, process=process, events=rebuilt.events,
                         summary=rebuilt.summary, bad_lines=snapshot.bad_lines if snapshot else 0,
                         notes=tuple(notes), rebuilt=True)
