"""``distributed`` events: process groups, collectives and violated TorchNeuron limits, merged over
ranks per (collective, site) (NP907 for the violations)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from neuron_port.check.aggregate.base import Aggregator
from neuron_port.check.aggregate.findings import rule_message, runtime_finding
from neuron_port.check.events import DistributedEvent
from neuron_port.check.sites import SiteKey, SiteMapper, UserSite, site_json, site_key
from neuron_port.results import Finding


@dataclass(frozen=True)
class DistributedEntry:
    op: str  # the collective, or the event for setup events (process_group)
    event: Optional[str]  # process_group | collective | unsupported
    site: Optional[UserSite]
    count: int
    bytes: int
    ranks: tuple[int, ...]
    error: Optional[str]  # violations only
    message: Optional[str]
    action: Optional[str]
    group_size: Optional[int] = None  # of the group (a fake world's N: the job's, not the processes')

    def to_json(self) -> dict[str, Any]:
        out = {"op": self.op, "event": self.event, "site": site_json(self.site), "count": self.count,
               "bytes": self.bytes, "ranks": list(self.ranks), "error": self.error, "message": self.message,
               "action": self.action}
        if self.group_size is not None:
            out["group_size"] = self.group_size
        return out


@dataclass
class _OpAtSite:
    first: DistributedEvent  # the first process to report it gives event, error, message and action
    name: str
    site: Optional[UserSite]
    count: int = 0
    bytes: int = 0
    ranks: set[Optional[int]] = field(default_factory=set)


class DistributedAggregator(Aggregator):
    EVENTS = {DistributedEvent: "add"}
    SECTION = ("distributed",)

    def __init__(self, mapper: SiteMapper) -> None:
        self.mapper = mapper
        self.by_key: dict[tuple[str, bool, SiteKey], _OpAtSite] = {}

    def add(self, event: DistributedEvent, rank: Optional[int]) -> None:
        site = self.mapper(event.site)
        name = event.op or event.event or "?"  # collectives carry op; setup events only event
        violation = event.event == "unsupported"
        entry = self.by_key.setdefault((name, violation, site_key(site)), _OpAtSite(event, name, site))
        entry.count += event.count
        entry.bytes += event.bytes
        entry.ranks.add(rank)

    def entries(self) -> list[DistributedEntry]:
        """Per (op, violation or not, site), the most calls first."""
        out = []
        for e in sorted(self.by_key.values(), key=lambda e: -e.count):
            violation = e.first.event == "unsupported"
            out.append(DistributedEntry(
                op=e.name, event=e.first.event, site=e.site, count=e.count, bytes=e.bytes,
                ranks=tuple(sorted(r for r in e.ranks if r is not None)),
                error=e.first.error if violation else None, message=e.first.message, action=e.first.action,
                group_size=e.first.group_size))
        return out

    def section(self) -> tuple[tuple[DistributedEntry, ...]]:
        return (tuple(self.entries()),)

    def findings(self) -> list[Finding]:
        return [runtime_finding("NP907", rule_message("NP907", message=d.message or d.error), d.site)
                for d in self.entries() if d.event == "unsupported"]
