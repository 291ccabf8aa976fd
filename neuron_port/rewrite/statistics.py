"""Migration statistics, as HIPIFY prints them: CUDA references found, converted, left for review or
manual work, and the share converted, per file and in total.

A *reference* is one static finding (a runtime NP9xx finding of `check` is not a reference in the
code, nor is NP799's about a suppression comment). It is *converted* when its fix was applied (under
``--check``/``--diff``: would be applied); *fixable* when a fix exists but was not applied (an unsafe fix without ``--unsafe-fixes``); *manual*
when no automatic fix exists. found = converted + fixable + manual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from neuron_port.results import FileResult


@dataclass(frozen=True)
class Statistics:
    found: int = 0
    converted: int = 0
    fixable: int = 0
    manual: int = 0

    @property
    def share_converted(self) -> Optional[float]:
        return None if self.found == 0 else self.converted / self.found

    def __add__(self, other: "Statistics") -> "Statistics":
        return Statistics(self.found + other.found, self.converted + other.converted,
                          self.fixable + other.fixable, self.manual + other.manual)

    def to_json(self) -> dict:
        share = self.share_converted
        return {"found": self.found, "converted": self.converted, "fixable": self.fixable, "manual": self.manual,
                "share_converted": None if share is None else round(share, 4)}


# findings about neuron-port's own comments, not about CUDA in the code
NOT_REFERENCES = frozenset({"NP799"})  # invalid-suppression


def file_statistics(result: FileResult) -> Statistics:
    static = [f for f in result.findings if f.source == "static" and f.code not in NOT_REFERENCES]
    found = len(static)
    with_fix = sum(1 for f in static if f.fix.available)
    # fixes_applied counts the findings whose fix was written (or is pending under --check/--diff)
    converted = min(result.fixes_applied, with_fix)
    return Statistics(found=found, converted=converted, fixable=with_fix - converted, manual=found - with_fix)


def total_statistics(results: Iterable[FileResult]) -> Statistics:
    total = Statistics()
    for result in results:
        total = total + file_statistics(result)
    return total


def percent(share: Optional[float]) -> str:
    return "-" if share is None else f"{share:.1%}"
