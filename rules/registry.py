"""The one registry: every rule class, found by code; selection by code, prefix or name.

Each family of ``families.FAMILIES`` is a package under ``rules/`` (``rules/device_placement/`` ...);
every public rule class defined in one of its modules is registered. Adding a rule is one class in one
module of its family, with its docs and examples: nothing else lists it. The families themselves are
listed (not scanned), so a missing family fails loudly, and the installed wheel and the source tree see
the same set.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pkgutil
import types
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Iterable, Iterator, NamedTuple, Optional, Sequence

from neuron_port.rules.families import FAMILIES

if TYPE_CHECKING:  # pragma: no cover
    from neuron_port.rules.spec import RuleSpec

# The spec (and so LibCST) and the family packages are imported only when a rule class is needed: the
# selection and the pre-filter work from the rule index (rule_index), so a run over files that no rule
# can match never loads them.

REGISTRY_VERSION = 1  # bump when a rule's behaviour changes (part of the cache key)
GENERATED_INDEX = "triggers_generated.py"  # written by scripts/generate_triggers.py


class RuleEntry(NamedTuple):
    """What the selection and the pre-filter need of a rule, without importing it."""

    code: str
    name: str
    kind: str  # python | line | runtime
    targets: tuple[str, ...]
    triggers: tuple[str, ...]  # regular expressions (rules/spec.py, PythonRule.TRIGGERS)


def rules_folder() -> Path:
    return Path(__file__).resolve().parent


def rule_sources_hash(folder: Optional[Path] = None) -> str:
    """SHA-256 over every ``.py`` file of the registry except the generated index itself, in the order of
    their paths' parts (found with os.scandir: every run asks, and Path.rglob cost twice the hashing)."""
    found: list[tuple[list[str], str]] = []

    def scan(path: str, parts: list[str]) -> None:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=True):
                    if entry.name != "__pycache__":
                        scan(entry.path, [*parts, entry.name])
                elif entry.name.endswith(".py"):
                    found.append(([*parts, entry.name], entry.path))

    scan(str(folder or rules_folder()), [])
    h = hashlib.sha256()
    for parts, path in sorted(found):
        relative = "/".join(parts)
        if relative == GENERATED_INDEX:
            continue
        with open(path, "rb") as handle:
            h.update(relative.encode() + b"\0" + handle.read() + b"\0")
    return h.hexdigest()


def entries_from_rules(rules: Iterable[type["RuleSpec"]]) -> tuple[RuleEntry, ...]:
    """The index made from imported rule classes (what the generator writes)."""
    return tuple(RuleEntry(rule.CODE, rule.NAME, rule.KIND, tuple(rule.TARGETS), tuple(getattr(rule, "TRIGGERS", ())))
                 for rule in sorted(rules, key=lambda r: r.CODE))


@lru_cache(maxsize=None)
def _generated_index() -> Optional[ModuleType]:
    """rules/triggers_generated.py while it matches the rule sources (it records their hash), else None."""
    from neuron_port.rules import triggers_generated

    return triggers_generated if triggers_generated.RULE_SOURCES_SHA256 == rule_sources_hash() else None


@lru_cache(maxsize=None)
def rule_index() -> tuple[RuleEntry, ...]:
    """Every rule as a RuleEntry: from the generated index while it matches the rule sources, else from
    the rules themselves (imports them all: a stale index costs time, never a finding)."""
    generated = _generated_index()
    if generated is not None:
        return tuple(RuleEntry(*row) for row in generated.RULES)
    return entries_from_rules(all_rules())


class RuleRef:
    """A rule as its index entry has it (CODE, KIND, TRIGGERS), for the engine to decide from its triggers
    whether it runs on a text before its module is imported; ``load()`` imports that module alone and
    gives the rule class (what ``rule_by_code`` gives)."""

    __slots__ = ("CODE", "KIND", "TRIGGERS", "module")

    def __init__(self, entry: RuleEntry, module: str) -> None:
        self.CODE, self.KIND, self.TRIGGERS, self.module = entry.code, entry.kind, entry.triggers, module

    def load(self) -> type["RuleSpec"]:
        if not all_rules.cache_info().currsize:  # (once every rule is imported, the registry has them)
            for rule in _rule_classes_in(importlib.import_module(f"neuron_port.rules.{self.module}")):
                if rule.CODE == self.CODE:
                    return rule
        return rule_by_code(self.CODE)


def index_table(name: str) -> Optional[dict]:
    """A table of the generated index (``RULE_MODULES``, ``REQUIRED_TEXTS``) while it is up to date, else None."""
    return getattr(_generated_index(), name, None)


def rule_refs(codes: Sequence[str]) -> Optional[tuple[RuleRef, ...]]:
    """The rules of ``codes`` (in that order) as RuleRefs, from the generated index; None while it is
    stale or does not name a rule's module (then the rules are imported as classes)."""
    modules = index_table("RULE_MODULES")
    if modules is None or not all(code in modules for code in codes):
        return None
    entries = {entry.code: entry for entry in rule_index()}
    return tuple(RuleRef(entries[code], modules[code]) for code in codes)


class UnknownCodeError(ValueError):
    pass


def _family_modules(family_package: str) -> Iterator[ModuleType]:
    module = importlib.import_module(f"neuron_port.rules.{family_package}")
    yield module
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{module.__name__}.{info.name}")


def _rule_classes_in(module: ModuleType) -> list[type["RuleSpec"]]:
    from neuron_port.rules.spec import RuleSpec

    # On Python 3.10 a generic alias such as ``tuple[str, ...]`` passes isinstance(value, type) but
    # issubclass refuses it: skip aliases before asking.
    return [
        value for value in vars(module).values()
        if isinstance(value, type) and not isinstance(value, types.GenericAlias) and issubclass(value, RuleSpec)
        and value.__module__ == module.__name__ and "CODE" in vars(value) and not value.__name__.startswith("_")
    ]


@lru_cache(maxsize=None)
def all_rules() -> tuple[type["RuleSpec"], ...]:
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


def rules_of_kind(kind: str) -> tuple[type["RuleSpec"], ...]:
    return tuple(rule for rule in all_rules() if rule.KIND == kind)


def rule_by_code(code: str) -> type["RuleSpec"]:
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
    codes = [r.code for r in rule_index()]
    names = {r.name for r in rule_index()}
    for pattern in patterns:
        p = pattern.strip()
        if not p:
            continue
        if p.upper() == "ALL" or p in names:
            continue
        if not p.upper().startswith("NP") or not any(c.startswith(p.upper()) for c in codes):
            raise UnknownCodeError(f"{p!r} matches no rule code, prefix or name")


def select_codes(
    select: Optional[Sequence[str]] = None,
    ignore: Optional[Sequence[str]] = None,
    target: str = "neuron",
) -> list[str]:
    """The codes of the static rules (python and line kinds) that run for these selectors and target,
    from the index (no rule is imported)."""
    return [
        rule.code for rule in rule_index()
        if rule.kind != "runtime" and target in rule.targets
        and is_selected(rule.code, select or (), ignore or (), rule.name)
    ]


def select_rules(
    select: Optional[Sequence[str]] = None,
    ignore: Optional[Sequence[str]] = None,
    target: str = "neuron",
) -> list[type["RuleSpec"]]:
    """The static rules (python and line kinds) that run for these selectors and target."""
    return [rule_by_code(code) for code in select_codes(select, ignore, target)]


def check_rule_metadata(rule: type["RuleSpec"]) -> list[str]:
    """Problems with a rule's registry entry (used by the tests)."""
    from neuron_port.rules.spec import (
        CODE_RE, DOC_SECTIONS, EFFORTS, FIX_AVAILABILITIES, FIX_SAFETIES, KINDS, NAME_RE, SEVERITIES)

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
