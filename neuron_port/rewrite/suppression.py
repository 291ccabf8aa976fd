"""Suppression comments: ``# neuron-port: ignore`` (every code) or ``# neuron-port: ignore[NP101, NP5]``
(codes or prefixes) on a line hides the findings that start or end there. Python files and launch files
read them the same way."""

from __future__ import annotations

import re
from typing import Optional, Sequence

SUPPRESSION_RE = re.compile(r"#\s*neuron-port:\s*ignore(?:\[(?P<codes>[A-Za-z0-9_,\s-]*)\])?")

# line number -> the suppressed codes or prefixes; None means every code
Suppressions = dict[int, Optional[frozenset[str]]]
NOT_SUPPRESSED = object()


def line_suppression(line: str):
    """The codes a line suppresses (None = all), or NOT_SUPPRESSED when it has no ignore comment."""
    if "neuron-port" not in line:
        return NOT_SUPPRESSED
    match = SUPPRESSION_RE.search(line)
    if not match:
        return NOT_SUPPRESSED
    codes = match.group("codes")
    return None if codes is None else frozenset(c.strip().upper() for c in codes.split(",") if c.strip())


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
