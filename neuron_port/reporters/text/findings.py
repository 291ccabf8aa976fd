"""Console rendering of a report: findings as ``path:line:col: CODE message`` (flake8's and ruff's form,
which problem matchers, reviewdog's ``%f:%l:%c: %m`` and vim's errorformat read), then a summary; for
`check`, the runtime tables first (check.py).

Reporters only format onto the console they are given; the CLI owns the consoles and the exit code.
"""

from __future__ import annotations

from collections import Counter

from rich.console import Console

from neuron_port.reporters.protocol import RenderContext, Streams
from neuron_port.results import Finding
from neuron_port.report import Report
from neuron_port.rewrite.statistics import file_statistics, percent, total_statistics
from neuron_port.reporters.text.widths import PIPE_WIDTH

MAX_STAT_FILES = 10

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def finding_line(f: Finding) -> str:
    where = f"{f.path}:{f.line}:{f.column}" if f.cell is None else f"{f.path}[cell {f.cell}]:{f.line}:{f.column}"
    marker = ""
    if f.fix.available and not f.fix.applied:
        marker = " [*]" if f.fix.safety == "safe" else " [unsafe fix]"
    effort = f" (effort: {f.effort})" if f.effort and not f.fix.available else ""
    return f"{where}: {f.code}{marker} {f.message}{effort}"


def render_findings(console: Console, report: Report, include_fixed: bool = False, related: bool = False) -> None:
    """``related``: under a finding that folds others (a kept scope), each folded one at its place
    (``--verbose``; JSON and SARIF always list them)."""
    for f in report.findings:
        if f.fix.applied and not include_fixed:
            continue
        style = SEVERITY_STYLE.get(f.severity, "")
        console.print(finding_line(f), style=style, markup=False, highlight=False, soft_wrap=True)
        if related and f.cell is None:
            for line, column, code in f.related:
                console.print(f"{f.path}:{line}:{column}: {code} (folded into {f.code} at {f.line}:{f.column})",
                              markup=False, highlight=False, soft_wrap=True)


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
    render_statistics(console, report, mode, verbose=verbose)
    if remaining:
        by_sev = Counter(f.severity for f in remaining)
        parts = [f"{by_sev[s]} {s}" for s in ("error", "warning", "info") if by_sev[s]]
        console.print(f"{len(remaining)} finding(s) left: {', '.join(parts)}", highlight=False)
        from rich.table import Table  # a table only for the summary (not under --quiet)

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


def render_statistics(console: Console, report: Report, mode: str, verbose: bool = False) -> None:
    """The migration statistics block: CUDA references found / converted / fixable / manual, in total
    and per file (the files with references; at most MAX_STAT_FILES unless ``verbose``)."""
    total = total_statistics(report.files)
    if not total.found:
        return
    verb = "converted" if mode == "write" else "convertible"
    console.print(
        f"CUDA references: {total.found} found, {total.converted} {verb} ({percent(total.share_converted)}), "
        f"{total.fixable} need --unsafe-fixes or review, {total.manual} need manual work",
        highlight=False,
    )
    rows = [(r.path, file_statistics(r)) for r in report.files]
    rows = [(path, stats) for path, stats in rows if stats.found]
    if len(rows) < 2 and not verbose:
        return
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column, justify in (("file", "left"), ("found", "right"), (verb, "right"), ("share", "right"),
                            ("fixable", "right"), ("manual", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    shown = rows if verbose else rows[:MAX_STAT_FILES]
    for path, stats in shown:
        table.add_row(path, str(stats.found), str(stats.converted), percent(stats.share_converted),
                      str(stats.fixable), str(stats.manual))
    console.print(table)
    if len(shown) < len(rows):
        console.print(f"  ... and {len(rows) - len(shown)} more file(s) (--verbose or --output-format json)",
                      highlight=False)


def emit(report: Report, context: RenderContext, streams: Streams) -> None:
    render_errors(streams.err, report)
    if report.runtime is not None:
        from neuron_port.reporters.text.check import render_check, summary_line

        if context.quiet:  # the findings and one line
            render_findings(streams.out, report)
            streams.out.print(summary_line(report), markup=False, highlight=False)
            return
        # On a terminal the runtime tables wrap long advice to its width (the findings keep one line each);
        # in a pipe or a file nothing wraps: a line as wide as it needs, so no path:line is ever cut.
        width = None if streams.out.is_terminal else PIPE_WIDTH
        # as the CLI's consoles: text as it is (no emoji codes, no markup in paths or messages)
        render_check(Console(file=streams.out.file, highlight=False, emoji=False, markup=False, width=width), report)
        render_findings(streams.out, report)
        return
    render_findings(streams.out, report, include_fixed=context.verbose, related=context.verbose)
    if not context.quiet:
        mode = "write" if report.wrote else ("diff" if context.diff else "check")
        render_summary(streams.out, report, mode=mode)
