"""The page's compile timeline: new op signatures per step, in the run's time order, with its phases
(neuron_port/check/aggregate/phases.py) labelled.

Training steps are numbered by the optimizer clock; an evaluation or a generation is a segment of its own
(its steps are its calls, shaded and named above the bars: "generation after optimizer step 6"), placed
where it ran. Each phase has its own warm-up; what comes after it is drawn in its phase's colour, so a
generation's compiles are never drawn as training's steady state. A report without phases (an older
simulator) draws one clock as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from neuron_port.reporters.html import charts
from neuron_port.reporters.html.charts import Chart, Series
from neuron_port.reporters.html.parts import code_cell, figure, section, site_text, table

MAX_TIMELINE_BARS = 60
MAX_TIMELINE_ROWS = 200
CLOCK_LABELS = {"optimizer": "optimizer step", "forward": "forward call of the outermost module",
                "signatures": "k-th new signature at a line", "mixed": "step (processes differ in clock)"}
PREFIX = {"evaluation": "E", "generation": "G", "setup": "S"}
AFTER_WARMUP = {"training": "training after warm-up", "evaluation": "evaluation after its warm-up",
                "generation": "generation after its warm-up", "setup": "setup"}


@dataclass(frozen=True)
class Segment:
    """The steps of one phase in time order (training: all its steps; an evaluation or generation: its calls)."""

    kind: str  # training | evaluation | generation | setup ("training" for a report without phases)
    label: str
    after_step: int  # optimizer steps before it (where it goes between training steps)
    number: Optional[int]  # its phase number (None: training or one clock)
    counts: dict[int, int]


def segments(runtime: dict) -> list[Segment]:
    """The timeline's phases in time order, each with its new signatures per step."""
    found: dict[tuple, Segment] = {}
    for entry in runtime.get("eager_compiles") or []:
        for seen in entry.get("first_seen") or []:
            kind = seen.get("phase") or "training"
            number = seen.get("phase_number") if kind != "training" else None
            key = (kind, number)
            if key not in found:
                after = _after_step(runtime, number)
                found[key] = Segment(kind, seen.get("phase_label") or kind, after, number, {})
            counts = found[key].counts
            counts[int(seen["step"])] = counts.get(int(seen["step"]), 0) + int(seen["signatures"])
    training = [s for s in found.values() if s.kind == "training"]
    others = sorted((s for s in found.values() if s.kind != "training"),
                    key=lambda s: (s.kind != "setup", s.after_step, s.number or 0))
    if not training:
        return others
    # training is cut where another phase ran: steps before it, the phase, the steps after
    out, done = [], 0
    whole = training[0]
    last = max(whole.counts)
    for other in others:
        if other.kind == "setup" or other.after_step <= done:
            out.append(other)
            continue
        cut = min(other.after_step, last + 1)
        if cut > done:
            out.append(Segment("training", "training", done, None, {s: whole.counts.get(s, 0) for s in range(done, cut)}))
            done = cut
        out.append(other)
    if done <= last:
        out.append(Segment("training", "training", done, None, {s: whole.counts.get(s, 0)
                                                                  for s in range(done, last + 1)}))
    return out


def _after_step(runtime: dict, number: Optional[int]) -> int:
    for phase in (runtime.get("shapes") or {}).get("phases") or []:
        if phase.get("phase") == number:
            return int(phase.get("start_step") or 0)
    return 0


def _bars(parts: list[Segment], warmup: int) -> tuple[list[str], dict[str, list[int]], list[tuple[int, int, str]], int]:
    """Bar labels, heights per series, the shaded spans of the phases other than training, and how many
    steps a bar holds past warm-up (1: one bar per step)."""
    total = sum(max(s.counts) - min(s.counts) + 1 if s.kind != "training" else len(s.counts) for s in parts)
    width = max(1, -(-total // MAX_TIMELINE_BARS)) if total > MAX_TIMELINE_BARS else 1
    labels: list[str] = []
    heights: dict[str, list[int]] = {}
    spans: list[tuple[int, int, str]] = []
    for part in parts:
        steps = sorted(part.counts) if part.kind == "training" else list(range(0, max(part.counts) + 1))
        first_bar = len(labels)
        groups = [(s, s) for s in steps if s < warmup]
        late = [s for s in steps if s >= warmup]
        groups += [(late[i], late[min(i + width, len(late)) - 1]) for i in range(0, len(late), width)]
        prefix = PREFIX.get(part.kind, "")
        for first, end in groups:
            count = sum(part.counts.get(s, 0) for s in range(first, end + 1))
            labels.append(prefix + (str(first) if first == end else f"{first}–{end}"))
            series = "warm-up" if first < warmup else AFTER_WARMUP.get(part.kind, "after warm-up")
            for name in {*heights, series}:
                heights.setdefault(name, [0] * (len(labels) - 1)).append(count if name == series else 0)
        if part.kind != "training":
            spans.append((first_bar, len(labels) - 1, part.label))
    return labels, heights, spans, width


def timeline_section(runtime: dict) -> str:
    shapes = runtime.get("shapes") or {}
    parts = [p for p in segments(runtime) if p.counts]
    if not parts:
        return section("timeline", "Compile timeline", "<p>No eager compile was recorded.</p>")
    warmup = int(shapes.get("warmup_steps") or 0)
    phased = any(p.number is not None for p in parts)
    clock = "step" if phased else CLOCK_LABELS.get(shapes.get("clock"), "step")
    labels, heights, spans, width = _bars(parts, warmup)
    order = ["warm-up", *AFTER_WARMUP.values(), "after warm-up"]
    series = [Series(name if name != "after warm-up" else "steady state", heights[name])
              for name in order if name in heights]
    total = sum(sum(p.counts.values()) for p in parts)
    warm_total = sum(heights.get("warm-up", []))
    names = ", ".join(dict.fromkeys(p.label for p in parts))
    chart = Chart("timeline", "New op signatures per step",
                  f"Bar chart of new eager op signatures (each an eager NEFF compile on a cold cache) per {clock}, "
                  f"in time order ({names}): {warm_total:,} in the warm-up steps of their phase, "
                  f"{total - warm_total:,} after.")
    if phased:
        xlabel = "optimizer step; E k, G k: call k of an evaluation, a generation" + (" (grouped)" if width > 1 else "")
    else:
        xlabel = f"{clock}s (grouped)" if width > 1 else clock
    svg = charts.bars(chart, labels, series, xlabel=xlabel, ylabel="new signatures", spans=spans)
    caption = (f"New signatures per {clock}. Warm-up: the first {warmup} steps of each phase (training's optimizer "
               f"steps; an evaluation's or a generation's calls); a signature that first appears later compiles "
               f"again in steady state (NP902). {total:,} shown")
    first_run = shapes.get("first_run_compiles")
    if isinstance(first_run, int) and first_run > total:
        caption += f" of {first_run:,} in the run (the report lists the sites with the most)"
    rows = [(p.label, s, "warm-up" if s < warmup else "after warm-up", p.counts[s])
            for p in parts for s in sorted(p.counts) if p.counts[s]]
    data = table(["phase", "step", "", "new signatures"], rows, numeric=(1, 3), limit=MAX_TIMELINE_ROWS)
    late = sorted((e for e in runtime.get("eager_compiles") or [] if e.get("after_warmup")),
                  key=lambda e: -e["after_warmup"])
    body = figure(svg, caption + ".", data)
    if late:
        body += (f"<details><summary>{len(late):,} line(s) still compile after warm-up, the most first</summary>"
                 + table(
            ["op", "site", "signatures", "after warm-up", "code"],
            [(e.get("op"), site_text(e.get("site")), e.get("unique_signatures"), e.get("after_warmup"),
              code_cell(e.get("site"))) for e in late], numeric=(2, 3)) + "</details>")
    return section("timeline", "Compile timeline", body)
