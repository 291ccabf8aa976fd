"""The pre-filter: one compiled regular expression, made of the selected rules' TRIGGERS, that a file's
text must match somewhere before it is parsed. A file it rejects cannot produce a finding, so most files
of a project stop here, without LibCST or a single rule module being imported.

The patterns come from the registry's index (``registry.rule_index``: the generated
``rules/triggers_generated.py`` while it is up to date with the rule sources), not from the rule classes.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Iterable, Optional, Pattern

from neuron_port.rules.registry import rule_index

# NEURON_PORT_PREFILTER=off: every selected rule runs on every file (slow). For checking that the
# pre-filter loses no finding (tests/rewrite/test_prefilter.py, bench/rewrite/bench_rewrite.py).
ENV_SWITCH = "NEURON_PORT_PREFILTER"
DOCTEST_PROMPT = re.compile(r">>>|\.\.\.(?:[ \t]|\r?$)", re.MULTILINE)


def split_first(pattern: str) -> tuple[str, str]:
    """(the literal character a TRIGGERS pattern starts with, the rest). Raises ValueError for a pattern
    that breaks the declaration rules of rules/spec.py (PythonRule.TRIGGERS)."""
    if pattern[:1] == "\\" and len(pattern) > 1 and not pattern[1].isalnum():
        head, rest = pattern[:2], pattern[2:]
    elif pattern and pattern[0] not in ".^$*+?{}[]()|\\":
        head, rest = pattern[0], pattern[1:]
    else:
        raise ValueError(f"trigger {pattern!r} must start with a literal character")
    if _has_top_level_bar(pattern):
        raise ValueError(f"trigger {pattern!r}: put alternatives in a group or in separate triggers")
    return head, rest


def _has_top_level_bar(pattern: str) -> bool:
    depth, in_class, i = 0, False, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return True
        i += 1
    return False


def combine(patterns: Iterable[str]) -> Optional[Pattern[str]]:
    """One regular expression matching where any of ``patterns`` matches; None for no patterns (then no
    file can match). The patterns are grouped by their first character, so every branch of the result
    starts with a literal: the regex engine then jumps from one such character to the next instead of
    trying each pattern at each position (several times faster on real code)."""
    groups: dict[str, list[str]] = {}
    for pattern in sorted(set(patterns)):
        head, rest = split_first(pattern)
        groups.setdefault(head, []).append(rest)
    if not groups:
        return None
    branches = [head if "" in rests else f"{head}(?:{'|'.join(rests)})" for head, rests in sorted(groups.items())]
    return re.compile("|".join(branches), re.MULTILINE)


@lru_cache(maxsize=None)
def pattern_for(codes: tuple[str, ...], kind: str = "python") -> Optional[Pattern[str]]:
    """The pre-filter of the rules of ``kind`` among ``codes``."""
    wanted = set(codes)
    return combine(t for entry in rule_index() if entry.code in wanted and entry.kind == kind
                   for t in entry.triggers)


def line_pattern() -> Optional[Pattern[str]]:
    """The pre-filter of launch scripts and configs: the TRIGGERS of every line rule (selected or not, so
    a file's result does not depend on the selection's pre-filter)."""
    return pattern_for(tuple(entry.code for entry in rule_index()), kind="line")


@lru_cache(maxsize=None)
def rule_pattern(triggers: tuple[str, ...]) -> Optional[Pattern[str]]:
    """One rule's own pre-filter (the engine re-checks each rule on each pass's text)."""
    return combine(triggers)


_REGEX_SYNTAX = ".^$*+?{}[]()|\\"


@lru_cache(maxsize=None)
def literal_prefix(trigger: str) -> str:
    """The literal text every match of the TRIGGERS pattern ``trigger`` starts with (``.cuda`` for
    ``\\.cuda\\b``). A character that a quantifier may repeat zero times (``?``, ``*``, ``{``) ends it
    before that character (``""`` when that is the first one: it then proves nothing)."""
    prefix, i = "", 0
    while i < len(trigger):
        if trigger[i] == "\\" and i + 1 < len(trigger) and not trigger[i + 1].isalnum():
            char, width = trigger[i + 1], 2
        elif trigger[i] not in _REGEX_SYNTAX:
            char, width = trigger[i], 1
        else:
            break
        if i + width < len(trigger) and trigger[i + width] in "?*{":
            break
        prefix += char
        i += width
    return prefix


def may_occur(text: str, triggers: Iterable[str], present: dict[str, bool]) -> bool:
    """False when no trigger's literal prefix is in ``text`` (then none of them can match): a substring
    search, much cheaper than compiling and running each rule's pattern over a long file. ``present``
    keeps the answers for ``text`` (rules share triggers)."""
    for trigger in triggers:
        literal = literal_prefix(trigger)
        found = present.get(literal)
        if found is None:
            found = present[literal] = literal in text
        if found:
            return True
    return False


def could_match(text: str, pattern: Optional[Pattern[str]]) -> bool:
    """False when no rule behind ``pattern`` can report anything in ``text``. A match on a doctest line
    does not count: one that starts with ``>>>`` or ``...`` and a space (or nothing) after the indentation
    is inside a string (Python code never starts a line so, bar an Ellipsis continuing a bracketed
    expression with ``... ,``-style spacing), and library docstrings are full of
    ``>>> model = AutoModel.from_pretrained(...)``."""
    if pattern is None:
        return False
    if os.environ.get(ENV_SWITCH) == "off":
        return True
    position = 0
    while True:
        found = pattern.search(text, position)
        if found is None:
            return False
        line_start = text.rfind("\n", 0, found.start()) + 1
        if not DOCTEST_PROMPT.match(text, line_start + _indent(text, line_start)):
            return True
        end = text.find("\n", found.end())
        if end < 0:
            return False
        position = end + 1


def _indent(text: str, start: int) -> int:
    """Columns of spaces and tabs at ``start``."""
    n = 0
    while start + n < len(text) and text[start + n] in " \t":
        n += 1
    return n


def codes_of_kind(codes: Iterable[str], kind: str) -> tuple[str, ...]:
    kinds = {entry.code: entry.kind for entry in rule_index()}
    return tuple(code for code in codes if kinds.get(code) == kind)
