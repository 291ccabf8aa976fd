"""``unsupported`` events: features TorchNeuron does not support, per feature, op and site (NP906)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from neuron_port.check.aggregate.base import Aggregator
from neuron_port.check.aggregate.findings import rule_message, runtime_finding
from neuron_port.check.events import UnsupportedEvent
from neuron_port.check.sites import SiteKey, SiteMapper, UserSite, site_json, site_key
from neuron_port.results import Finding


# What happens on Trainium decides how bad it is: a feature that raises fails the run (the rule's error);
# one that TorchNeuron decomposes still runs natively, one that falls back to the CPU runs slower, and one
# whose behaviour no source states is a warning until confirmed.
SEVERITY_BY_ACTION = {"decomposed": "info", "cpu_fallback": "warning", "unconfirmed": "warning"}


@dataclass(frozen=True)
class UnsupportedEntry:
    feature: Optional[str]
    op: Optional[str]
    message: Optional[str]
    error: Optional[str]
    action: Optional[str]  # raised | recorded | decomposed | cpu_fallback | unconfirmed
    count: int
    site: Optional[UserSite]

    def to_json(self) -> dict[str, Any]:
        return {"feature": self.feature, "op": self.op, "message": self.message, "error": self.error,
                "action": self.action, "count": self.count, "site": site_json(self.site)}


@dataclass
class _FeatureAtSite:
    first: UnsupportedEvent  # the first process to report it gives message, error and action
    site: Optional[UserSite]
    count: int = 0


class UnsupportedAggregator(Aggregator):
    EVENTS = {UnsupportedEvent: "add"}
    SECTION = ("unsupported",)

    def __init__(self, mapper: SiteMapper) -> None:
        self.mapper = mapper
        self.by_key: dict[tuple[Optional[str], Optional[str], SiteKey], _FeatureAtSite] = {}

    def add(self, event: UnsupportedEvent, rank: Optional[int]) -> None:
        site = self.mapper(event.site)
        entry = self.by_key.setdefault((event.feature, event.op, site_key(site)), _FeatureAtSite(event, site))
        entry.count += event.count

    def entries(self) -> list[UnsupportedEntry]:
        """Per feature, op and site, the most hits first."""
        return [UnsupportedEntry(feature=e.first.feature, op=e.first.op, message=e.first.message,
                                 error=e.first.error, action=e.first.action, count=e.count, site=e.site)
                for e in sorted(self.by_key.values(), key=lambda e: -e.count)]

    def section(self) -> tuple[tuple[UnsupportedEntry, ...]]:
        return (tuple(self.entries()),)

    def findings(self) -> list[Finding]:
        return [runtime_finding("NP906", rule_message("NP906", feature=u.feature, message=u.message), u.site,
                                severity=SEVERITY_BY_ACTION.get(u.action or ""))
                for u in self.entries()]
