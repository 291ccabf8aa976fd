"""Suppression comments: ``# neuron-port: ignore`` (every code) or ``# neuron-port: ignore[NP101, NP5]``
(codes or prefixes, separated by commas) on a line hides the findings that start or end there. Python
files and launch files read them the same way.

A malformed one (``ignore[NP101;NP102]``, ``ignore[*]``, ``ignore[]``, an unclosed ``ignore[``, codes
after ``ignore`` without brackets) suppresses nothing: read as a blanket ``ignore`` it would hide every
finding on the line, which is the opposite of what its author asked for. The rule NP799
(rules/no_port/suppressions.py) reports it, and codes in a valid one that name no rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Collection, Optional, Sequence

# what starts a directive; the rest of the comment is parsed by parse_directive
DIRECTIVE_RE = re.compile(r"#\s*neuron-port:\s*ignore")
CODE_LIST_RE = re.compile(r"\[\s*(?P<codes>[A-Za-z][A-Za-z0-9_-]*(?:\s*,\s*[A-Za-z][A-Za-z0-9_-]*)*)\s*,?\s*\]")

# line number -> the suppressed codes or prefixes; None means every code
Suppressions = dict[int, Optional[frozenset[str]]]
NOT_SUPPRESSED = object()
NOTHING: frozenset[str] = frozenset()  # what a malformed directive suppresses


@dataclass(frozen=True)
class Directive:
    """One ``# neuron-port: ignore...`` comment: the codes it names (in the order written; None for a bare
    ``ignore``, which suppresses every code) or, when it is malformed, why (it then suppresses nothing)."""

    column: int  # 0-based column of its "#"
    text: str  # the directive as written
    written: Optional[tuple[str, ...]]
    problem: Optional[str] = None

    @property
    def codes(self) -> Optional[frozenset[str]]:
        """What it suppresses: None = every code."""
        if self.problem is not None:
            return NOTHING
        return None if self.written is None else frozenset(self.written)


BRACKETS_HINT = "write `# neuron-port: ignore[NP101, NP102]`"


def parse_directive(line: str) -> Optional[Directive]:
    """The suppression directive on a line, or None when it has none."""
    if "neuron-port" not in line:
        return None
    match = DIRECTIVE_RE.search(line)
    if not match:
        return None
    column, head, rest = match.start(), match.group(0), line[match.end():]
    gap = len(rest) - len(rest.lstrip())
    after = rest[gap:]
    if after.startswith("["):
        codes = CODE_LIST_RE.match(after)
        if codes is not None:
            written = tuple(dict.fromkeys(c.strip().upper() for c in codes.group("codes").split(",")))
            return Directive(column, head + rest[:gap + codes.end()], written)
        closing = after.find("]")
        if closing < 0:
            return Directive(column, line[column:].rstrip(), (), f"its `[` is never closed; {BRACKETS_HINT}")
        return Directive(column, head + rest[:gap + closing + 1], (),
                         f"its brackets hold no list of rule codes; {BRACKETS_HINT}")
    if rest[:1] and (rest[0].isalnum() or rest[0] in "_-:="):
        # `ignore:NP101`, `ignore=NP101`, `ignored`: not the bare directive
        word = re.match(r"\S*", rest).group(0)  # type: ignore[union-attr]
        return Directive(column, head + word, (), f"it is not `ignore` or `ignore[...]`; {BRACKETS_HINT}")
    first = after.split(None, 1)[0] if after else ""
    if re.fullmatch(r"NP\d*,?", first, re.IGNORECASE):
        # `ignore NP101` read as a bare ignore would hide every code on the line
        return Directive(column, head + rest[:gap + len(first)], (), f"codes go in brackets; {BRACKETS_HINT}")
    return Directive(column, head, None)


def line_suppression(line: str):
    """The codes a line suppresses (None = all; an empty set for a malformed directive), or
    NOT_SUPPRESSED when it has no ignore comment."""
    directive = parse_directive(line)
    return NOT_SUPPRESSED if directive is None else directive.codes


def suppressions(lines: Sequence[str]) -> Suppressions:
    out: Suppressions = {}
    for number, line in enumerate(lines, start=1):
        codes = line_suppression(line)
        if codes is not NOT_SUPPRESSED:
            out[number] = codes
    return out


def covers(codes: Optional[frozenset[str]], code: str) -> bool:
    return codes is None or code in codes or any(code.startswith(c) for c in codes)


def is_suppressed(code: str, start: int, end: int, found: Suppressions) -> bool:
    return any(line in found and covers(found[line], code) for line in {start, end})


def unknown_codes(directive: Directive, known: Collection[str]) -> list[str]:
    """The codes of a valid directive that are neither a rule code nor a prefix of one, in their order."""
    if directive.written is None or directive.problem is not None:
        return []
    return [code for code in directive.written if not any(k.startswith(code) for k in known)]
