"""``compile`` events of torch.compile(backend="neuron"), merged per call site (which compile, recompile
and recompile-limit events share): recompiles (NP903), the recompile limit (NP904) and compile
failures (NP908)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from neuron_port.check.aggregate.base import Aggregator
from neuron_port.check.aggregate.findings import rule_message, runtime_finding
from neuron_port.check.events import CompileEvent, Site
from neuron_port.check.sites import SiteKey, SiteMapper, UserSite, site_json, site_key
from neuron_port.results import Finding

MAX_SHAPES = 10  # input shapes kept per call site
FAILED_STATES = ("failed", "fallback", "rejected")
Shape = Optional[tuple[Union[int, str], ...]]


@dataclass(frozen=True)
class CompileFailure:
    status: str  # failed | fallback | rejected
    reason: Optional[str]
    action: str  # "fell back to eager" | "raised"

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "action": self.action}


@dataclass(frozen=True)
class CompileEntry:
    function: str
    definition: Optional[UserSite]  # where the compiled function is defined
    site: Optional[UserSite]  # the call that compiled it
    count: int  # graph compiles (recompiles included)
    reasons: tuple[str, ...]
    recompile_limit_hits: int
    failures: tuple[CompileFailure, ...]
    shapes: tuple[tuple[Shape, ...], ...]  # the input shapes of the first compiles
    ranks: tuple[int, ...]
    graphs: tuple[str, ...] = ()  # the distinct graphs compiled here (forward, backward, after graph breaks)

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function, "definition": site_json(self.definition), "site": site_json(self.site),
            "count": self.count, "reasons": list(self.reasons), "recompile_limit_hits": self.recompile_limit_hits,
            "failures": [f.to_json() for f in self.failures],
            "shapes": [[None if s is None else list(s) for s in inputs] for inputs in self.shapes],
            "ranks": list(self.ranks), "graphs": list(self.graphs),
        }


@dataclass
class _CallSite:
    site: Optional[UserSite]
    function: Optional[str] = None
    definition: Optional[UserSite] = None
    count: int = 0
    reasons: list[str] = field(default_factory=list)
    recompile_limit_hits: int = 0
    failures: list[CompileFailure] = field(default_factory=list)
    shapes: list[tuple[Shape, ...]] = field(default_factory=list)
    ranks: set[Optional[int]] = field(default_factory=set)
    graphs: set[str] = field(default_factory=set)


class CompileAggregator(Aggregator):
    EVENTS = {CompileEvent: "add"}
    SECTION = ("compiles",)

    def __init__(self, mapper: SiteMapper) -> None:
        self.mapper = mapper
        self.by_site: dict[SiteKey, _CallSite] = {}

    def add(self, event: CompileEvent, rank: Optional[int]) -> None:
        site = self.mapper(event.site)
        entry = self.by_site.setdefault(site_key(site), _CallSite(site))
        entry.ranks.add(rank)
        self._add_function(entry, event)
        if (event.event or "compile") == "recompile_limit":
            entry.recompile_limit_hits += 1
            if event.reason:
                entry.reasons.append(event.reason)
            return
        if event.status in FAILED_STATES:
            action = "fell back to eager" if event.status == "fallback" else "raised"
            entry.failures.append(CompileFailure(status=event.status, reason=event.message or event.error,
                                                 action=action))
            return
        entry.count += 1
        # keyed as the estimate keys them (estimate/work.py), so the panel and the estimate count the same graphs
        entry.graphs.update(str(g.get("key")) if isinstance(g, dict) else repr(g) for g in event.graphs)
        if event.reason and event.reason not in entry.reasons:
            entry.reasons.append(event.reason)
        if event.inputs is not None and len(entry.shapes) < MAX_SHAPES:
            entry.shapes.append(tuple(i.shape for i in event.inputs))

    def _add_function(self, entry: _CallSite, event: CompileEvent) -> None:
        function = event.function
        if isinstance(function, str):
            if function and entry.function is None:
                entry.function = function
            return
        if function is None:
            return
        entry.function = function.name or entry.function
        if entry.definition is None and function.file:
            entry.definition = self.mapper(Site(file=function.file, line=function.line or 0,
                                                function=function.name, code=""))

    def entries(self) -> list[CompileEntry]:
        """Per call site, the most compiles first."""
        return [CompileEntry(
            function=e.function or "<compiled function>", definition=e.definition, site=e.site, count=e.count,
            reasons=tuple(e.reasons), recompile_limit_hits=e.recompile_limit_hits, failures=tuple(e.failures),
            shapes=tuple(e.shapes), ranks=tuple(sorted(r for r in e.ranks if r is not None)),
            graphs=tuple(sorted(e.graphs)),
        ) for e in sorted(self.by_site.values(), key=lambda e: -e.count)]

    def section(self) -> tuple[tuple[CompileEntry, ...]]:
        return (tuple(self.entries()),)

    def findings(self) -> list[Finding]:
        out = []
        for entry in self.entries():
            reason = entry.reasons[-1] if entry.reasons else "new input shapes"
            if entry.count > 1:
                out.append(runtime_finding("NP903", rule_message(
                    "NP903", function=entry.function, count=entry.count, reason=reason), entry.site))
            if entry.recompile_limit_hits:
                out.append(runtime_finding("NP904", rule_message(
                    "NP904", function=entry.function, reason=reason), entry.site))
            for failure in entry.failures[:1]:
                out.append(runtime_finding("NP908", rule_message(
                    "NP908", function=entry.function, reason=failure.reason), entry.site))
        return out
