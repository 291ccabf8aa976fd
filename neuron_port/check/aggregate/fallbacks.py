"""``fallback`` events: ops that would run on the CPU on Trainium, merged over processes per op and
site (NP901, one finding per op and site)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from neuron_port.check.aggregate.base import Aggregator
from neuron_port.check.aggregate.findings import rule_message, runtime_finding
from neuron_port.check.events import FallbackEvent
from neuron_port.check.sites import SiteKey, SiteMapper, UserSite, site_key
from neuron_port.results import Finding


@dataclass(frozen=True)
class FallbackSiteEntry:
    site: Optional[UserSite]
    calls: int
    ranks: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {**(self.site.to_json() if self.site else {}), "calls": self.calls, "ranks": list(self.ranks)}


@dataclass(frozen=True)
class FallbackEntry:
    op: str
    calls: int
    sites: tuple[FallbackSiteEntry, ...]  # most calls first

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "calls": self.calls, "sites": [s.to_json() for s in self.sites]}


@dataclass
class _SiteCalls:
    site: Optional[UserSite]
    calls: int = 0
    ranks: set[Optional[int]] = field(default_factory=set)


@dataclass
class _OpFallbacks:
    calls: int = 0
    sites: dict[SiteKey, _SiteCalls] = field(default_factory=dict)


class FallbackAggregator(Aggregator):
    EVENTS = {FallbackEvent: "add"}
    SECTION = ("fallbacks",)

    def __init__(self, mapper: SiteMapper) -> None:
        self.mapper = mapper
        self.by_op: dict[str, _OpFallbacks] = {}

    def add(self, event: FallbackEvent, rank: Optional[int]) -> None:
        op = self.by_op.setdefault(event.op, _OpFallbacks())
        op.calls += event.calls
        for fallback_site in event.sites:
            site = self.mapper(fallback_site.site)
            slot = op.sites.setdefault(site_key(site), _SiteCalls(site))
            slot.calls += fallback_site.calls
            slot.ranks.add(rank)

    def entries(self) -> list[FallbackEntry]:
        """Ops with the most calls first."""
        out = []
        for name, op in sorted(self.by_op.items(), key=lambda item: -item[1].calls):
            sites = sorted(op.sites.values(), key=lambda s: -s.calls)
            out.append(FallbackEntry(op=name, calls=op.calls, sites=tuple(
                FallbackSiteEntry(site=s.site, calls=s.calls, ranks=tuple(sorted(r for r in s.ranks if r is not None)))
                for s in sites)))
        return out

    def section(self) -> tuple[tuple[FallbackEntry, ...]]:
        return (tuple(self.entries()),)

    def findings(self) -> list[Finding]:
        return [runtime_finding("NP901", rule_message("NP901", op=entry.op, calls=s.calls), s.site)
                for entry in self.entries() for s in entry.sites]
