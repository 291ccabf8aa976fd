"""The Estimate part of the HTML report, from the report's `estimate` section (contract:
the JSON report's `estimate`, written by neuron_port/check/estimate/): per device the step, its price, the
validated error and the collectives, the largest cost with its next step (the text panel's wording), where
the estimated step time goes, eager against compiled, the scaling over chip counts (table and chart),
compile time, memory against HBM, the price table, and every assumption.

Everything here is labelled an estimate: the figures come from the simulated run and the assumptions listed
with them, never from a Trainium.
"""

from __future__ import annotations

from typing import Any, Optional

from neuron_port.reporters.html import charts
from neuron_port.reporters.html.charts import Chart, Series
from neuron_port.reporters.html.parts import Markup, escape, figure, number, table
from neuron_port.reporters.text import estimate as text_panel

MAX_FAMILIES = charts.SERIES_COUNT


def seconds(value: Optional[float]) -> str:
    """Two significant digits (the model's error is larger than a third would say), as the text panel."""
    if value is None:
        return "–"
    value = float(value)
    if value == 0:
        return "0 s"
    if value >= 120:
        return f"{text_panel.sig2(value / 60)} min"
    return text_panel.seconds(value).replace("us", "µs")


def size(value: Optional[float]) -> str:
    if value is None:
        return "–"
    value = float(value)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{value / scale:,.2f} {unit}"
    return f"{value:,.0f} B"


def usd(value: Optional[float]) -> str:
    return "–" if value is None else text_panel.usd(float(value))


def link(url: Any, text: Optional[str] = None) -> Markup:
    """A link for an http(s) URL; anything else is shown as text (a report cannot inject javascript: links)."""
    if isinstance(url, str) and url.startswith(("https://", "http://")):
        return Markup(f'<a href="{escape(url)}" rel="noreferrer">{escape(text or url)}</a>')
    return Markup(escape(url if url is not None else "–"))


def _device_names(estimate: dict) -> dict[str, str]:
    return {d.get("id"): d.get("name") or d.get("id") for d in estimate.get("devices") or []}


def _row_name(entry: dict, names: dict[str, str]) -> str:
    """A row's device name and its silicon (the like-for-like rows share a device): ``... x16 (trn2.48xlarge)``."""
    device = str(entry.get("device"))
    return str(names.get(entry.get("device"), device)) + text_panel.device_label(entry)[len(device):]


def _time_by_family(per_device: list[dict], names: dict[str, str]) -> str:
    totals: dict[str, float] = {}
    for entry in per_device:
        for family, value in (entry.get("seconds_by_family") or {}).items():
            totals[family] = totals.get(family, 0.0) + float(value or 0.0)
    families = [f for f, v in sorted(totals.items(), key=lambda kv: -kv[1]) if v > 0]
    if len(families) > MAX_FAMILIES:  # the smallest share one bar segment
        families = families[:MAX_FAMILIES - 1] + ["rest"]
    kept = set(families)

    def share(entry: dict, family: str) -> float:
        by_family = entry.get("seconds_by_family") or {}
        if family == "rest":
            return sum(float(v or 0) for f, v in by_family.items() if f not in kept)
        return float(by_family.get(family) or 0.0)

    devices = [_row_name(e, names) for e in per_device]
    series = [Series(family, [share(e, family) * 1e3 for e in per_device]) for family in families]
    chart = Chart("estimate-families", "Where the estimated step time goes",
                  "Stacked horizontal bar chart per device of the expected eager step time in milliseconds, "
                  "split by op family, per-op dispatch and CPU fallbacks.")
    svg = charts.bars(chart, devices, series, xlabel="device", ylabel="estimated ms per step (eager)",
                           horizontal=True)
    data = table(["device", *families],
                 [(name, *(seconds(share(e, f)) for f in families)) for name, e in zip(devices, per_device)],
                 numeric=tuple(range(1, len(families) + 1)))
    return figure(svg, "Expected eager step time per device, by op family; `dispatch` is the per-op launch "
                       "cost, `fallback` the host time and copies of ops that run on the CPU.", data)


def _eager_compiled(per_device: list[dict], names: dict[str, str]) -> str:
    devices = [_row_name(e, names) for e in per_device]

    def pair(entry: dict, key: str) -> tuple[float, float]:
        span = entry.get(key) or {}
        return float(span.get("lower") or 0.0) * 1e3, float(span.get("expected") or 0.0) * 1e3

    eager = [pair(e, "step_seconds") for e in per_device]
    compiled = [pair(e, "compiled_step_seconds") for e in per_device]
    highs = [v for p in eager + compiled for v in p if v > 0]
    chart = Chart("estimate-eager-compiled", "Estimated step time, eager against compiled",
                  "Horizontal bar chart per device: the expected step time in milliseconds in eager mode and "
                  "with the model compiled, each with a tick at its roofline lower bound.")
    svg = charts.ranges(chart, devices, [[e[0], c[0]] for e, c in zip(eager, compiled)],
                             [[e[1], c[1]] for e, c in zip(eager, compiled)], ["eager", "torch.compile"],
                             unit="estimated ms per step",
                             log_scale=bool(highs) and max(highs) > 50 * min(highs))
    data = table(["device", "eager lower", "eager expected", "compiled lower", "compiled expected"],
                 [(name, seconds(e[0] / 1e3), seconds(e[1] / 1e3), seconds(c[0] / 1e3), seconds(c[1] / 1e3))
                  for name, e, c in zip(devices, eager, compiled)], numeric=(1, 2, 3, 4))
    return figure(svg, "Bars: the expected time, at the assumed achievable fraction of peak; ticks: the roofline "
                       "lower bound (every op at peak FLOPs or bandwidth). Compiled drops the per-op dispatch of "
                       "ops inside compiled graphs.", data)


def _span(pair: Optional[dict]) -> str:
    pair = pair or {}
    return f"{seconds(pair.get('lower'))} – {seconds(pair.get('expected'))}"


def _collectives_cell(entry: dict) -> str:
    c = entry.get("collectives")
    if c is None:
        return "not modelled (a report written before they were)"
    if not c.get("modelled"):
        return str(c.get("note") or "not modelled")
    assumed = " (assumed data parallel)" if c.get("assumed") else ""
    return (f"{seconds(c.get('seconds'))}, {seconds(c.get('exposed_seconds'))} exposed; {c.get('sharding')} over "
            f"{number(c.get('ranks'))} ranks at {number(c.get('gbps'))} GB/s{assumed}")


def _at_a_glance(estimate: dict, per_device: list[dict], names: dict[str, str]) -> str:
    """The text panel's table as HTML: step and compiled step (lower bound – expected), price, the validated
    error and the collectives per device; the notes on the error; the largest cost and what to do."""
    rows = []
    calibrated = isinstance(estimate.get("calibration"), dict)
    for e in per_device:
        price = e.get("price") or {}
        on = text_panel.device_label(e)[len(str(e.get("device"))):]  # its silicon: x16 (trn2.48xlarge)
        cells = [Markup(f'<code class="device">{escape(e.get("device"))}</code>{escape(on)}'),
                 _span(e.get("step_seconds")), _span(e.get("compiled_step_seconds")), usd(price.get("per_step_usd")),
                 usd(price.get("per_million_tokens_usd")), text_panel.validated(e), _collectives_cell(e)]
        if calibrated:
            cal, measured = e.get("calibrated"), e.get("measured_seconds")
            cells.insert(2, seconds(cal.get("step_seconds")) if isinstance(cal, dict) else
                         f"measured {seconds(measured)}" if measured is not None else "–")
        rows.append(tuple(cells))
    columns = ["device", "step (lower – expected)", "compiled", "$ per step", "$ per million tokens",
               "validated error", "collectives per step"]
    if calibrated:
        columns.insert(2, "calibrated step")
    body = table(columns, rows, numeric=(1, 2, 3, 4, 5) if calibrated else (1, 2, 3, 4),
                 caption="One step per device; the validated error is estimate / published where a published "
                         "run was checked (docs/estimate.md)")
    for line in (text_panel.comparison_line(estimate), text_panel.calibration_line(estimate)):
        if line:
            body += f'<p class="note">{escape(line)}</p>'

    notes: dict[str, list[str]] = {}
    for e in per_device:
        note = (e.get("validation") or {}).get("note") or "not validated on hardware"
        notes.setdefault(note, []).append(str(e.get("device")))
    body += '<ul class="validation">' + "".join(
        f"<li>{escape(', '.join(devices))}: {escape(note)}</li>" for note, devices in notes.items()) + "</ul>"
    if all(isinstance(e.get("seconds_by_family"), dict) and e["seconds_by_family"] for e in per_device) and \
            isinstance(estimate.get("per_step"), dict):
        action = text_panel.action_line({"per_device": per_device, "per_step": estimate["per_step"]})
        body += f'<p class="next-step"><strong>Next step.</strong> {escape(action)}</p>'
    return body


def _scaling(estimate: dict, names: dict[str, str]) -> str:
    """The same step on 1-64 whole chips of each chip device: a visible table, and a chart of the expected
    step time and the $ per million tokens over the chip counts."""
    rows = [r for r in estimate.get("scaling") or [] if isinstance(r, dict) and r.get("points")]
    if not rows:
        return ""
    chips = [p.get("chips") for p in rows[0]["points"]]
    visible = []
    for r in rows:
        name = str(r.get("device"))
        visible.append((Markup(f'<code class="device">{escape(name)}</code>'), *(seconds(p.get("step_seconds")) + (" (does not fit)" if p.get("fits") is False else "")
                                for p in r["points"])))
        if any(p.get("per_million_tokens_usd") is not None for p in r["points"]):
            visible.append((Markup(f'<code class="device">{escape(name)}</code> $ per million tokens'), *(usd(p.get("per_million_tokens_usd"))
                                                               for p in r["points"])))
    body = "<h3>Scaling over chips</h3>" + table(["device", *(f"{c} chips" if c != 1 else "1 chip" for c in chips)],
                                                visible, numeric=tuple(range(1, len(chips) + 1)),
                                                caption="The job's global batch on N whole chips (one rank per "
                                                        "logical core): expected step time")
    step_series = [Series(names.get(r.get("device"), r.get("device")),
                          [float(p.get("step_seconds") or 0.0) * 1e3 for p in r["points"]]) for r in rows]
    panels = [("expected ms per step", step_series)]
    priced = [Series(names.get(r.get("device"), r.get("device")), [p.get("per_million_tokens_usd") for p in r["points"]])
              for r in rows if any(p.get("per_million_tokens_usd") is not None for p in r["points"])]
    if priced:
        panels.append(("$ per million tokens", priced))
    chart = Chart("estimate-scaling", "Estimated step time and price over chip counts",
                  "Line charts, logarithmic, over 1 to 64 chips per chip device: the expected step time in "
                  "milliseconds" + (" and the dollars per million tokens" if priced else "") + ".")
    svg = charts.lines(chart, [float(c) for c in chips], panels, xlabel="chips")
    data = table(["device", "chips", "step (expected)", "collectives exposed", "fits in HBM", "$ per million tokens"],
                 [(names.get(r.get("device"), r.get("device")), p.get("chips"), seconds(p.get("step_seconds")),
                   seconds(p.get("collective_seconds")), {True: "yes", False: "no"}.get(p.get("fits"), "unknown"),
                   usd(p.get("per_million_tokens_usd"))) for r in rows for p in r["points"]],
                 numeric=(1, 2, 3, 5))
    caption = ("Strong scaling: the same step, the job's global batch, shared over more chips; the per-op "
               "dispatch does not shrink, the exposed collectives grow. "
               + ("$ per million tokens where a price per chip-hour is set."
                  if priced else "No device has a price and tokens per step: no $ per million tokens panel."))
    return body + figure(svg, caption, data)


def _memory(per_device: list[dict], names: dict[str, str]) -> str:
    devices = [_row_name(e, names) for e in per_device]
    peak = [float((e.get("memory") or {}).get("peak_bytes") or 0) for e in per_device]
    hbm = [float((e.get("memory") or {}).get("hbm_bytes") or 0) for e in per_device]
    chart = Chart("estimate-memory", "Peak device memory against HBM",
                  "Horizontal bar chart, logarithmic, per device: the peak bytes the run held on the simulated "
                  "device next to the HBM capacity the estimate assumes.")
    svg = charts.bars(chart, devices, [Series("peak of this run", [p / 2**20 for p in peak]),
                                            Series("HBM", [h / 2**20 for h in hbm])],
                           xlabel="device", ylabel="MiB (log scale)", horizontal=True, stacked=False,
                           log_scale=True)
    fits = {True: "yes", False: "no", None: "unknown"}
    rows = [(name, size((e.get("memory") or {}).get("peak_bytes")), size(h), f"{p / h:.2%}" if h else "–",
             fits.get((e.get("memory") or {}).get("fits"), "unknown"))
            for name, p, h, e in zip(devices, peak, hbm, per_device)]
    data = table(["device", "peak", "HBM", "share", "fits"], rows, numeric=(1, 2, 3))
    return figure(svg, "Peak memory per process on the simulated device against the HBM of the device.", data)


def _per_step(estimate: dict) -> str:
    per_step = estimate.get("per_step") or {}
    families = sorted(per_step.get("by_family") or [], key=lambda f: -(f.get("flops") or 0))
    rows = [(f.get("family"), f.get("calls"), f"{float(f.get('flops') or 0) / 1e9:,.3f}",
             size(f.get("bytes")), ", ".join(f"{k}: {float(v) / 1e9:,.3f}"
                                            for k, v in (f.get("flops_by_dtype") or {}).items()) or "–")
            for f in families]
    fallback = per_step.get("fallback") or {}
    text = (f"<p>One steady-state step: {number(per_step.get('ops'))} ops ({number(per_step.get('eager_ops'))} "
            f"eager, {number(per_step.get('compiled_ops'))} in compiled graphs); CPU fallbacks: "
            f"{number(fallback.get('calls'))} calls, {seconds(fallback.get('host_seconds'))} on the host, "
            f"{size(fallback.get('copy_bytes'))} copied.</p>")
    text += table(["family", "calls", "GFLOP", "bytes moved", "GFLOP by dtype"], rows, numeric=(1, 2, 3),
                  caption="The work of one steady-state step (mean over the steady steps)")
    outside = (estimate.get("work") or {}).get("outside_phases") or []
    if outside:
        text += table(["phase", "op calls", "GFLOP", "bytes moved"],
                      [(o.get("kind"), o.get("calls"), f"{float(o.get('flops') or 0) / 1e9:,.3f}", size(o.get("bytes")))
                       for o in outside], numeric=(1, 2, 3),
                      caption="Outside the training steps, over the whole run (not in the step's time or price)")
    return text


def compiles_neffs(entry: dict, kinds: dict[str, Any]) -> bool:
    """Whether the device of a ``per_device`` entry compiles NEFFs: its ``compile.neff``, or in a report
    written before that field, whether the device is a Trainium."""
    neff = (entry.get("compile") or {}).get("neff")
    return neff if isinstance(neff, bool) else kinds.get(entry.get("device"), "trainium") == "trainium"


def _compile_row(name: str, entry: dict, kinds: dict[str, Any]) -> tuple:
    c = entry.get("compile") or {}
    if compiles_neffs(entry, kinds):
        return (name, c.get("eager_neffs"), c.get("graphs"), seconds(c.get("first_run_seconds")),
                seconds(c.get("warm_cache_seconds")))
    note = c.get("note") or "no NEFF compile (not a Trainium)"
    return (name, "–", c.get("graphs"), Markup(f'<span class="muted prose">{escape(note)}</span>'), "–")


def _compile_and_price(per_device: list[dict], names: dict[str, str], tokens: Any, kinds: dict[str, Any]) -> str:
    compile_rows = [_compile_row(_row_name(e, names), e, kinds) for e in per_device]
    body = "<h3>Compile time</h3>" + table(
        ["device", "eager NEFFs", "graphs", "first run (cold cache)", "with a warm NEFF cache"], compile_rows,
        numeric=(1, 2, 3, 4))
    price_rows = []
    for e in per_device:
        price = e.get("price") or {}
        if price.get("per_chip_hour_usd") is None:
            origin, source = "no published price: set one", None
        else:
            origin, source = "third-party figure" if price.get("third_party") else "price", price.get("source")
            if price.get("derived") and price.get("source") != "user":
                origin = (f"derived, not a list price: {price['derived']}; next AWS price update "
                          f"{price.get('next_update') or 'not announced'}")
        price_rows.append((_row_name(e, names), usd(price.get("per_chip_hour_usd")),
                           usd(price.get("per_step_usd")), usd(price.get("per_million_tokens_usd")),
                           price.get("dated") or "–",
                           Markup(escape(origin) + (f": {link(source, 'source').html}" if source else ""))))
    body += "<h3>Price</h3>" + table(
        ["device", "$ per chip-hour", "$ per step", "$ per million tokens", "dated", "source"], price_rows,
        numeric=(1, 2, 3))
    if any((e.get("price") or {}).get("per_chip_hour_usd") is None for e in per_device):
        body += ('<p class="muted">A device without a price has none published: set $ per chip-hour with '
                 "<code>--price</code> or in <code>[tool.neuron-port]</code>.</p>")
    if tokens is None:
        body += ('<p class="muted">$ per million tokens needs the tokens per step: name them with '
                 "<code>--tokens-per-step</code> or in <code>[tool.neuron-port]</code>.</p>")
    return body


def _devices_and_assumptions(estimate: dict) -> str:
    devices = [(Markup(f'{escape(d.get("name") or d.get("id"))} <code class="device">{escape(d.get("id"))}</code>'),
                d.get("kind"),
                ", ".join(f"{k}: {v:g}" for k, v in (d.get("peak_tflops") or {}).items()),
                d.get("hbm_gbps"), d.get("hbm_gib"),
                Markup(" ".join(link(u, f"[{i + 1}]").html for i, u in enumerate(d.get("sources") or []))))
               for d in estimate.get("devices") or []]
    body = "<h3>Devices</h3>" + table(["device", "kind", "peak TFLOPS", "HBM GB/s", "HBM GiB", "sources"], devices,
                                      numeric=(3, 4))
    assumptions = [(Markup(f"<code>{escape(a.get('name'))}</code>"), f"{a.get('value')} {a.get('unit') or ''}".strip(),
                    a.get("doc"), link(a.get("source"), "source") if a.get("source") else "–",
                    Markup(f"<code>{escape(a.get('configurable'))}</code>") if a.get("configurable") else "–")
                   for a in estimate.get("assumptions") or []]
    body += "<h3>Assumptions</h3>" + table(["name", "value", "meaning", "source", "set with"], assumptions,
                                           limit=len(assumptions))
    return body


def _tokens_problem(steps: dict) -> str:
    """Why a tokens-per-step spec counted nothing, with the embedding lookups to pick from (the text report
    shows the same list)."""
    error = (steps.get("tokens_from") or {}).get("error") if isinstance(steps.get("tokens_from"), dict) else None
    if not error:
        return ""
    first, _, listed = str(error).partition("\n")
    candidates = [line.strip() for line in listed.splitlines() if line.strip()]
    body = f'<p class="tokens-problem">{escape(first)}</p>'
    if candidates:
        body += ('<ul class="candidates">' + "".join(f"<li><code>{escape(c)}</code></li>" for c in candidates)
                 + "</ul><p class=\"muted\">Pick one with <code>neuron-port estimate REPORT.json "
                 "--tokens-per-step SPEC</code>.</p>")
    return body


def render_estimate(estimate: dict) -> str:
    """The body of the page's Estimate section."""
    if not isinstance(estimate, dict):
        raise ValueError("`estimate` is not an object")
    steps = estimate.get("steps") or {}
    per_device = [e for e in estimate.get("per_device") or [] if isinstance(e, dict)]
    names = _device_names(estimate)
    tokens = steps.get("tokens_per_step")
    body = (f'<p class="note">{escape(estimate.get("note") or "Estimated from the simulated run; not a measurement.")}'
            "</p>"
            f"<p>Steps by {escape(steps.get('clock'))}: {number(steps.get('measured'))} measured, "
            f"{number(steps.get('warmup'))} warm-up, {number(steps.get('steady'))} steady; tokens per step: "
            f"{number(tokens)}; logical cores assumed: {number(estimate.get('cores'))}.</p>"
            + _tokens_problem(steps))
    if per_device:
        body += (_at_a_glance(estimate, per_device, names) + _time_by_family(per_device, names)
                 + _eager_compiled(per_device, names) + _scaling(estimate, names))
    body += _per_step(estimate)
    if per_device:
        kinds = {d.get("id"): d.get("kind") for d in estimate.get("devices") or []}
        body += _memory(per_device, names) + _compile_and_price(per_device, names, tokens, kinds)
    return body + _devices_and_assumptions(estimate)
