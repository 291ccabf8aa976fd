"""``shape_only`` events of a shape-only run (``check --shape-only``): the values the program read that were
not computed (placeholders) and the ops whose output shape depends on values (size rules), merged over
processes per (event, op, site); NP911 once per line of each. A real run has none: the part is empty."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from neuron_port.check.aggregate.base import Aggregator
from neuron_port.check.aggregate.findings import rule_message, runtime_finding
from neuron_port.check.events import ShapeOnlyEvent
from neuron_port.check.events.records import ShapeOnlyValue
from neuron_port.check.sites import SiteKey, SiteMapper, UserSite, site_json, site_key
from neuron_port.results import Finding
from neuron_port.rules.registry import rule_by_code

Shape = Optional[tuple[Union[int, str], ...]]
EVENTS = ("placeholder", "size_rule")  # other values (a newer simulator's) are not reported


def _shape_json(shape: Shape) -> Optional[list[Union[int, str]]]:
    return None if shape is None else list(shape)


def shape_text(shape: Shape) -> str:
    """``[4, 8]``, as the report's JSON writes it."""
    return "[" + ", ".join(str(s) for s in shape or ()) + "]"


def value_text(value: ShapeOnlyValue, shape: Shape) -> str:
    """What the program got, as Python shows it: ``0``, ``0.0``, ``False``; a copy to the CPU got zeros."""
    if shape is not None:
        return "zeros"
    return "None" if value is None else str(value)


@dataclass(frozen=True)
class PlaceholderEntry:
    op: str
    site: Optional[UserSite]
    value: ShapeOnlyValue  # 0, 0.0, False (a complex placeholder as text)
    shape: Shape  # a copy to the CPU: the shape of the tensor of zeros it gave
    ranks: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "site": site_json(self.site), "value": self.value, "shape": _shape_json(self.shape),
                "ranks": list(self.ranks)}


@dataclass(frozen=True)
class SizeRuleEntry:
    op: str
    site: Optional[UserSite]
    rule: Optional[str]  # upper_bound | site (--size-rule set the size at this line) | even_split
    shape: Shape  # the first output's shape the run used
    upper_bound: Shape  # its shape at the upper bound (every element selected)
    ranks: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "site": site_json(self.site), "rule": self.rule, "shape": _shape_json(self.shape),
                "upper_bound": _shape_json(self.upper_bound), "ranks": list(self.ranks)}


def _sites(entries: tuple[Any, ...]) -> int:
    return len({site_key(e.site) for e in entries})


@dataclass(frozen=True)
class ShapeOnlyPart:
    """The report's ``runtime.shape_only``: every placeholder and size rule, by site."""

    placeholders: tuple[PlaceholderEntry, ...] = ()
    size_rules: tuple[SizeRuleEntry, ...] = ()

    @property
    def placeholder_sites(self) -> int:
        return _sites(self.placeholders)

    @property
    def size_rule_sites(self) -> int:
        return _sites(self.size_rules)

    def to_json(self) -> dict[str, Any]:
        return {"placeholder_sites": self.placeholder_sites, "size_rule_sites": self.size_rule_sites,
                "placeholders": [p.to_json() for p in self.placeholders],
                "size_rules": [s.to_json() for s in self.size_rules]}


@dataclass
class _OpAtSite:
    first: ShapeOnlyEvent  # the first process to report it gives value, shape, rule and upper bound
    site: Optional[UserSite]
    ranks: set[Optional[int]] = field(default_factory=set)


class ShapeOnlyAggregator(Aggregator):
    EVENTS = {ShapeOnlyEvent: "add"}
    SECTION = ("shape_only",)

    def __init__(self, mapper: SiteMapper) -> None:
        self.mapper = mapper
        self.by_key: dict[tuple[str, str, SiteKey], _OpAtSite] = {}

    def add(self, event: ShapeOnlyEvent, rank: Optional[int]) -> None:
        if event.event not in EVENTS:
            return
        site = self.mapper(event.site)
        entry = self.by_key.setdefault((event.event, event.op or "?", site_key(site)), _OpAtSite(event, site))
        entry.ranks.add(rank)

    def _of(self, event: str) -> list[tuple[str, _OpAtSite]]:
        """(op, entry) of one event, by site (in the order first seen within a line)."""
        found = [(op, e) for (kind, op, _), e in self.by_key.items() if kind == event]
        return sorted(found, key=lambda item: site_key(item[1].site))

    @staticmethod
    def _ranks(entry: _OpAtSite) -> tuple[int, ...]:
        return tuple(sorted(r for r in entry.ranks if r is not None))

    def part(self) -> ShapeOnlyPart:
        placeholders = tuple(PlaceholderEntry(op=op, site=e.site, value=e.first.value, shape=e.first.shape,
                                              ranks=self._ranks(e)) for op, e in self._of("placeholder"))
        size_rules = tuple(SizeRuleEntry(op=op, site=e.site, rule=e.first.rule, shape=e.first.shape,
                                         upper_bound=e.first.upper_bound, ranks=self._ranks(e))
                           for op, e in self._of("size_rule"))
        return ShapeOnlyPart(placeholders=placeholders, size_rules=size_rules)

    def section(self) -> tuple[ShapeOnlyPart]:
        return (self.part(),)

    def findings(self) -> list[Finding]:
        """NP911 once per line with a placeholder (the first op read there), then once per line whose size
        is the upper bound (a line that --size-rule set is listed, not reported)."""
        part = self.part()
        out: list[Finding] = []
        seen: set[SiteKey] = set()
        for p in part.placeholders:
            if site_key(p.site) not in seen:
                seen.add(site_key(p.site))
                out.append(runtime_finding("NP911", rule_message(
                    "NP911", op=p.op, value=value_text(p.value, p.shape)), p.site))
        seen.clear()
        rule = rule_by_code("NP911")
        for s in part.size_rules:
            if s.rule != "site" and site_key(s.site) not in seen:
                seen.add(site_key(s.site))
                shape = s.upper_bound if s.upper_bound is not None else s.shape
                if s.rule == "even_split":  # a split of unknown values (a histogram, a router's topk) taken as even
                    message = rule.EVEN_SPLIT_MESSAGE.format(op=s.op, bins=(s.shape or ("?",))[0])
                else:
                    message = rule.SIZE_RULE_MESSAGE.format(op=s.op, shape=shape_text(shape))
                out.append(runtime_finding("NP911", message, s.site))
        return out
