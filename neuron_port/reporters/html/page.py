"""`check --html`: the check report as one self-contained HTML page.

The page is rendered from the report document (the dict the JSON reporter writes, ``json_report.to_document``),
so a saved JSON report renders the same way. It loads nothing (inline CSS, inline SVG charts, a content
security policy that forbids every fetch) and shows: the summary and readiness, for a shape-only run its
placeholders and size rules (what was not computed, NP911), the CPU fallbacks, the
compile timeline (new signatures per step and phase, timeline.py), shape variance per site, the
estimate when the report has one (estimate.py), and every finding. Each chart is an
``<svg role="img">`` inside a ``<figure>`` with a caption and its data as a table under ``<details>``.
"""

from __future__ import annotations

from typing import Any, Optional

from neuron_port.reporters.html import charts
from neuron_port.reporters.html.charts import Chart, Series
from neuron_port.reporters.html.estimate import render_estimate
from neuron_port.reporters.html.parts import Markup, code_cell, escape, figure, number, section, site_text, table
from neuron_port.reporters.html.style import CONTENT_SECURITY_POLICY, STYLE
from neuron_port.reporters.html.timeline import timeline_section

MAX_CHART_SITES = 12


class ReportInputError(ValueError):
    """The document is not a check report this renderer understands (the message says what is wrong)."""


def _outcome(status: Optional[dict]) -> tuple[str, bool]:
    if status is None:
        return "not run (static scan only)", True
    if status.get("error"):
        return f"could not start: {status['error']}", False
    if status.get("interrupted"):
        return f"interrupted by {status['interrupted']} after {status.get('duration', 0):.1f} s", False
    if status.get("timed_out"):
        return f"timed out after {status.get('duration', 0):.1f} s", False
    if status.get("signal"):
        return f"killed by {status['signal']} after {status.get('duration', 0):.1f} s", False
    code = status.get("exit_code")
    return f"exit code {code} after {status.get('duration', 0):.1f} s", code == 0


def _failure(runtime: dict) -> str:
    """A failed run's first section: which process failed how and where, the next step when the code is not
    ported yet, and the traceback (or the command's last lines); the counts after it are of what ran before."""
    status = runtime.get("status") or {}
    if _outcome(status)[1]:
        return ""
    failures = runtime.get("failures") or []
    first = failures[0] if failures else None
    if first is not None:
        who = "the process" if first.get("rank") is None else f"rank {first.get('rank')}"
        where = f" at {site_text(first.get('site'))}" if first.get("site") else ""
        what, lines = f"{who} failed with {first.get('exception')}{where}", first.get("traceback") or []
    else:
        what, lines = f"the command ended: {_outcome(status)[0]}", (status.get("stderr_tail") or [])[-15:]
    body = f'<p class="outcome-bad">{escape(what)}</p>'
    if runtime.get("next_step"):
        body += f"<p><strong>Next step:</strong> {escape(runtime['next_step'])}</p>"
    if lines:
        body += "<pre>" + escape("\n".join(str(line) for line in lines)) + "</pre>"
    body += "<p>What follows is what ran before the failure.</p>"
    return section("failure", "The run failed", body)


def _summary(doc: dict, runtime: Optional[dict]) -> str:
    summary = doc.get("summary") or {}
    severity = summary.get("by_severity") or {}
    ops = (runtime or {}).get("ops") or {}
    shapes = (runtime or {}).get("shapes") or {}
    cells = [("findings", summary.get("findings")), ("errors", severity.get("error")),
             ("warnings", severity.get("warning")), ("info", severity.get("info")),
             ("files scanned", summary.get("files_scanned"))]
    if runtime is not None:
        cells[:0] = [("op calls", ops.get("calls")), ("CPU fallback calls", ops.get("fallback_calls")),
                     ("eager compiles, cold cache", shapes.get("first_run_compiles")),
                     ("new signatures after warm-up", shapes.get("after_warmup")),
                     ("processes", (runtime.get("status") or {}).get("processes"))]
    items = "".join(f"<div><dt>{escape(k)}</dt><dd>{number(v)}</dd></div>" for k, v in cells)
    body = f'<dl class="numbers">{items}</dl>'
    if runtime is not None:
        readiness = ops.get("readiness")
        if readiness is None:
            body += "<h3>Readiness</h3><p>No op reached the neuron device.</p>"
        else:
            body += (f'<h3>Readiness</h3><p><meter min="0" max="1" value="{float(readiness):.4f}" '
                     f'aria-label="readiness {readiness:.1%}"></meter></p>'
                     f"<p><strong>{readiness:.1%}</strong> of {number(ops.get('calls'))} op calls ran natively on "
                     f"the simulated neuron device; {number(ops.get('fallback_calls'))} fell back to the CPU. "
                     f"{number(ops.get('unique_signatures'))} distinct op signatures.</p>")
    return section("summary", "Summary", body)


def _before_failure(runtime: dict) -> str:
    """" before the run failed" for a failed run's "no ..." sentences (they are not a clean bill)."""
    return "" if _outcome(runtime.get("status"))[1] else " before the run failed"


def _fallbacks(runtime: dict) -> str:
    fallbacks = runtime.get("fallbacks") or []
    if not fallbacks:
        return section("fallbacks", "CPU fallbacks", f"<p>No op fell back to the CPU{_before_failure(runtime)}.</p>")
    rows = [(entry.get("op"), entry.get("calls"), site_text(site), code_cell(site))
            for entry in sorted(fallbacks, key=lambda e: -(e.get("calls") or 0))
            for site in (entry.get("sites") or [None])]
    body = ("<p>Ops the neuron device does not run: each call runs on the host, with copies both ways "
            "(NP901).</p>" + table(["op", "calls", "site", "code"], rows, numeric=(1,)))
    return section("fallbacks", "CPU fallbacks", body)


def _varying_text(entry: dict) -> str:
    parts = []
    for position in entry.get("varying") or []:
        values = position.get("values") or []
        shown = ", ".join(str(v) for v in values[:8]) + (", …" if len(values) > 8 else "")
        parts.append(f"{position.get('label') or 'dim ' + str(position.get('dim'))}: {shown}")
    for batch in entry.get("partial_batches") or []:
        parts.append(f"uneven last batch: {batch}")
    return "; ".join(parts)


def _shape_variance(runtime: dict) -> str:
    entries = sorted(runtime.get("shape_variance") or [], key=lambda e: (-(e.get("after_warmup") or 0),
                                                                        -(e.get("signatures") or 0)))
    if not entries:
        return section("shapes", "Shape variance per site",
                       f"<p>No line kept getting new shapes after warm-up{_before_failure(runtime)}.</p>")
    shown = entries[:MAX_CHART_SITES]
    labels = [f"{e.get('op', '').removeprefix('aten::')} @ {site_text(e.get('site'))}"
              + (f" · {e['phase']}" if e.get("phase") not in (None, "training") else "") for e in shown]
    after = [int(e.get("after_warmup") or 0) for e in shown]
    before = [max(0, int(e.get("signatures") or 0) - a) for e, a in zip(shown, after)]
    chart = Chart("shape-variance", "Signatures per site with varying shapes",
                  f"Horizontal bar chart of the {len(shown)} lines with the most new signatures after warm-up: "
                  f"signatures seen in warm-up and after it, per op and line.")
    svg = charts.bars(chart, labels, [Series("in warm-up", before), Series("after warm-up", after)],
                           xlabel="op @ line", ylabel="distinct signatures", horizontal=True)
    data = table(["op", "site", "phase", "in warm-up", "after warm-up"],
                 [(e.get("op"), site_text(e.get("site")), e.get("phase_label") or "–", b, a)
                  for e, b, a in zip(shown, before, after)], numeric=(3, 4))
    body = figure(svg, "Each bar is one line whose op saw new shapes; the part after warm-up is what a padded "
                       "or bucketed input would remove.", data)
    body += (f"<details><summary>What varies at each of the {len(entries):,} line(s), with padding buckets"
             "</summary>")
    body += table(["op", "site", "phase", "kind", "signatures", "after warm-up", "what varies", "suggested buckets"],
                  [(e.get("op"), site_text(e.get("site")), e.get("phase_label") or "–", e.get("kind"),
                    e.get("signatures"), e.get("after_warmup"), _varying_text(e),
                    ", ".join(str(b) for b in e.get("suggested_buckets") or []) or "–") for e in entries],
                  numeric=(4, 5)) + "</details>"
    return section("shapes", "Shape variance per site", body)


def _other_runtime(runtime: dict) -> str:
    parts = []
    compiles = runtime.get("compiles") or []
    if compiles:
        parts.append("<h3>torch.compile</h3>" + table(
            ["function", "site", "compiles", "recompile limit hits", "reasons"],
            [(c.get("function"), site_text(c.get("site")), c.get("count"), c.get("recompile_limit_hits"),
              "; ".join(str(r) for r in (c.get("reasons") or [])[:3])) for c in compiles], numeric=(2, 3)))
    parts.append(_demotions(runtime.get("demotions") or []))
    unsupported = runtime.get("unsupported") or []
    if unsupported:
        parts.append("<h3>Unsupported features</h3>" + table(
            ["feature", "op", "count", "site", "message"],
            [(u.get("feature"), u.get("op"), u.get("count"), site_text(u.get("site")), u.get("message"))
             for u in unsupported], numeric=(2,)))
    if not any(parts):
        return ""
    return section("runtime-other", "Other runtime observations", "".join(parts))


def _demotions(demotions: list[dict]) -> str:
    """The demotions (NP905): the ops and lines whose float64 is computed in a narrower type. int64 is
    counted per op, not reported: Trainium computes it in 32 bits too, but indices and sizes are int64
    everywhere and exact while their values fit in int32; those rows say so, apart from the demotions."""
    demoted = [d for d in demotions if d.get("computed_as")]
    counted = [d for d in demotions if not d.get("computed_as")]
    body = ""
    if demoted:
        body += "<h3>dtype demotions</h3>" + table(
            ["dtype", "computed as", "op", "calls", "site", "code"],
            [(d.get("dtype"), d.get("computed_as"), d.get("op"), d.get("calls"), site_text(d.get("site")),
              code_cell(d.get("site"))) for d in demoted], numeric=(3,))
    if counted:
        body += (f"<details><summary>int64 ops: {len(counted):,} op(s), not demotions to act on</summary>"
                 "<p>Trainium computes int64 in 32 bits and keeps the int64 dtype; indices, positions and sizes "
                 "are int64 everywhere and exact while their values fit in int32 (below 2<sup>31</sup>), so "
                 "these ops are counted, not reported as findings.</p>" + table(
                     ["dtype", "op", "calls", "sites (up to 5)"],
                     [(d.get("dtype"), d.get("op"), d.get("calls"),
                       ", ".join(site_text(s) for s in d.get("sites") or []) or "(no user frame)")
                      for d in counted], numeric=(2,)) + "</details>")
    return body


def _shape_text(shape: Any) -> str:
    return "–" if shape is None else "[" + ", ".join(str(s) for s in shape) + "]"


def _placeholder_value(entry: dict) -> str:
    if entry.get("shape") is not None:
        return f"zeros {_shape_text(entry.get('shape'))}"
    value = entry.get("value")
    return str(value) if not isinstance(value, bool) else ("True" if value else "False")


def _ranks(entry: dict) -> str:
    return ",".join(str(r) for r in entry.get("ranks") or []) or "–"


def _shape_only(runtime: dict) -> str:
    """A shape-only run's placeholders and size rules (NP911): where values and sizes were not computed."""
    part = runtime.get("shape_only") or {}
    placeholders, size_rules = part.get("placeholders") or [], part.get("size_rules") or []
    body = ("<p>Every neuron tensor was fake (shapes and dtypes, no storage, no compute): values the program "
            f"read are placeholders ({number(part.get('placeholder_sites'))} line(s)) and data-dependent sizes "
            f"follow a size rule ({number(part.get('size_rule_sites'))} line(s)). Control flow after these lines "
            "may differ from a real run (NP911).</p>")
    if placeholders:
        body += "<h3>Placeholders</h3>" + table(
            ["site", "op", "value", "ranks", "code"],
            [(site_text(e.get("site")), e.get("op"), _placeholder_value(e), _ranks(e), code_cell(e.get("site")))
             for e in placeholders])
    if size_rules:
        body += "<h3>Size rules</h3>" + table(
            ["site", "op", "rule", "shape", "upper bound", "ranks", "code"],
            [(site_text(e.get("site")), e.get("op"), e.get("rule"), _shape_text(e.get("shape")),
              _shape_text(e.get("upper_bound")), _ranks(e), code_cell(e.get("site"))) for e in size_rules])
    return section("shape-only", "Shape-only run", body)


def _findings(doc: dict) -> str:
    findings = doc.get("findings") or []
    if not findings:
        return section("findings", "Findings", "<p>No findings.</p>")
    rank = {"error": 0, "warning": 1, "info": 2}
    rows = [(f.get("code"), Markup(f'<span class="sev-{escape(f.get("severity"))}">{escape(f.get("severity"))}'
                                   f"</span>"), f"{f.get('path')}:{f.get('line')}", f.get("source"),
             "applied" if (f.get("fix") or {}).get("applied") else
             ((f.get("fix") or {}).get("safety") if (f.get("fix") or {}).get("available") else "manual"),
             f.get("message"))
            for f in sorted(findings, key=lambda f: (rank.get(f.get("severity"), 3), f.get("path") or "",
                                                     f.get("line") or 0))]
    body = (f"<details><summary>{len(findings):,} finding(s), errors first</summary>"
            + table(["code", "severity", "site", "source", "fix", "message"], rows, limit=500) + "</details>")
    return section("findings", "Findings", body)


def render(doc: Any) -> str:
    """The page for a report document; ReportInputError when ``doc`` is not a check report."""
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise ReportInputError("not a neuron-port report: no schema_version at the top level")
    try:
        return _page(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReportInputError(f"not a report this version can render ({type(exc).__name__}: {exc})") from exc


def _page(doc: dict) -> str:
    runtime = doc.get("runtime")
    if runtime is not None and not isinstance(runtime, dict):
        raise ReportInputError("`runtime` is not an object")
    status = (runtime or {}).get("status")
    outcome, succeeded = _outcome(status)
    command = " ".join((status or {}).get("command") or [])
    version = (doc.get("tool") or {}).get("version", "")
    failure = _failure(runtime) if runtime is not None else ""
    sections = [failure, _summary(doc, runtime)]  # a failed run leads with its failure
    nav = ([("failure", "Failure")] if failure else []) + [("summary", "Summary")]
    shape_only = runtime is not None and runtime.get("mode") == "shape_only"
    if shape_only:
        sections.append(_shape_only(runtime))
        nav.append(("shape-only", "Shape-only run"))
    if runtime is not None:
        sections += [_fallbacks(runtime), timeline_section(runtime), _shape_variance(runtime), _other_runtime(runtime)]
        nav += [("fallbacks", "CPU fallbacks"), ("timeline", "Compile timeline"), ("shapes", "Shape variance")]
    estimate = doc.get("estimate")
    if estimate or runtime is not None:  # a static scan has nothing to estimate from
        withheld = (runtime or {}).get("estimate_withheld")
        sections.append(section("estimate", "Estimate", render_estimate(estimate) if estimate else
                                f"<p>{escape(withheld)}.</p>" if withheld else
                                "<p>This report has no estimate (no op ran on the simulated device, or it was "
                                "written by a neuron-port without the cost model).</p>"))
        nav.append(("estimate", "Estimate"))
    sections.append(_findings(doc))
    nav.append(("findings", "Findings"))
    links = "".join(f'<li><a href="#{a}">{escape(t)}</a></li>' for a, t in nav)
    title = f"neuron-port check: {command}" if command else "neuron-port report"
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body><main>"
        f"<header><h1>{'neuron-port check report' if runtime is not None else 'neuron-port report'}</h1>"
        f"<p><code>{escape(command) or '(no command)'}</code> — "
        f'<span class="{"outcome-ok" if succeeded else "outcome-bad"}">{escape(outcome)}</span>'
        + (' — <strong>shape-only run</strong>: no values computed' if shape_only else "") + "</p>"
        f'<nav aria-label="Sections"><ul>{links}</ul></nav></header>\n'
        + "\n".join(s for s in sections if s)
        + f"\n<footer>Written by neuron-port {escape(version)}"
        + (" from a run on the simulated neuron device (CPU-backed). Counts are what the run did; estimated "
           "times and prices are estimates, not measurements of Trainium." if runtime is not None else
           " from a static scan.")
        + "</footer></main></body></html>\n"
    )
