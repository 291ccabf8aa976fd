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

from neuron_port.rules.registry import index_table, rule_index

try:
    from re import _parser as _regex_parser  # the parser of Python's own re module (3.11+)
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _regex_parser  # type: ignore[no-redef]

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
    """False when every trigger needs a text that is not in ``text`` (``required_texts``: ``.cuda`` of
    ``\\.cuda\\b``, ``sparse`` of ``import\\b[^\\n]*\\bsparse``, one of ``send`` / ``recv`` of
    ``\\.(?:send|recv)``), so that none of them can match: substring searches, much cheaper than compiling
    and running each rule's pattern over a long file. ``present`` keeps the answers for ``text`` (rules
    share triggers and literals)."""
    for trigger in triggers:
        for alternatives in required_texts(trigger):
            for literal in alternatives:
                found = present.get(literal)
                if found is None:
                    found = present[literal] = literal in text
                if found:
                    break
            else:
                break  # none of this trigger's alternatives is in the text
        else:
            return True
    return False


@lru_cache(maxsize=None)
def required_texts(trigger: str) -> tuple[tuple[str, ...], ...]:
    """``computed_required_texts(trigger)``, read from the generated rule index when it has it (the parse
    of every trigger costs a few milliseconds at every start)."""
    table = index_table("REQUIRED_TEXTS")
    found = table.get(trigger) if table is not None else None
    return found if found is not None else computed_required_texts(trigger)


def computed_required_texts(trigger: str) -> tuple[tuple[str, ...], ...]:
    """What every match of the TRIGGERS pattern ``trigger`` contains: groups of literal texts, each group
    one text or the alternatives of an alternation (a match contains one of them), longest first. Read
    from the sequence the pattern must match, in Python's own parse of it: a run of literal characters
    (entering groups) is one text; an alternation whose every branch needs a text gives the group of
    the longest text of each; anything else (a class, a repeat, an assertion) ends a run. With inline
    flags, only the literal prefix; empty when nothing is certain."""
    try:
        parsed = _regex_parser.parse(trigger)
    except Exception:  # noqa: BLE001 - an invalid pattern fails where it is compiled, not here
        parsed = None
    groups = None
    if parsed is not None and not parsed.state.flags & ~_regex_parser.SRE_FLAG_UNICODE:
        groups = _needed(parsed)
    if groups is None:
        groups = [(literal_prefix(trigger),)]
    kept = [group for group in dict.fromkeys(groups) if all(group)]
    return tuple(sorted(kept, key=lambda group: -min(map(len, group))))


def _needed(items) -> Optional[list[tuple[str, ...]]]:
    """The groups a parsed sequence needs (required_texts), or None for what this does not read."""
    groups: list[tuple[str, ...]] = []
    run: list[str] = []

    def end_run() -> None:
        if run:
            groups.append(("".join(run),))
            run.clear()

    for op, value in items:
        if op is _regex_parser.LITERAL:
            run.append(chr(value))
        elif op is _regex_parser.SUBPATTERN:
            _group, add_flags, del_flags, inner = value
            if add_flags or del_flags:
                return None
            inner_groups = _needed(inner)
            if inner_groups is None:
                return None
            if len(inner) == sum(1 for op, _ in inner if op is _regex_parser.LITERAL):
                run.extend(chr(v) for _, v in inner)  # a group of literals continues the run
            else:
                end_run()
                groups.extend(inner_groups)
        elif op is _regex_parser.BRANCH:
            end_run()
            best = []
            for branch in value[1]:
                needed = _needed(branch)
                if not needed:
                    best = []
                    break
                best.append(max((text for group in needed if len(group) == 1 for text in group),
                                key=len, default=""))
            if best and all(best):
                groups.append(tuple(dict.fromkeys(best)))
        else:
            end_run()
    end_run()
    return groups


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
