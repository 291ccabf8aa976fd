"""The one registry: every rule class, found by code; selection by code or prefix.

Rule modules are listed here explicitly (no import-time scanning) so the installed wheel and the source
tree see the same set, and a missing module fails loudly.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Iterable, Optional, Sequence

from neuron_port.rules.base import CODE_RE, Rule

RULE_MODULES: tuple[str, ...] = (
    "neuron_port.rules.device_placement",  # NP1xx
    "neuron_port.rules.cuda_api",  # NP2xx
    "neuron_port.rules.mixed_precision",  # NP3xx
    "neuron_port.rules.compile",  # NP4xx
    "neuron_port.rules.distributed",  # NP5xx
    "neuron_port.rules.launch",  # NP520-NP525: launch scripts and configs (neuron_port/launch_configs.py)
    "neuron_port.rules.ecosystem",  # NP6xx
    "neuron_port.rules.no_port",  # NP7xx
    "neuron_port.rules.precision_features",  # NP8xx
    "neuron_port.rules.runtime",  # NP9xx, found by `check` on the simulated device
)

REGISTRY_VERSION = 1  # bump when a rule's behaviour changes (part of the cache key later)


class UnknownCodeError(ValueError):
    pass


def _rule_classes_in(module) -> list[type[Rule]]:
    found = []
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and issubclass(value, Rule)
            and value is not Rule
            and value.__module__ == module.__name__
            and "CODE" in vars(value)
            and not value.__name__.startswith("_")
        ):
            found.append(value)
    return found


@lru_cache(maxsize=None)
def all_rules() -> tuple[type[Rule], ...]:
    rules: dict[str, type[Rule]] = {}
    for name in RULE_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # a family not written yet
                continue
            raise
        for rule in _rule_classes_in(module):
            if rule.CODE in rules:
                raise RuntimeError(f"duplicate rule code {rule.CODE}: {rules[rule.CODE]} and {rule}")
            rules[rule.CODE] = rule
    return tuple(sorted(rules.values(), key=lambda r: r.CODE))


def rule_by_code(code: str) -> type[Rule]:
    code = code.strip().upper()
    for rule in all_rules():
        if rule.CODE == code:
            return rule
    # also accept the kebab-case name
    for rule in all_rules():
        if rule.NAME == code.lower():
            return rule
    raise UnknownCodeError(f"unknown rule {code!r}; `neuron-port rules` lists them")


def _matches(rule: type[Rule], patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        pattern = pattern.strip()
        if pattern.upper() == "ALL" or rule.CODE.startswith(pattern.upper()) or rule.NAME == pattern:
            return True
    return False


def validate_patterns(patterns: Iterable[str]) -> None:
    """Raise UnknownCodeError for a selector that matches no rule code, prefix or name."""
    codes = [r.CODE for r in all_rules()]
    names = {r.NAME for r in all_rules()}
    for pattern in patterns:
        p = pattern.strip()
        if not p:
            continue
        if p.upper() == "ALL" or p in names:
            continue
        if not p.upper().startswith("NP") or not any(c.startswith(p.upper()) for c in codes):
            raise UnknownCodeError(f"{p!r} matches no rule code, prefix or name")


def select_rules(
    select: Optional[Sequence[str]] = None,
    ignore: Optional[Sequence[str]] = None,
    target: str = "neuron",
) -> list[type[Rule]]:
    chosen = []
    for rule in all_rules():
        if select and not _matches(rule, select):
            continue
        if ignore and _matches(rule, ignore):
            continue
        if target not in rule.TARGETS:
            continue
        chosen.append(rule)
    return chosen


def check_rule_metadata(rule: type[Rule]) -> list[str]:
    """Problems with a rule's registry entry (used by the tests and `neuron-port rules --check`)."""
    from neuron_port.rules.base import DOC_SECTIONS, EFFORTS, FIX_SAFETIES, NAME_RE, SEVERITIES

    problems = []
    if not CODE_RE.match(getattr(rule, "CODE", "")):
        problems.append(f"bad code {getattr(rule, 'CODE', None)!r}")
    if not NAME_RE.match(getattr(rule, "NAME", "")):
        problems.append(f"bad name {getattr(rule, 'NAME', None)!r}")
    if getattr(rule, "SEVERITY", None) not in SEVERITIES:
        problems.append("bad severity")
    if getattr(rule, "FIX", None) not in FIX_SAFETIES:
        problems.append("bad fix safety")
    if rule.FIX == "none" and rule.EFFORT not in EFFORTS:
        problems.append("report-only rule needs an effort")
    if not getattr(rule, "MESSAGE", ""):
        problems.append("no message")
    docs = rule.docs()
    for section in DOC_SECTIONS:
        if section not in docs:
            problems.append(f"docs lack {section!r}")
    if not rule.VALID:
        problems.append("no valid example")
    if not rule.INVALID:
        problems.append("no invalid example")
    return problems
