"""Console rendering of `check`: a summary panel (readiness, counts, the command's status), then one
table per runtime category sorted by impact, each row with the user site and the advice, and the failing
processes with their tracebacks. ``summary_line`` is the one line `check -q` prints.

A site (``path:line``) is never wrapped or cut, whatever the width (a pipe gets 80 columns)."""

from __future__ import annotations

from typing import Optional

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from neuron_port.check.aggregate.command import describe_outcome
from neuron_port.check.aggregate.demotions import Float64DemotionEntry
from neuron_port.check.sites import UserSite
from neuron_port.report import Report
from neuron_port.reporters.text.estimate import render_estimate

MAX_ROWS = 15


def _site(site: Optional[UserSite]) -> str:
    if not site:
        return "(no user frame)"
    return f"{site.path}:{site.line}"


def _code(site: Optional[UserSite]) -> str:
    return site.code if site else ""


def _table(title: str, columns: list[str]) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", show_header=True, header_style="bold",
                  expand=False)
    for column in columns:
        if column == "site":
            table.add_column(column, no_wrap=True, overflow="ignore")
        else:
            table.add_column(column, overflow="fold")
    return table


def static_left_counts(report: Report) -> tuple[int, int, int, int]:
    """The static findings left: (all, fixed by a plain `rewrite`, needing --unsafe-fixes, manual)."""
    left = [f for f in report.findings if f.source == "static" and not f.fix.applied]
    safe = sum(1 for f in left if f.fix.available and f.fix.safety == "safe")
    unsafe = sum(1 for f in left if f.fix.available and f.fix.safety != "safe")
    return len(left), safe, unsafe, len(left) - safe - unsafe


def outcome_text(report: Report) -> str:
    """How the command ended, without markup (worded with NP909's message, check/aggregate/command.py)."""
    return describe_outcome(report.runtime.status if report.runtime else None)


def shape_only_text(runtime) -> str:
    """The panel's line for a shape-only run (every neuron tensor fake: nothing computed)."""
    part = runtime.shape_only
    return (f"shape-only run: no values computed; {part.placeholder_sites} placeholder site(s), "
            f"{part.size_rule_sites} size-rule site(s)")


def summary_line(report: Report) -> str:
    """One line for `check -q`: the outcome, readiness, and the findings by severity."""
    runtime = report.runtime
    findings = [f for f in report.findings if not f.fix.applied]
    by_severity = ", ".join(f"{n} {s}" for s, n in ((s, sum(1 for f in findings if f.severity == s))
                                                     for s in ("error", "warning", "info")) if n)
    readiness = runtime.ops.readiness if runtime else None
    native = f"{readiness:.1%} of {runtime.ops.calls:,} op calls native" if runtime and readiness is not None \
        else no_ops_text(runtime)
    return (f"neuron-port check: the command {outcome_text(report)}; {native}; "
            f"{len(findings)} finding(s)" + (f" ({by_severity})" if by_severity else ""))


def no_ops_text(runtime) -> str:
    """The readiness of a run with no op counted: none reached the device, or its records were lost (NP912)."""
    lost = getattr(runtime, "lost_records", ()) if runtime is not None else ()
    return "no op counted: records lost (NP912)" if lost else "no op reached the neuron device"


def lost_text(runtime) -> list[str]:
    """The panel's line when device work is missing from the counts (NP912)."""
    lost = runtime.lost_records
    if not lost:
        return []
    children = sum(1 for loss in lost if loss.pid is not None)
    what = ("the events folder was removed: the device work of the run's processes" if children < len(lost)
            else f"{children} forked child(ren) used the device: their work")
    return [f"[bold red]records lost[/bold red]: {what} is missing from the counts below (NP912)"]


def failure_lines(runtime) -> list[str]:
    """The panel's first lines for a failed run: which process failed how and where, then the next step when
    the code is not ported yet (the NP909 finding says the same, among the others)."""
    if runtime.status.succeeded:
        return []
    first = runtime.failures[0] if runtime.failures else None
    what = (f"{first.describe()}" + (f" at {_site(first.site)}" if first.site else "") if first is not None
            else f"the command {describe_outcome(runtime.status)}")
    return [f"[bold red]failed[/bold red]: {escape(what)}",
            *([f"[bold]next step[/bold]: {escape(runtime.next_step)}"] if runtime.next_step else [])]


def _more(console: Console, total: int) -> None:
    if total > MAX_ROWS:
        console.print(f"  ... and {total - MAX_ROWS} more (see the JSON report)", style="dim")


def render_check(console: Console, report: Report) -> None:
    runtime = report.runtime
    if runtime is None:
        return
    status = runtime.status
    ops = runtime.ops
    readiness = ops.readiness
    outcome = escape(outcome_text(report))
    outcome = f"[green]{outcome}[/green]" if status.succeeded else f"[red]{outcome}[/red]"
    left, safe, unsafe, manual = static_left_counts(report)
    float64 = [d for d in runtime.demotions if isinstance(d, Float64DemotionEntry) and d.dtype == "float64"]
    lines = [
        *failure_lines(runtime),
        f"command: {escape(' '.join(status.command))}",
        f"outcome: {outcome}, {status.processes} process(es) recorded",
        *([shape_only_text(runtime)] if runtime.mode == "shape_only" else []),
        *lost_text(runtime),
        "readiness: " + (f"[bold]{readiness:.1%}[/bold] of {ops.calls:,} op calls ran natively"
                         if readiness is not None else no_ops_text(runtime)),
        f"CPU fallbacks: {len(runtime.fallbacks)} op(s), {ops.fallback_calls:,} call(s)",
        f"eager NEFF compiles: {ops.unique_signatures} unique signature(s), {runtime.shapes.after_warmup} after "
        f"warm-up; {runtime.shapes.varying_sites} line(s) whose shapes or scalars keep changing, "
        f"{runtime.shapes.uneven_batch_sites} with an uneven last batch",
        compiled_text(runtime),
        f"float64 demotions: {len(float64)} (op, line) pair(s); unsupported features: {len(runtime.unsupported)}",
        f"NEFF cache: {runtime.neff_cache.hits} hit(s), {runtime.neff_cache.misses} miss(es)",
        f"static findings left: {left} ({safe} fixed by `neuron-port rewrite`, {unsafe} need `--unsafe-fixes`, "
        f"{manual} manual)",
    ]
    console.print(Panel(Text.from_markup("\n".join(lines), emoji=False), title="neuron-port check", expand=False))

    if runtime.fallbacks:
        table = _table("CPU fallbacks (move off the hot path, replace with a supported op, or write an NKI kernel)",
                       ["op", "calls", "site", "code"])
        rows = [(f.op, s.calls, s.site) for f in runtime.fallbacks for s in f.sites]
        for op, calls, site in rows[:MAX_ROWS]:
            table.add_row(op, f"{calls:,}", _site(site), _code(site))
        console.print(table)
        _more(console, len(rows))

    _render_shapes(console, runtime)

    compiles = runtime.compiles
    if compiles:
        table = _table("torch.compile(backend=\"neuron\") (static shapes: every new shape recompiles)",
                       ["function", "site", "compiles", "limit hits", "last reason"])
        for c in compiles[:MAX_ROWS]:
            table.add_row(str(c.function), _site(c.site), str(c.count), str(c.recompile_limit_hits),
                          (c.reasons[-1] if c.reasons else "-"))
        console.print(table)
        _more(console, len(compiles))

    if float64:
        table = _table("float64 computed as float32 on Trainium (use float32, or accumulate on the CPU)",
                       ["site", "op", "calls", "code"])
        for d in float64[:MAX_ROWS]:
            table.add_row(_site(d.site), d.op, f"{d.calls:,}", _code(d.site))
        console.print(table)
        _more(console, len(float64))

    unsupported = runtime.unsupported
    if unsupported:
        table = _table("Unsupported on Trainium", ["site", "feature", "count", "message"])
        for u in unsupported[:MAX_ROWS]:
            table.add_row(_site(u.site), str(u.feature), str(u.count), str(u.message))
        console.print(table)
        _more(console, len(unsupported))

    distributed = runtime.distributed
    if distributed:
        table = _table("Distributed (merged over ranks)", ["site", "op", "calls", "ranks", "note"])
        for d in distributed[:MAX_ROWS]:
            table.add_row(_site(d.site), str(d.op), str(d.count), ",".join(map(str, d.ranks)), str(d.message or ""))
        console.print(table)
        _more(console, len(distributed))

    if runtime.estimate_withheld:
        peak = runtime.device_peak_bytes
        held = f"; the device held at most {peak / 2**20:.1f} MiB before the failure" if peak else ""
        console.print(f"Estimate: {runtime.estimate_withheld}{held}", markup=False, highlight=False)
    render_estimate(console, runtime.estimate)

    for failure in runtime.failures:
        where = f" at {_site(failure.site)}" if failure.site else ""
        console.print(f"{failure.describe()}{where}", style="bold red", markup=False, highlight=False)
        if runtime.next_step and failure is runtime.failures[0]:  # right under the failure it is about
            console.print(runtime.next_step, style="bold", markup=False, highlight=False)
        for line in failure.traceback:
            console.print("  " + line, markup=False, highlight=False, soft_wrap=True)
    if not runtime.failures and not status.succeeded:
        tail = status.stderr_tail or []
        if tail:
            console.print("last lines of the command's stderr:", style="bold")
            if runtime.next_step:
                console.print(runtime.next_step, style="bold", markup=False, highlight=False)
            for line in tail[-15:]:
                console.print("  " + line, markup=False, highlight=False, soft_wrap=True)


def _phase_text(phase) -> str:
    """``training (optimizer steps 0-8)``, ``generation after optimizer step 8 (25 calls)``."""
    if phase.kind == "training":
        return f"training (optimizer steps {phase.start_step}-{phase.end_step})"
    return f"{phase.label} ({phase.calls} call(s))"


def _render_shapes(console: Console, runtime) -> None:
    """The steady-state view of eager compiles: how many in the first run, how many after warm-up, and
    one row per line whose shapes kept changing after warm-up (or that saw an uneven last batch)."""
    shapes = runtime.shapes
    if shapes.first_run_compiles:
        last = f", last new one at step {shapes.last_step}" if shapes.last_step is not None else ""
        if shapes.last_phase and last:
            last += f" of the {shapes.last_phase}"
        phases = [p for p in shapes.phases if p.kind != "setup"]
        clock = (f"of each phase: {'; '.join(_phase_text(p) for p in phases)}" if phases
                 else f"of the {shapes.clock} clock")
        console.print(f"Eager NEFF compiles: {shapes.first_run_compiles:,} in the first run (then cached), "
                      f"{shapes.after_warmup:,} after warm-up (steps 0-{shapes.warmup_steps - 1} {clock}{last})")
    lines: dict = {}
    for v in runtime.shape_variance:  # varying first, then uneven last batches; one row per line and phase
        where = (v.site.path, v.site.line) if v.site else ("", 0)
        lines.setdefault((*where, v.slot.name if v.slot else ""), []).append(v)
    if not lines:
        return
    table = _table("Shapes after warm-up (value@step: each new shape is an eager NEFF compile; pad what keeps "
                   "changing to buckets; an uneven last batch of a DataLoader: drop_last=True or padding)",
                   ["site", "phase", "op(s)", "compiles (late)", "what changed", "buckets"])
    for items in list(lines.values())[:MAX_ROWS]:
        v = items[0]
        ops = v.op + (f" +{len(items) - 1}" if len(items) > 1 else "")
        if v.kind in ("varying", "scalar") and v.varying:
            dim = v.varying[0]
            by_step: dict = {}
            for step, value in dim.first_seen:
                by_step.setdefault(step, []).append(value)
            shown = [",".join(map(str, values[:3])) + ("..." if len(values) > 3 else "") + f"@{step}"
                     for step, values in list(by_step.items())[:5]]
            what = f"{dim.pattern or dim.label}: {' '.join(shown)}" + (" ..." if len(by_step) > 5 else "")
        else:
            what = "last batch " + "; ".join(f"{p.size} of {p.normal}@{p.step}" for p in v.partial_batches[:2])
        compiles = f"{sum(i.signatures for i in items)} ({sum(i.after_warmup for i in items)})"
        table.add_row(_site(v.site), v.slot.name if v.slot else "", ops, compiles, what, str(list(v.suggested_buckets)))
    console.print(table)
    _more(console, len(lines))


def compiled_text(runtime) -> str:
    """The torch.compile line: the distinct graphs (what the estimate prices as graph compiles), the compiles
    that produced them, the functions (one function called at two lines is one function) and their call sites."""
    compiles = runtime.compiles
    graphs = len({g for c in compiles for g in c.graphs})
    functions = len({(c.function, c.definition.path if c.definition else None,
                      c.definition.line if c.definition else None) for c in compiles})
    sites = f" at {len(compiles)} call site(s)" if len(compiles) != functions else ""
    return (f"torch.compile graphs: {graphs} graph(s) from {sum(c.count for c in compiles)} compile(s) of "
            f"{functions} function(s){sites}")
