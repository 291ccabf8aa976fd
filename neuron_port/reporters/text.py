"""Console rendering of a report: findings as ``path:line:col CODE message``, then a summary.

Reporters only format onto the console they are given; the CLI owns the consoles and the exit code.
"""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from neuron_port.results import Finding, Report

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def finding_line(f: Finding) -> str:
    where = f"{f.path}:{f.line}:{f.column}" if f.cell is None else f"{f.path}[cell {f.cell}]:{f.line}:{f.column}"
    marker = ""
    if f.fix.available and not f.fix.applied:
        marker = " [*]" if f.fix.safety == "safe" else " [unsafe fix]"
    effort = f" (effort: {f.effort})" if f.effort and not f.fix.available else ""
    return f"{where} {f.code}{marker} {f.message}{effort}"


def render_findings(console: Console, report: Report, include_fixed: bool = False) -> None:
    for f in report.findings:
        if f.fix.applied and not include_fixed:
            continue
        style = SEVERITY_STYLE.get(f.severity, "")
        console.print(finding_line(f), style=style, markup=False, highlight=False, soft_wrap=True)


def render_errors(console: Console, report: Report) -> None:
    for error in report.errors:
        console.print(f"error: {error.message}", style="bold red", markup=False, highlight=False, soft_wrap=True)


def render_summary(console: Console, report: Report, mode: str, verbose: bool = False) -> None:
    """``mode`` is "write", "check" or "diff"."""
    findings = report.findings
    remaining = [f for f in findings if not f.fix.applied]
    files_changed = sum(1 for r in report.files if r.changed)
    fixes = sum(r.fixes_applied for r in report.files)
    scanned = len(report.files)
    if mode == "write":
        head = f"{scanned} file(s) scanned, {files_changed} rewritten, {fixes} fix(es) applied"
    else:
        head = f"{scanned} file(s) scanned, {files_changed} would be rewritten ({fixes} fix(es) pending)"
    console.print(head, highlight=False)
    if remaining:
        by_sev = Counter(f.severity for f in remaining)
        parts = [f"{by_sev[s]} {s}" for s in ("error", "warning", "info") if by_sev[s]]
        console.print(f"{len(remaining)} finding(s) left: {', '.join(parts)}", highlight=False)
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        table.add_column("code")
        table.add_column("name")
        table.add_column("count", justify="right")
        table.add_column("fix")
        counts = Counter((f.code, f.name) for f in remaining)
        fix_kind = {}
        for f in remaining:
            kind = "manual" if not f.fix.available else ("needs --unsafe-fixes" if f.fix.safety == "unsafe" else "safe")
            fix_kind.setdefault(f.code, kind)
        for (code, name), count in sorted(counts.items()):
            table.add_row(code, name, str(count), fix_kind[code])
        console.print(table)
    elif scanned:
        console.print("No findings left.", highlight=False)
    if report.errors:
        console.print(f"{len(report.errors)} file(s) could not be processed (see errors above)", style="red")
