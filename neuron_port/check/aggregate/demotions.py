"""``demotion`` events: float64 computed as float32 on Trainium, per op and site (NP905, one finding per
site), and the int64 aggregate per op (indices are int64 everywhere, so it stays a count)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from neuron_port.check.aggregate.base import Aggregator
from neuron_port.check.aggregate.findings import rule_message, runtime_finding
from neuron_port.check.events import DemotionEvent
from neuron_port.check.sites import SiteKey, SiteMapper, UserSite, site_json, site_key
from neuron_port.results import Finding

MAX_INT64_SITES = 5


@dataclass(frozen=True)
class Float64DemotionEntry:
    dtype: str
    computed_as: str
    op: str
    calls: int
    site: Optional[UserSite]

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "computed_as": self.computed_as, "op": self.op, "calls": self.calls,
                "site": site_json(self.site)}


@dataclass(frozen=True)
class Int64DemotionEntry:
    op: str
    calls: int
    sites: tuple[UserSite, ...]
    dtype: str = "int64"

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "op": self.op, "calls": self.calls, "sites": [s.to_json() for s in self.sites]}


DemotionEntry = Union[Float64DemotionEntry, Int64DemotionEntry]


@dataclass
class _Float64AtSite:
    dtype: str
    computed_as: str
    op: str
    site: Optional[UserSite]
    calls: int = 0


@dataclass
class _Int64Op:
    calls: int = 0
    sites: dict[SiteKey, UserSite] = field(default_factory=dict)  # a later site with the same line replaces it


class DemotionAggregator(Aggregator):
    EVENTS = {DemotionEvent: "add"}
    SECTION = ("demotions",)

    def __init__(self, mapper: SiteMapper) -> None:
        self.mapper = mapper
        self.float64: dict[tuple[str, SiteKey], _Float64AtSite] = {}
        self.int64: dict[str, _Int64Op] = {}

    def add(self, event: DemotionEvent, rank: Optional[int]) -> None:
        if event.is_int64_aggregate:
            aggregate = self.int64.setdefault(event.op, _Int64Op())
            aggregate.calls += event.calls
            for raw in event.sites[:MAX_INT64_SITES]:
                site = self.mapper(raw)
                if site is not None:
                    aggregate.sites[site.key] = site
            return
        site = self.mapper(event.site)
        entry = self.float64.setdefault((event.op, site_key(site)), _Float64AtSite(
            dtype="float64" if event.dtype is None else event.dtype,
            computed_as="float32" if event.computed_as is None else event.computed_as, op=event.op, site=site))
        entry.calls += event.calls

    def float64_entries(self) -> list[Float64DemotionEntry]:
        return [Float64DemotionEntry(dtype=e.dtype, computed_as=e.computed_as, op=e.op, calls=e.calls, site=e.site)
                for e in sorted(self.float64.values(), key=lambda e: -e.calls)]

    def entries(self) -> list[DemotionEntry]:
        """float64 per op and site, then int64 per op; the most calls first."""
        int64 = [Int64DemotionEntry(op=op, calls=e.calls, sites=tuple(e.sites.values()))
                 for op, e in sorted(self.int64.items(), key=lambda item: -item[1].calls)]
        return [*self.float64_entries(), *int64]

    def section(self) -> tuple[tuple[DemotionEntry, ...]]:
        return (tuple(self.entries()),)

    def findings(self) -> list[Finding]:
        """One NP905 per site, naming every op demoted there."""
        by_site: dict[SiteKey, list[Float64DemotionEntry]] = defaultdict(list)
        for demotion in self.float64_entries():
            by_site[site_key(demotion.site)].append(demotion)
        out = []
        for items in by_site.values():
            calls = sum(d.calls for d in items)
            ops = ", ".join(sorted({d.op for d in items}))
            out.append(runtime_finding("NP905", rule_message("NP905", op=ops, calls=calls), items[0].site))
        return out
