"""The "Estimate" panel of the text report (`check`, `neuron-port estimate`): per device the step time as a
range, the compiled step, whether the peak memory fits, the price per step and per million tokens; then
the first-run compile time and where the step's time goes. Rendered from the JSON ``estimate`` section
only, so a saved report renders the same."""

from __future__ import annotations

from typing import Any, Optional

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table


def seconds(value: Optional[float]) -> str:
    if value is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale or unit == "us":
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} s"


def duration(value: float) -> str:
    return f"{value / 3600:.3g} h" if value >= 3600 else f"{value / 60:.3g} min" if value >= 60 else seconds(value)


def usd(value: Optional[float]) -> str:
    return "-" if value is None else f"${value:.3g}"


def quantity(value: float, unit: str) -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def estimate_lines(section: dict[str, Any]) -> list[str]:
    steps = section["steps"]
    per_step = section["per_step"]
    flops = sum(r["flops"] for r in per_step["by_family"])
    nbytes = sum(r["bytes"] for r in per_step["by_family"])
    tokens = steps.get("tokens_per_step")
    fallback = per_step["fallback"]
    return [
        section["note"],
        f"steps: {steps['measured']} measured ({steps['clock']} clock), {steps['warmup']} warm-up, "
        f"{steps['steady']} steady; on {section['cores']} logical core(s)"
        + (f"; {tokens:,.0f} tokens per step" if tokens else "; tokens per step: not set (--tokens-per-step)"),
        f"one step: {per_step['ops']:,.0f} op calls ({per_step['eager_ops']:,.0f} eager), "
        f"{quantity(flops, 'FLOP')}, {quantity(nbytes, 'B')} moved; CPU fallbacks {fallback['calls']:,.1f} "
        f"call(s), {seconds(fallback['host_seconds'])} on the host",
    ]


def device_table(section: dict[str, Any]) -> Table:
    table = Table(title="Estimated step time and price (lower bound .. expected)", title_justify="left",
                  title_style="bold", header_style="bold", expand=False)
    for column in ("device", "step", "compiled step", "peak memory / HBM", "$/chip-h", "$/step", "$/M tokens"):
        table.add_column(column, overflow="fold")
    chips = {d["id"]: d.get("price_device", d["id"]) for d in section["devices"]}
    for row in section["per_device"]:
        step, compiled, memory, price = (row["step_seconds"], row["compiled_step_seconds"], row["memory"],
                                         row["price"])
        fits = ("-" if memory["fits"] is None else
                f"{quantity(memory['peak_bytes'], 'B')} / {quantity(memory['hbm_bytes'], 'B')}"
                f" {'fits' if memory['fits'] else 'DOES NOT FIT'}")
        hourly = usd(price["per_chip_hour_usd"])
        if price["per_chip_hour_usd"] is not None and price.get("third_party"):
            hourly += " (3rd party)"
        elif price["per_chip_hour_usd"] is None:
            hourly = "not set"
        table.add_row(row["device"], f"{seconds(step['lower'])} .. {seconds(step['expected'])}",
                      f"{seconds(compiled['lower'])} .. {seconds(compiled['expected'])}", fits, hourly,
                      usd(price["per_step_usd"]), usd(price["per_million_tokens_usd"]))
    return table


def where_time_goes(row: dict[str, Any]) -> str:
    parts = sorted(row["seconds_by_family"].items(), key=lambda kv: -kv[1])
    total = sum(v for _, v in parts) or 1.0
    shown = [f"{name} {value / total:.0%}" for name, value in parts if value / total >= 0.01][:6]
    return f"where the expected step time goes on {row['device']}: " + (", ".join(shown) or "-")


def render_estimate(console: Console, section: Optional[dict[str, Any]]) -> None:
    if not section:
        return
    lines = estimate_lines(section)
    chips = {d["id"]: d.get("price_device", d["id"]) for d in section["devices"]}
    first = section["per_device"][0] if section["per_device"] else None
    if first is not None:
        c = first["compile"]
        lines.append(f"first run: {c['eager_neffs']:,} eager NEFF compile(s) and {c['graphs']} graph compile(s), "
                     f"about {duration(c['first_run_seconds'])}; with a warm shared NEFF cache "
                     f"{duration(c['warm_cache_seconds'])}")
        core = next((r for r in section["per_device"] if r["device"].endswith("-core")), first)
        lines.append(where_time_goes(core))
    named = [f"{a['name']}={a['value']:g}{a['unit'] and ' ' + a['unit']}" for a in section["assumptions"]]
    lines.extend("assumptions: " * (i == 0) + "             " * (i > 0) + ", ".join(named[i:i + 3])
                 for i in range(0, len(named), 3))
    if any(r["price"]["per_chip_hour_usd"] is None for r in section["per_device"]):
        unset = sorted({chips.get(r["device"], r["device"]) for r in section["per_device"]
                        if r["price"]["per_chip_hour_usd"] is None})
        lines.append("no published price for " + ", ".join(unset) + ": set one with --price DEVICE=USD_PER_CHIP_HOUR")
    console.print(Panel(escape("\n".join(lines)), title="Estimate", expand=False))
    console.print(device_table(section))
