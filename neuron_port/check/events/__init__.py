"""Reads the simulator's per-process event files (neuron_backend/EVENTS.md) into typed, frozen events.

One dataclass per event kind (``process.py``: process and summary; ``ops.py``: the C++ core's op,
fallback, eager_compile, demotion and unsupported lines; ``records.py``: compile, distributed and
neff_cache from ``record()``), each parsed from one JSON line. A line that is not JSON, not an object,
of an unknown kind, or with a field of the wrong type is skipped and counted in
``ProcessEvents.bad_lines``; an unreadable file is skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

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
    UnsupportedEvent,
)
from neuron_port.check.events.process import ExceptionInfo, ProcessEvent, SummaryEvent
from neuron_port.check.events.records import (
    CompileEvent,
    CompileInput,
    DistributedEvent,
    FunctionRef,
    NeffCacheCounts,
    NeffCacheEvent,
)

__all__ = [
    "CompileEvent", "CompileInput", "DemotionEvent", "DistributedEvent", "EagerCompileEvent",
    "EagerCompileTruncatedEvent", "Event", "EVENT_TYPES", "ExceptionInfo", "ExplicitOpsEvent", "FallbackEvent",
    "FallbackSite", "FirstSeen", "FirstSeenCount", "FunctionRef", "MalformedEvent", "NeffCacheCounts", "NeffCacheEvent", "OpEvent",
    "ProcessEvent", "ProcessEvents", "Site", "SummaryEvent", "UnsupportedEvent", "parse_event",
    "parse_events_file", "read_events",
]

Event = Union[ProcessEvent, OpEvent, FallbackEvent, EagerCompileEvent, EagerCompileTruncatedEvent, DemotionEvent,
              UnsupportedEvent, ExplicitOpsEvent, CompileEvent, DistributedEvent, NeffCacheEvent, SummaryEvent]
EVENT_TYPES: dict[str, type[Event]] = {event_type.KIND: event_type for event_type in (
    ProcessEvent, OpEvent, FallbackEvent, EagerCompileEvent, EagerCompileTruncatedEvent, DemotionEvent,
    UnsupportedEvent, ExplicitOpsEvent, CompileEvent, DistributedEvent, NeffCacheEvent, SummaryEvent)}


@dataclass(frozen=True)
class ProcessEvents:
    """One events file: its process line, the other events in file order, its summary line."""

    path: Path
    process: Optional[ProcessEvent] = None
    events: tuple[Event, ...] = ()
    summary: Optional[SummaryEvent] = None
    bad_lines: int = 0  # skipped: not JSON, not an object, unknown kind, or a field of the wrong type

    @property
    def rank(self) -> Optional[int]:
        return self.process.rank if self.process is not None else None


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
    bad_lines = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            event = parse_event(line)
        except MalformedEvent:
            bad_lines += 1  # a torn line cannot happen with atomic snapshots; tolerate anyway
            continue
        if isinstance(event, ProcessEvent):
            process = event
        elif isinstance(event, SummaryEvent):
            summary = event
        else:
            events.append(event)
    return ProcessEvents(path=path, process=process, events=tuple(events), summary=summary, bad_lines=bad_lines)


def read_events(folder: Path) -> list[ProcessEvents]:
    """Every ``*.jsonl`` file of ``folder``, in name order; a missing folder or unreadable file has none."""
    out = []
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        out.append(parse_events_file(path, text))
    return out
