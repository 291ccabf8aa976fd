"""Rebuilds a process's events from its crash-proof records (neuron_backend/EVENTS.md, "Records"): the
journal (new signatures, their first sightings, ``record()`` events, unsupported features) and the counters
file (every signature's calls, updated in place by the simulator). Used when a process died without
writing a complete snapshot (SIGKILL, SIGSEGV, ``os._exit``, the OOM killer).

The events are the ones the simulator's snapshot would hold, built the same way (EVENTS.md, "Lines").
A cut last line (the process died while writing it) and lines that are not records are skipped with a
note naming the file and line; a counters file that is not one (wrong magic, short header) gives no
counts and a note.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

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
from neuron_port.check.events.process import ProcessEvent, SummaryEvent

RECORDS_FORMAT = 1
MAGIC = b"NPRECORD"
HEADER_BYTES = 4096
EXPLICIT_OFFSET, MAX_EXPLICIT = 128, 32
MAX_SIGNATURES_PER_OP = 200  # as the simulator's snapshot: the most-called ones, the rest summed
MAX_INT64_SITES = 5
# a process's records, beside its snapshot neuron-events-<tag>.jsonl (neuron_backend/events/durable.paths)
RECORDS_NAME = re.compile(r"^neuron-records-(?P<tag>(?:rank\d+|norank)-pid\d+)\.(?P<part>journal|counters)$")


@dataclass(frozen=True)
class Counters:
    """The counters file: the token, the step clock, explicit-op counts and the slots."""

    token: str = ""
    optimizer_step: Optional[int] = None
    forward: Optional[int] = None
    explicit: tuple[int, ...] = ()
    slots: tuple[int, ...] = ()
    peak_allocated: Optional[int] = None  # 0 in the file: none recorded (or a simulator before the field)

    def slot(self, index: Any) -> Optional[int]:
        return self.slots[index] if isinstance(index, int) and 0 <= index < len(self.slots) else None


def read_counters(path: Path, notes: list[str]) -> Optional[Counters]:
    """The counters file, or None (with a note) when it is missing, short or not a counters file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        notes.append(f"{path.name}: ignored: cannot read it ({exc.strerror or exc})")
        return None
    if len(data) < HEADER_BYTES or data[:8] != MAGIC:
        notes.append(f"{path.name}: ignored: not a counters file of the simulator (no NPRECORD header)")
        return None
    fmt = struct.unpack_from("<I", data, 8)[0]
    if fmt != RECORDS_FORMAT:
        notes.append(f"{path.name}: ignored: counters format {fmt}, this reader knows {RECORDS_FORMAT}")
        return None
    optimizer_step, forward, peak = struct.unpack_from("<qqq", data, 32)
    token = data[64:128].split(b"\0", 1)[0].decode("utf-8", "replace")
    explicit = struct.unpack_from(f"<{MAX_EXPLICIT}q", data, EXPLICIT_OFFSET)
    body = data[HEADER_BYTES:]
    slots = struct.unpack_from(f"<{len(body) // 8}q", body)
    return Counters(token, optimizer_step, forward, explicit, slots, peak or None)


@dataclass
class _Signature:
    op: str
    policy: str
    dtypes: tuple[str, ...]
    signature: tuple[Any, ...]
    seq: int
    calls: int = 0


@dataclass
class _Journal:
    process: Optional[dict] = None
    signatures: dict[int, _Signature] = field(default_factory=dict)  # by counter slot
    sightings: dict[int, tuple[Optional[dict], int, int, Optional[int], int]] = field(
        default_factory=dict)  # seq -> site, clock, phase, phase forward
    others: list[Any] = field(default_factory=list)  # record() events and unsupported features, in order


def _signature(f: EventFields) -> tuple[int, _Signature]:
    slot = f.integer("slot", -1)
    sig = _Signature(op=f.required_text("op"), policy=f.required_text("policy"), dtypes=f.texts("dtypes"),
                     signature=tuple(f.array("signature") or ()), seq=f.integer("seq", -1))
    return slot, sig


def _read_journal(path: Path, text: str, counters: Optional[Counters], notes: list[str], parse_event) -> _Journal:
    journal = _Journal()
    lines = text.split("\n")
    cut = text and not text.endswith("\n")  # the process died in the middle of its last write
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise MalformedEvent(f"not an object: {type(data).__name__}")
            kind = data.get("kind")
            f = EventFields(data)
            if kind == "process":
                journal.process = journal.process or data
            elif kind == "signature":
                slot, sig = _signature(f)
                journal.signatures[slot] = sig
            elif kind == "signature_policy":
                sig = journal.signatures.get(f.integer("slot", -1))
                if sig is not None:
                    sig.policy = f.required_text("policy")
            elif kind == "sighting":
                Site.from_json(f.raw("site"))  # validates it
                journal.sightings[f.integer("seq", -1)] = (f.raw("site"), f.integer("optimizer_step"),
                                                           f.integer("forward"), f.optional_integer("phase"),
                                                           f.integer("phase_forward"))
            elif kind == "reset":  # torch.neuron.clear_op_tracking(): counting starts again
                journal.signatures.clear()
            elif kind == "unsupported":
                event = parse_event(line)
                count = counters.slot(data.get("count_slot")) if counters else None
                journal.others.append(event if count is None else _with_count(event, count))
            else:
                journal.others.append(parse_event(line))
        except (ValueError, RecursionError) as exc:  # MalformedEvent is a ValueError, as json's errors
            if cut and number == len(lines):
                notes.append(f"{path.name}:{number}: ignored: the last line is cut (the process died writing it)")
            else:
                notes.append(f"{path.name}:{number}: ignored: {exc}"[:300])
    return journal


def _with_count(event: UnsupportedEvent, count: int) -> UnsupportedEvent:
    from dataclasses import replace

    return replace(event, count=count)


def _site_key(site: Optional[dict]) -> str:
    return json.dumps(site, sort_keys=True)


def _events(journal: _Journal, counters: Optional[Counters]) -> tuple[list[Any], SummaryEvent]:
    """The snapshot's lines between ``process`` and ``summary`` (EVENTS.md), from the records."""
    by_op: dict[tuple[str, str], list[_Signature]] = {}
    for slot, sig in journal.signatures.items():
        sig.calls = (counters.slot(slot) if counters else None) or 0
        if sig.calls > 0:
            by_op.setdefault((sig.op, sig.policy), []).append(sig)
    site_of = {seq: Site.from_json(s[0]) for seq, s in journal.sightings.items()}
    ops, fallbacks, compiles, truncated, demotions = [], [], [], [], []
    int64: dict[str, tuple[int, list[Optional[Site]]]] = {}
    for (op, policy), sigs in by_op.items():
        calls = sum(s.calls for s in sigs)
        ops.append(OpEvent(op=op, policy=policy, calls=calls, unique_signatures=len(sigs)))
        if policy == "fallback":
            per_site: dict[str, list] = {}
            for s in sigs:
                entry = per_site.setdefault(_site_key(journal.sightings.get(s.seq, (None,))[0]),
                                            [site_of.get(s.seq), 0])
                entry[1] += s.calls
            fallbacks.append(FallbackEvent(op=op, calls=calls, sites=tuple(
                FallbackSite(site, n) for site, n in sorted(per_site.values(), key=lambda e: -e[1]))))
        if policy == "native":
            ranked = sorted(sigs, key=lambda s: -s.calls)
            for s in ranked[:MAX_SIGNATURES_PER_OP]:
                compiles.append(EagerCompileEvent(op=op, signature=s.signature, calls=s.calls, cache_hits=s.calls - 1,
                                                  site=site_of.get(s.seq), first_seen=_first_seen(journal, s.seq)))
            if len(ranked) > MAX_SIGNATURES_PER_OP:
                truncated.append(_truncated(journal, op, ranked[MAX_SIGNATURES_PER_OP:]))
        f64: dict[str, list] = {}
        for s in sigs:
            if "float64" in s.dtypes:
                entry = f64.setdefault(_site_key(journal.sightings.get(s.seq, (None,))[0]), [site_of.get(s.seq), 0, 0])
                entry[1] += s.calls
                entry[2] += 1
            if "int64" in s.dtypes:
                total, sites = int64.get(op, (0, []))
                site = site_of.get(s.seq)
                if site is not None and len(sites) < MAX_INT64_SITES and not any(
                        (x.file, x.line) == (site.file, site.line) for x in sites if x):
                    sites.append(site)
                int64[op] = (total + s.calls, sites)
        demotions.extend(DemotionEvent(op=op, dtype="float64", computed_as="float32", calls=n, signatures=k,
                                       site=site) for site, n, k in f64.values())
    demotions.extend(DemotionEvent(op=op, dtype="int64", calls=n, aggregated=True, sites=tuple(sites))
                     for op, (n, sites) in int64.items())
    unsupported = [e for e in journal.others if isinstance(e, UnsupportedEvent)]
    records = [e for e in journal.others if not isinstance(e, UnsupportedEvent)]
    names = (journal.process or {}).get("explicit_ops") or []
    explicit = ExplicitOpsEvent(counts={name: n for name, n in zip(names, counters.explicit if counters else ())
                                        if isinstance(name, str)})
    native = [o for o in ops if o.policy == "native"]
    summary = SummaryEvent(
        op_calls=sum(o.calls for o in ops), native_calls=sum(o.calls for o in ops if o.policy != "fallback"),
        fallback_calls=sum(o.calls for o in ops if o.policy == "fallback"), fallback_ops=len(fallbacks),
        eager_compiles=sum(o.unique_signatures for o in native),
        eager_cache_hits=sum(o.calls - o.unique_signatures for o in native), complete=False,
        optimizer_steps=counters.optimizer_step if counters else None, forwards=counters.forward if counters else None,
        peak_allocated_bytes=counters.peak_allocated if counters else None)
    return [*ops, *fallbacks, *compiles, *truncated, *demotions, *unsupported, *records, explicit], summary


def _first_seen(journal: _Journal, seq: int) -> Optional[FirstSeen]:
    s = journal.sightings.get(seq)
    return None if s is None else FirstSeen(optimizer_step=s[1], forward=s[2], seq=seq, phase=s[3],
                                            phase_forward=s[4])


def _truncated(journal: _Journal, op: str, rest: list[_Signature]) -> EagerCompileTruncatedEvent:
    counts: dict[tuple, int] = {}
    for s in rest:
        seen = journal.sightings.get(s.seq)
        if seen is not None:
            counts[seen[1:5]] = counts.get(seen[1:5], 0) + 1
    return EagerCompileTruncatedEvent(op=op, omitted_signatures=len(rest), omitted_calls=sum(s.calls for s in rest),
                                      first_seen=tuple(FirstSeenCount(o, f, n, p, pf) for (o, f, p, pf), n in
                                                       sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                              kv[0][2] or 0, kv[0][3]))))


@dataclass(frozen=True)
class Recovered:
    process: Optional[ProcessEvent]
    events: tuple[Any, ...]
    summary: SummaryEvent
    token: str


def recover(journal_path: Path, counters_path: Path, notes: list[str], parse_event) -> Optional[Recovered]:
    """The events of a process rebuilt from its journal and counters file; None when the journal cannot be read."""
    try:
        text = journal_path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        notes.append(f"{journal_path.name}: ignored: cannot read it ({exc.strerror or exc})")
        return None
    counters = read_counters(counters_path, notes) if counters_path.exists() else None
    if counters is None and not counters_path.exists():
        notes.append(f"{counters_path.name}: missing: the rebuilt events have no call counts")
    journal = _read_journal(journal_path, text, counters, notes, parse_event)
    events, summary = _events(journal, counters)
    process = None
    if journal.process is not None:
        try:
            process = ProcessEvent.from_fields(EventFields(journal.process))
        except MalformedEvent as exc:
            notes.append(f"{journal_path.name}:1: ignored the process line: {exc}")
    return Recovered(process, tuple(events), summary, counters.token if counters else "")
