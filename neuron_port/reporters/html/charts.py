"""Charts of the HTML report: matplotlib (the `html` extra) drawn into inline SVG.

matplotlib is imported here, in functions only, so nothing that runs without --html ever loads it. Each chart
is drawn with placeholder colours that are then replaced by ``currentColor`` (text, axes) and CSS variables
(series), so one SVG follows the page's light or dark palette. Output is deterministic (fixed hash salt, no
date), and every id inside a chart gets the chart's own prefix: several SVGs share one page.
"""

from __future__ import annotations

import html
import io
import re
from dataclasses import dataclass
from typing import Optional, Sequence

MATPLOTLIB_MISSING = ("the HTML report draws its charts with matplotlib, which is not installed: "
                      "pip install 'neuron-port[html]'")

# placeholder colours, swapped for CSS after drawing; nothing in a chart uses them otherwise
_FOREGROUND = "#010203"
_MUTED = "#010204"
_SERIES = tuple(f"#0201{i:02x}" for i in range(1, 13))
SERIES_COUNT = len(_SERIES)
# Text size in the drawing's units (points of a 10-inch, 720-unit wide figure). The page never draws a
# chart narrower than those 720 units (style.py: min-width, the chart scrolls in its box instead), so no
# chart text is ever shown smaller than FONT_SIZE CSS pixels.
FONT_SIZE = 11
WIDTH_INCHES = 10.0


class ChartsUnavailable(RuntimeError):
    """matplotlib cannot be imported."""


def require_matplotlib() -> None:
    """Raise ChartsUnavailable (with the install command) when matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ChartsUnavailable(MATPLOTLIB_MISSING) from exc


@dataclass(frozen=True)
class Series:
    label: str
    values: Sequence[float]


@dataclass(frozen=True)
class Chart:
    """One chart: an id (unique on the page), a title (the SVG's <title>) and a longer description."""
    chart_id: str
    title: str
    description: str


def _figure(width: float, height: float):
    require_matplotlib()
    from matplotlib import rcParams
    from matplotlib.figure import Figure

    rcParams["svg.hashsalt"] = "neuron-port"  # stable ids: a second render writes the same bytes
    rcParams["svg.fonttype"] = "none"  # real <text>: selectable, and it takes the page's colour
    rcParams["font.size"] = FONT_SIZE  # axis labels and anything else not sized below
    # transparent: the page colours the background
    return Figure(figsize=(width, height), layout="constrained", facecolor="none")


def _style_axes(axes) -> None:
    axes.set_facecolor("none")
    axes.tick_params(colors=_FOREGROUND, labelcolor=_FOREGROUND)
    for side, spine in axes.spines.items():
        spine.set_visible(side in ("left", "bottom"))
        spine.set_color(_FOREGROUND)
    axes.xaxis.label.set_color(_FOREGROUND)
    axes.yaxis.label.set_color(_FOREGROUND)
    axes.set_axisbelow(True)


def _legend(figure, count: int) -> None:
    # above the plot, never over a bar
    if count > 1:
        figure.legend(loc="outside upper center", ncols=min(count, 6), frameon=False, fontsize=FONT_SIZE,
                      labelcolor=_FOREGROUND)


def _svg(figure, chart: Chart) -> str:
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    buffer = io.StringIO()
    FigureCanvasSVG(figure).print_svg(buffer, metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    # matplotlib's <style> would apply to the whole page; the page's CSS has it, scoped to charts
    text = re.sub(r"<defs>\s*<style[^>]*>.*?</style>\s*</defs>\s*", "", text, flags=re.S)
    # ids are per chart: prefix every definition and every reference to it
    prefix = chart.chart_id + "-"
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', text)
    text = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", text)
    text = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', text)
    text = text.replace(_FOREGROUND, "currentColor").replace(_MUTED, "var(--muted)")
    for index, colour in enumerate(_SERIES):
        text = text.replace(colour, f"var(--series-{index})")
    # the size comes from the page (CSS width, the viewBox keeps the proportions)
    opening_end = text.index(">")
    opening = re.sub(r'\s(width|height)="[^"]*"', "", text[:opening_end])
    title_id = f"{chart.chart_id}-title"
    description_id = f"{chart.chart_id}-desc"
    opening += (f' role="img" class="chart" aria-labelledby="{title_id}" aria-describedby="{description_id}"'
                f' data-chart="{html.escape(chart.chart_id)}">'
                f'<title id="{title_id}">{html.escape(chart.title)}</title>'
                f'<desc id="{description_id}">{html.escape(chart.description)}</desc>')
    return opening + text[opening_end + 1:].rstrip() + "\n"


def bars(chart: Chart, categories: Sequence[str], series: Sequence[Series], *, xlabel: str, ylabel: str,
         stacked: bool = True, horizontal: bool = False, log_scale: bool = False, width: float = WIDTH_INCHES,
         height: Optional[float] = None, spans: Sequence[tuple[int, int, str]] = ()) -> str:
    """A bar chart: one bar per category, the series stacked (or side by side) on it; ``spans`` shade the
    categories ``first..last`` of a vertical chart and name them at the top (the phases of a timeline)."""
    rows = max(1, len(categories))
    figure = _figure(width, height or (max(2.4, 0.32 * rows + 1.2) if horizontal else 3.6))
    axes = figure.add_subplot()
    _style_axes(axes)
    positions = list(range(len(categories)))
    offsets = [0.0] * len(categories)
    thickness = 0.8 if stacked else 0.8 / max(1, len(series))
    for index, one in enumerate(series):
        colour = _SERIES[index % SERIES_COUNT]
        values = [float(v) for v in one.values]
        shifted = positions if stacked else [p - 0.4 + thickness * (index + 0.5) for p in positions]
        draw = axes.barh if horizontal else axes.bar
        size = {"height": thickness} if horizontal else {"width": thickness}
        base = {"left": offsets} if horizontal else {"bottom": offsets}
        draw(shifted, values, color=colour, label=one.label, **size, **(base if stacked else {}))
        if stacked:
            offsets = [o + v for o, v in zip(offsets, values)]
    if horizontal:
        axes.set_yticks(positions, list(categories), fontsize=FONT_SIZE)
        axes.invert_yaxis()  # the first category on top, as in the table under the chart
        axes.set_xlabel(ylabel)
        axes.set_ylabel(xlabel)
        if log_scale:
            axes.set_xscale("log")
    else:
        # a long timeline gets about a dozen labelled ticks, not one per bar
        every = -(-len(categories) // 12) if len(categories) > 24 else 1
        axes.set_xticks(positions[::every], list(categories)[::every], fontsize=FONT_SIZE,
                        rotation=45 if max((len(c) for c in categories), default=0) > 6 else 0)
        axes.set_xlabel(xlabel)
        axes.set_ylabel(ylabel)
        if log_scale:
            axes.set_yscale("log")
        if spans:
            top = max(offsets, default=0) if stacked else max((max(o.values, default=0) for o in series), default=0)
            axes.set_ylim(top=max(float(top), 1.0) * 1.3)  # room for the names above the bars
            for first, last, label in spans:
                axes.axvspan(first - 0.5, last + 0.5, color=_MUTED, alpha=0.15, zorder=0, linewidth=0)
                axes.text(first - 0.4, 0.97, label, transform=axes.get_xaxis_transform(), ha="left", va="top",
                          fontsize=FONT_SIZE, color=_FOREGROUND)
    grid = axes.xaxis if horizontal else axes.yaxis
    grid.grid(True, color=_MUTED, linewidth=0.5, alpha=0.6)
    _legend(figure, len(series))
    return _svg(figure, chart)


def ranges(chart: Chart, categories: Sequence[str], lower: Sequence[Sequence[float]],
           expected: Sequence[Sequence[float]], labels: Sequence[str], *, unit: str,
           log_scale: bool = False) -> str:
    """Horizontal bars per category and series up to ``expected``, with a tick at ``lower`` (an estimate:
    the likely value, and the bound it cannot beat)."""
    figure = _figure(WIDTH_INCHES, max(2.4, 0.3 * len(categories) * max(1, len(labels)) + 1.2))
    axes = figure.add_subplot()
    _style_axes(axes)
    thickness = 0.8 / max(1, len(labels))
    for index, label in enumerate(labels):
        centres = [p - 0.4 + thickness * (index + 0.5) for p in range(len(categories))]
        axes.barh(centres, [float(v[index]) for v in expected], height=thickness * 0.9,
                  color=_SERIES[index % SERIES_COUNT], label=f"{label} (expected)")
        axes.scatter([float(v[index]) for v in lower], centres, marker="|", s=160, linewidths=2,
                     color=_FOREGROUND, zorder=3, label="lower bound" if index == 0 else None)
    axes.set_yticks(list(range(len(categories))), list(categories), fontsize=FONT_SIZE)
    axes.invert_yaxis()
    axes.set_xlabel(unit)
    if log_scale:
        axes.set_xscale("log")
    axes.xaxis.grid(True, color=_MUTED, linewidth=0.5, alpha=0.6)
    _legend(figure, len(labels) + 1)
    return _svg(figure, chart)


def lines(chart: Chart, x: Sequence[float], panels: Sequence[tuple[str, Sequence[Series]]], *, xlabel: str,
          log_x: bool = True) -> str:
    """Panels side by side, one line with markers per series over the same ``x`` (a series keeps its colour
    in every panel; a ``None`` value leaves a gap). A panel whose values span more than 10x is drawn on a
    log scale. The legend, above, names each series once, in as many columns as its labels fit."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    count = max(1, len(panels))
    labels = list(dict.fromkeys(one.label for _, series in panels for one in series))
    longest = max((len(label) for label in labels), default=1)
    columns_of_legend = max(1, min(len(labels), 120 // (longest + 8)))
    legend_rows = -(-len(labels) // columns_of_legend)
    figure = _figure(WIDTH_INCHES, 3.0 + 0.3 * legend_rows)
    columns = figure.subplots(1, count, squeeze=False)[0]
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    for axes, (ylabel, series) in zip(columns, panels):
        _style_axes(axes)
        drawn = [float(v) for one in series for v in one.values if v is not None and float(v) > 0]
        for one in series:
            colour = _SERIES[labels.index(one.label) % SERIES_COUNT]
            values = [float("nan") if v is None else float(v) for v in one.values]
            axes.plot(list(x), values, color=colour, marker="o", markersize=5, linewidth=1.5,
                      label=one.label if axes is columns[0] else None)
        if log_x:
            axes.set_xscale("log", base=2)
        if drawn and max(drawn) > 10 * min(drawn):
            axes.set_yscale("log")
        axes.yaxis.set_major_formatter(plain)
        axes.yaxis.set_minor_formatter(NullFormatter())
        axes.set_xticks(list(x), [f"{v:g}" for v in x], fontsize=FONT_SIZE)
        axes.tick_params(axis="x", which="minor", bottom=False, labelbottom=False)
        axes.set_xlabel(xlabel)
        axes.set_ylabel(ylabel)
        axes.grid(True, color=_MUTED, linewidth=0.5, alpha=0.6)
    if len(labels) > 1:
        figure.legend(loc="outside upper center", ncols=columns_of_legend, frameon=False, fontsize=FONT_SIZE,
                      labelcolor=_FOREGROUND)
    return _svg(figure, chart)
