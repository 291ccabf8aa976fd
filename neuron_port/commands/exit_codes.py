"""The exit-code rule of `rewrite` and `check` (without typer: the plain `rewrite` line uses it too)."""

from __future__ import annotations

from neuron_port.report import Report
from neuron_port.results import SEVERITY_RANK


def exit_code(report: Report, fail_on: str, pending_fails: bool, exit_zero: bool = False) -> int:
    """1 for files that could not be processed or a failed command (even with --exit-zero, as ruff exits
    non-zero on errors), then 1 for pending changes (``pending_fails``) or findings at or above
    ``fail_on`` unless ``exit_zero``; else 0."""
    if report.errors or (report.runtime is not None and not report.runtime.status.succeeded):
        return 1
    if exit_zero:
        return 0
    if pending_fails and any(r.changed for r in report.files):
        return 1
    if fail_on == "never":
        return 0
    threshold = SEVERITY_RANK[fail_on]
    for f in report.findings:
        if not f.fix.applied and SEVERITY_RANK[f.severity] >= threshold:
            # under --check, a finding whose safe fix is merely pending still counts
            return 1
    return 0
