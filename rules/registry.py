"""The one registry: every rule class, found by code; selection by code, prefix or name.

Each family of ``families.FAMILIES`` is a package under ``rules/`` (``rules/device_placement/`` ...);
every public rule class defined in one of its modules is registered. Adding a rule is one class in one
module of its family, with its docs and examples: nothing else lists it. The families themselves are
listed (not scanned), so a missing family fails loudly, and the installed wheel and the source tree see
the same set.
"""

from __future__ import annotations

import importlib
import pkgutil
import types
from functools import lru_cache
from types import ModuleType
from typing import Iterable, Iterator, Optional, Sequence

from neuron_port.rules.families import FAMILIES
from neuron_port.rules.spec import (
    CODE_RE,
    DOC_SECTIONS,
    EFFORTS,
    FIX_AVAILABILITIES,
    FIX_SAFETIES,
    KINDS,
    NAME_RE,
    SEVERITIES,
    RuleSpec,
)

REGISTRY_VERSION = 1  # bump when a rule's behaviour changes (part of the cache key)


class UnknownCodeError(ValueError):
    pass


def _family_modules(family_package: str) -> Iterator[ModuleType]:
    module = importlib.import_module(f"neuron_port.rules.{family_package}")
    yield module
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{module.__name__}.{info.name}")


def _rule_classes_in(module: ModuleType) -> list[type[RuleSpec]]:
    # On Python 3.10 a generic alias such as ``tuple[str, ...]`` passes isinstance(value, type) but
    # issubclass refuses it: skip aliases before asking.
    return [
        value for value in vars(module).values()
        if isinstance(value, type) and not isinstance(value, types.GenericAlias) and issubclass(value, RuleSpec) and value.__module__ == module.__name__
        and "CODE" in vars(value) and not value.__name__.startswith("_")
    ]


@lru_cache(maxsize=None)
def all_rules() -> tuple[type[RuleSpec], ...]:
    rules: dict[str, type[RuleSpec]] = {}
    for family in FAMILIES:
        for module in _family_modules(family.package):
            for rule in _rule_classes_in(module):
                if rule.CODE in rules and rules[rule.CODE] is not rule:
                    raise RuntimeError(f"duplicate rule code {rule.CODE}: {rules[rule.CODE]} and {rule}")
                if not rule.CODE.startswith(family.prefix):
                    raise RuntimeError(f"{rule.CODE} ({rule.__qualname__}) is in the package of the "
                                       f"{family.prefix}xx family ({family.package})")
                rules[rule.CODE] = rule
    return tuple(sorted(rules.values(), key=lambda r: r.CODE))


def rules_of_kind(kind: str) -> tuple[type[RuleSpec], ...]:
    return tuple(rule for rule in all_rules() if rule.KIND == kind)


def rule_by_code(code: str) -> type[RuleSpec]:
    """The rule with this code (NP101) or kebab-case name (cuda-device-string)."""
    wanted = code.strip()
    for rule in all_rules():
        if rule.CODE == wanted.upper() or rule.NAME == wanted.lower():
            return rule
    raise UnknownCodeError(f"unknown rule {code!r}; `neuron-port rules` lists them")


def code_matches(code: str, name: Optional[str], patterns: Iterable[str]) -> bool:
    """True when a selector (ALL, a code, a code prefix such as NP1, or a rule name) covers the code."""
    for pattern in patterns:
        pattern = pattern.strip()
        if pattern.upper() == "ALL" or code.startswith(pattern.upper()) or (name is not None and name == pattern):
            return True
    return False


def is_selected(code: str, select: Sequence[str] = (), ignore: Sequence[str] = (),
                name: Optional[str] = None) -> bool:
    """--select / --ignore for one code (rules and the findings they made alike)."""
    if select and not code_matches(code, name, select):
        return False
    return not (ignore and code_matches(code, name, ignore))


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
) -> list[type[RuleSpec]]:
    """The static rules (python and line kinds) that run for these selectors and target."""
    return [
        rule for rule in all_rules()
        if rule.KIND != "runtime" and target in rule.TARGETS
        and is_selected(rule.CODE, select or (), ignore or (), rule.NAME)
    ]


def check_rule_metadata(rule: type[RuleSpec]) -> list[str]:
    """Problems with a rule's registry entry (used by the tests)."""
    problems = []
    if getattr(rule, "KIND", None) not in KINDS:
        problems.append(f"bad kind {getattr(rule, 'KIND', None)!r}")
    if not CODE_RE.match(getattr(rule, "CODE", "")):
        problems.append(f"bad code {getattr(rule, 'CODE', None)!r}")
    if not NAME_RE.match(getattr(rule, "NAME", "")):
        problems.append(f"bad name {getattr(rule, 'NAME', None)!r}")
    if not getattr(rule, "FAMILY", ""):
        problems.append("no family")
    if getattr(rule, "SEVERITY", None) not in SEVERITIES:
        problems.append("bad severity")
    if getattr(rule, "FIX_AVAILABILITY", None) not in FIX_AVAILABILITIES:
        problems.append("bad fix availability")
    if getattr(rule, "FIX_SAFETY", None) not in FIX_SAFETIES:
        problems.append("bad fix safety")
    if rule.KIND == "runtime" and rule.FIX_AVAILABILITY != "never":
        problems.append("runtime findings have no fix")
    if rule.FIX_AVAILABILITY == "never" and rule.EFFORT not in EFFORTS:
        problems.append("a rule that never fixes needs an effort")
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
