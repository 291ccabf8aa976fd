"""`--statistics`: one line per code of the findings left, in ruff's format (which is flake8's).

Text: ``count<TAB>code<TAB>[*] name``, the count right-aligned and the code left-aligned to the widest,
sorted by count (most first; equal counts by code). ``[*]`` marks a code whose every finding left has a
fix that this run would apply (a safe fix pending under --check/--diff, an unsafe one with
--unsafe-fixes), ``[ ]`` one that has not; with no fixable code at all neither is printed. JSON: an
array of ``{"code", "name", "count", "fixable"}`` in the same order. As ruff's printer does
(astral-sh/ruff crates/ruff/src/printer.rs, ``write_statistics``). ``render_report``
(neuron_port/reporters/__init__.py) prints them in place of the report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from neuron_port.report import Report
from neuron_port.results import Finding


@dataclass(frozen=True)
class CodeCount:
    code: str
    name: str
    count: int
    fixable: bool


def _applicable(finding: Finding, unsafe_fixes: bool) -> bool:
    return finding.fix.available and (finding.fix.safety == "safe" or unsafe_fixes)


def code_counts(report: Report, unsafe_fixes: bool) -> list[CodeCount]:
    left: dict[str, list[Finding]] = {}
    for finding in report.findings:
        if not finding.fix.applied:
            left.setdefault(finding.code, []).append(finding)
    counts = [CodeCount(code, found[0].name, len(found), all(_applicable(f, unsafe_fixes) for f in found))
              for code, found in sorted(left.items())]
    return sorted(counts, key=lambda c: -c.count)  # stable: equal counts stay in code order


def render_text(counts: list[CodeCount]) -> str:
    if not counts:
        return ""
    count_width = max(len(str(c.count)) for c in counts)
    code_width = max(len(c.code) for c in counts)
    any_fixable = any(c.fixable for c in counts)
    lines = []
    for c in counts:
        marker = ("[*] " if c.fixable else "[ ] ") if any_fixable else ""
        lines.append(f"{c.count:>{count_width}}\t{c.code:<{code_width}}\t{marker}{c.name}\n")
    return "".join(lines)


def render_json(counts: list[CodeCount]) -> str:
    return json.dumps([{"code": c.code, "name": c.name, "count": c.count, "fixable": c.fixable}
                       for c in counts], indent=2) + "\n"


def render(report: Report, output_format: str, unsafe_fixes: bool) -> str:
    counts = code_counts(report, unsafe_fixes)
    return render_json(counts) if output_format == "json" else render_text(counts)

