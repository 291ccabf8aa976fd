"""``neff_cache`` events: NEFF cache hits and misses summed over processes (eager signatures and
compiled graphs). Without such events the process summaries' eager compiles count as misses and their
eager cache hits as hits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from neuron_port.check.aggregate.base import Aggregator
from neuron_port.check.events import NeffCacheCounts, NeffCacheEvent, SummaryEvent
from neuron_port.check.sites import SiteMapper


@dataclass(frozen=True)
class NeffCacheTotals:
    hits: int
    misses: int
    eager: Optional[NeffCacheCounts] = None  # None: no event had the part
    compiled: Optional[NeffCacheCounts] = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"hits": self.hits, "misses": self.misses}
        for name, part in (("eager", self.eager), ("compiled", self.compiled)):
            if part is not None:
                out[name] = {"hits": part.hits, "misses": part.misses}
        return out


def _add(total: Optional[NeffCacheCounts], part: Optional[NeffCacheCounts]) -> Optional[NeffCacheCounts]:
    if part is None:
        return total
    total = total or NeffCacheCounts()
    return NeffCacheCounts(hits=total.hits + part.hits, misses=total.misses + part.misses)


class NeffCacheAggregator(Aggregator):
    EVENTS = {NeffCacheEvent: "add"}
    SECTION = ("neff_cache",)

    def __init__(self, mapper: Optional[SiteMapper] = None) -> None:
        super().__init__(mapper)
        self.hits = 0
        self.misses = 0
        self.eager: Optional[NeffCacheCounts] = None
        self.compiled: Optional[NeffCacheCounts] = None
        self.summaries: list[SummaryEvent] = []

    def add(self, event: NeffCacheEvent, rank: Optional[int]) -> None:
        self.hits += event.hits
        self.misses += event.misses
        self.eager = _add(self.eager, event.eager)
        self.compiled = _add(self.compiled, event.compiled)

    def add_summary(self, summary: Optional[SummaryEvent]) -> None:
        if summary is not None:
            self.summaries.append(summary)

    start_process = add_summary  # each process's summary: its eager compiles and cache hits

    def totals(self) -> NeffCacheTotals:
        hits, misses = self.hits, self.misses
        if not hits and not misses:
            misses = sum(s.eager_compiles for s in self.summaries)
            hits = sum(s.eager_cache_hits for s in self.summaries)
        return NeffCacheTotals(hits=hits, misses=misses, eager=self.eager, compiled=self.compiled)

    def section(self) -> tuple[NeffCacheTotals]:
        return (self.totals(),)
