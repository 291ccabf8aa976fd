"""The "Estimate" panel of the text report (`check`, `neuron-port estimate`): per device the step time as a
range, the compiled step, whether the peak memory fits, the price per step and per million tokens; then
the first-run compile time and where the step's time goes. Rendered from the JSON ``estimate`` section
only, so a saved report renders the same."""

from __future__ import annotations

import math
from typing import Any, Optional

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text



def sig2(value: float) -> str:
    """Two significant digits, never in exponent form: 687 -> 690, 1.43 -> 1.4, 0.0346 -> 0.035."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    digits = 1 - math.floor(math.log10(abs(value)))
    rounded = round(value, digits)
    return f"{rounded:.{max(digits, 0)}f}"


def seconds(value: Optional[float]) -> str:
    if value is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale or unit == "us":
            return f"{sig2(value / scale)} {unit}"
    return f"{sig2(value)} s"


def duration(value: float) -> str:
    return f"{sig2(value / 3600)} h" if value >= 3600 else f"{sig2(value / 60)} min" if value >= 60 else seconds(value)


def usd(value: Optional[float]) -> str:
    return "-" if value is None else f"${sig2(value)}"


def quantity(value: float, unit: str) -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{sig2(value / scale)} {prefix}{unit}"
    return f"{sig2(value)} {unit}"


def tokens_text(steps: dict[str, Any]) -> str:
    """The tokens of the steps line: the number and, when counted from the shapes, the lookup it came from."""
    tokens, source = steps.get("tokens_per_step"), steps.get("tokens_from")
    if source and source.get("error"):
        return f"; tokens per step: not set ({source['error']})"
    if not tokens:
        return "; tokens per step: not set (--tokens-per-step)"
    if not source:
        return f"; {tokens:,.0f} tokens per step"
    module = f" in {source['module']}" if source.get("module") else ""
    return (f"; {tokens:,.0f} tokens per step (the indices of {source['op']} at {source['site']}{module}, "
            f"from `{source['spec']}`)")


def estimate_lines(section: dict[str, Any]) -> list[str]:
    steps = section["steps"]
    per_step = section["per_step"]
    flops = sum(r["flops"] for r in per_step["by_family"])
    nbytes = sum(r["bytes"] for r in per_step["by_family"])
    fallback = per_step["fallback"]
    return [
        section["note"],
        f"steps: {steps['measured']} measured ({steps['clock']} clock), {steps['warmup']} warm-up, "
        f"{steps['steady']} steady; on {section['cores']} logical core(s)"
        + tokens_text(steps),
        f"one step: {per_step['ops']:,.0f} op calls ({per_step['eager_ops']:,.0f} eager), "
        f"{quantity(flops, 'FLOP')}, {quantity(nbytes, 'B')} moved; "
        + (f"CPU fallbacks {mean_count(fallback['calls'])} call(s), {seconds(fallback['host_seconds'])} on the host"
           if fallback["calls"] else "no CPU fallback"),
        *outside_line(section.get("work", {}).get("outside_phases") or []),
    ]


def mean_count(value: float) -> str:
    """A per-step mean count: whole numbers as such (``3``), others with one decimal (``2.5``)."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def outside_line(phases: list[dict[str, Any]]) -> list[str]:
    """The run's work outside its training steps, per kind of phase (not in the step's time or price)."""
    if not phases:
        return []
    parts = [f"{p['kind']} {p['calls']:,.0f} op calls, {quantity(p['flops'], 'FLOP')}" for p in phases]
    return ["outside the training steps (over the whole run, not in the step): " + "; ".join(parts)]


def span(pair: dict[str, float]) -> str:
    """``lower-expected unit`` in the unit of the expected time."""
    expected = pair["expected"]
    unit, scale = next(((u, k) for u, k in (("s", 1.0), ("ms", 1e-3)) if expected >= k), ("us", 1e-6))
    return f"{sig2(pair['lower'] / scale)}-{sig2(expected / scale)} {unit}"


def device_table(section: dict[str, Any]) -> Table:
    calibration = section.get("calibration")
    table = Table(title="Estimated time and price of one step (lower bound-expected)", title_justify="left",
                  title_style="bold", header_style="bold", expand=False)
    columns = ["device", "step", "compiled", "$/step", "$/M tokens"]
    if calibration:
        columns[2:2] = ["calibrated step"]
        columns.append("calibrated $/M tokens")
    for column in (*columns, "error"):
        table.add_column(column, no_wrap=True)
    for row in section["per_device"]:
        price = row["price"]
        cells = [device_label(row), span(row["step_seconds"]), span(row["compiled_step_seconds"]),
                 usd(price["per_step_usd"]), usd(price["per_million_tokens_usd"])]
        if calibration:
            cal = row.get("calibrated")
            measured = row.get("measured_seconds")
            cells[2:2] = [seconds(cal["step_seconds"]) if cal else
                          f"measured {seconds(measured)}" if measured is not None else "-"]
            cells.append(usd(cal["per_million_tokens_usd"]) if cal else "-")
        table.add_row(*cells, validated(row))
    return table


def device_label(row: dict[str, Any]) -> str:
    """The device and its silicon: ``trn2-chip x16 (trn2.48xlarge)``, ``trn2-chip x8 (equal chips)``,
    ``h100-sxm x8``, ``trn2-lnc2-core x8 (2 chips)``; ``*`` marks the Trainium row compared."""
    instance, shape = row.get("instance"), row.get("shape") or {}
    chips = (row.get("price") or {}).get("chips")
    mark = " *" if shape.get("compared") else ""
    if instance:
        return f"{row['device']} x{instance['chips']} ({instance['spec']}){mark}"
    if shape:
        return f"{row['device']} x{shape['chips']} ({shape['basis']}){mark}"
    if chips is None:
        return row["device"]
    ranks = (row.get("collectives") or {}).get("ranks")
    if row["device"].endswith("-core") and ranks:
        return f"{row['device']} x{ranks} ({chips:g} chip{'s' if chips != 1 else ''})"
    return f"{row['device']} x{chips:g}"


def comparison_line(section: dict[str, Any]) -> Optional[str]:
    """Which Trainium shapes the job's GPUs are compared with, and how to get the rows per core."""
    comparison = section.get("comparison") or {}
    gpu = comparison.get("gpu")
    if not gpu:
        if comparison.get("basis") == "cores":
            return (f"compared: the Trainium rows on the job's {section['cores']} logical core(s) "
                    "(--compare cores); like-for-like shapes by default")
        return None
    shapes = [device_label(r) for r in section["per_device"] if r.get("shape")]
    on = f" ({gpu['instance']})" if gpu.get("instance") else ""
    return (f"compared like for like: a job of {gpu['chips']} {gpu['device']}{on} against "
            f"{', '.join(shapes)}; * the instance a user rents for it, the row compared (equal chips and equal HBM "
            "beside it; --compare cores: the rows on the job's logical cores, and per core)")


def calibration_line(section: dict[str, Any]) -> Optional[str]:
    """The model's ratio on the user's measured GPU step, and what the calibrated columns are."""
    c = section.get("calibration")
    if not c:
        return None
    on = f" on {c['instance']}" if c.get("instance") else ""
    return (f"calibration: your {c['device']} step{on} measured {seconds(c['measured_seconds'])}, the model "
            f"estimates {seconds(c['estimated_seconds'])}: measured / estimated = {c['ratio']:.2f}. The "
            f"'calibrated' columns are each Trainium row's expected time and price x {c['ratio']:.2f} (the model's "
            "error on your GPU carried over, assuming it errs alike on Trainium); 'step', 'compiled', '$/step' "
            "and '$/M tokens' are the model alone (uncalibrated)")


def instances_line(section: dict[str, Any]) -> Optional[str]:
    """What `--instance` sized: each instance's chips of its device row, the other rows on --cores."""
    sized = section.get("instances") or []
    if not sized:
        return None
    parts = [f"{s['spec']} = {s['chips']} {s['device']} chip(s)" for s in sized]
    return (f"instances: {'; '.join(parts)}, one rank per logical core (GPU); other rows on "
            f"{section['cores']} logical core(s)")


def validated(row: dict[str, Any]) -> str:
    """The estimate/published range of the runs on the row's kind of GPU, and over every run; or that the
    device was never checked."""
    v = row.get("validation") or {}
    if not v.get("validated"):
        return "not validated"
    own = f"{v.get('kind', '')} x{v['ratio_low']:.2f}-{v['ratio_high']:.2f}".strip()
    if "all_ratio_low" in v:
        return f"{own} (all x{v['all_ratio_low']:.2f}-{v['all_ratio_high']:.2f})"
    return own


def validation_line(section: dict[str, Any]) -> str:
    """The error of the estimate where it was measured, beside the numbers ("error" column)."""
    notes: dict[str, list[str]] = {}
    for row in section["per_device"]:
        v = row.get("validation") or {}
        key = v.get("note") or "not validated on hardware"
        if row["device"] not in notes.setdefault(key, []):
            notes[key].append(row["device"])
    return "validated error (the 'error' column): " + "; ".join(f"{', '.join(d)}: {n}" for n, d in notes.items())


def collectives_line(section: dict[str, Any]) -> str:
    """What the collectives cost on each device, or why they are not modelled: never silent."""
    parts = []
    for row in section["per_device"]:
        c = row.get("collectives")
        if c is None:
            parts.append(f"{row['device']}: collectives not modelled (a report written before they were)")
        elif not c.get("modelled"):
            parts.append(f"{row['device']}: {c.get('note') or 'collectives not modelled'}")
        else:
            assumed = " (assumed data parallel)" if c.get("assumed") else ""
            parts.append(f"{row['device']}: {seconds(c['seconds'])}, {seconds(c['exposed_seconds'])} exposed, "
                         f"{c['sharding']} over {c['ranks']} ranks at {c['gbps']:.0f} GB/s{assumed}")
    return "collectives per step: " + "; ".join(parts)


ACTIONS = {
    "dispatch": "per-op host dispatch: torch.compile the model, or a larger batch per step",
    "fallback": "CPU fallbacks: the ops and lines in the fallback findings above run on the host",
    "collectives": "exposed collectives: fewer ranks, a larger batch per rank, or overlap (bucketing, prefetch)",
    "attention": "attention: a fused (flash) kernel is assumed; a shorter sequence or fewer heads",
    "compiles": ("eager NEFF compiles in every step: the NP902 findings name the lines and the fix (a tensor lr, "
                 "capturable=True, padding to buckets)"),
    "graph_calls": ("the host cost of each compiled graph call (guards, wrapper, kernel launches): fewer, larger "
                    "graphs (one compiled function over all parameters instead of one call per parameter)"),
    "graph_launches": ("a NEFF execution's fixed cost per compiled graph call: fewer, larger graphs (one compiled "
                       "function over all parameters instead of one call per parameter)"),
}


def eager_source(section: dict[str, Any]) -> str:
    """Where the eager ops of a partly compiled step come from: the model is compiled, they are not."""
    sites = (section.get("work") or {}).get("eager_sites") or []
    eager = section["per_step"].get("eager_ops") or 0
    where = ", ".join(f"{s['site']} {s['calls']:,.0f}" for s in sites)
    return (f"per-op host dispatch of the {eager:,.0f} eager op(s) per step outside the compiled graphs"
            f"{f' (most from {where})' if where else ''}: compile that code too (a compiled optimizer step, "
            "a fused optimizer) or a larger batch per step")


def action_line(section: dict[str, Any]) -> str:
    """The largest cost on the first Trainium row (else the first row) and what to do about it."""
    rows = section["per_device"]
    row = next((r for r in rows if r["device"].startswith("trn")), rows[0])
    family, value = max(row["seconds_by_family"].items(), key=lambda kv: kv[1])
    total = sum(row["seconds_by_family"].values()) or 1.0
    fp32 = next((f for f in section["per_step"]["by_family"] if f["family"] == family), {})
    if family in ("matmul", "convolution") and (fp32.get("flops_by_dtype") or {}).get("fp32"):
        action = f"{family} in fp32: bf16 autocast (torch.autocast('neuron', dtype=torch.bfloat16))"
    elif family == "dispatch" and section["per_step"].get("compiled_ops"):
        action = eager_source(section)
    elif family in ACTIONS:
        action = ACTIONS[family]
    elif family in ("matmul", "convolution"):
        action = f"{family} at the device's rate: the step is compute-bound, as it should be"
    else:
        action = f"{family} (memory-bound ops): torch.compile fuses chains of them into one pass"
    return f"largest cost on {row['device']}: {family} {value / total:.0%} of the step; next step: {action}"


def scaling_table(section: dict[str, Any]) -> Optional[Table]:
    """Step time and $/M tokens of the same step over whole chips of each chip device."""
    rows = section.get("scaling") or []
    if not rows:
        return None
    chips = [p["chips"] for p in rows[0]["points"]]
    table = Table(title="Scaling: the same step on N chips (expected; ! = does not fit in HBM)",
                  title_justify="left", title_style="bold", header_style="bold", expand=False)
    table.add_column("device", no_wrap=True)
    for n in chips:
        table.add_column(f"{n}", no_wrap=True)
    for row in rows:
        table.add_row(row["device"], *(f"{seconds(p['step_seconds'])}{' !' if p['fits'] is False else ''}"
                                       for p in row["points"]))
        if any(p["per_million_tokens_usd"] is not None for p in row["points"]):
            table.add_row("  $/M tok", *(usd(p["per_million_tokens_usd"]) for p in row["points"]))
    return table


def price_line(section: dict[str, Any]) -> str:
    chips = {d["id"]: d.get("price_device", d["id"]) for d in section["devices"]}
    seen: dict[str, str] = {}
    for row in section["per_device"]:
        chip, price = chips.get(row["device"], row["device"]), row["price"]
        if chip in seen:
            continue
        if price["per_chip_hour_usd"] is None:
            seen[chip] = f"{chip} not set (--price {chip}=USD)"
        else:
            origin = ("set by you" if price["source"] == "user" else
                      f"{'third-party, ' if price['third_party'] else ''}{price['dated']}")
            if price.get("derived") and price["source"] != "user":
                origin = (f"derived, not a list price: {price['derived']}; dated {price['dated']}, next AWS price "
                          f"update {price.get('next_update') or 'not announced'}; --price {chip}=USD overrides")
            seen[chip] = f"{chip} ${price['per_chip_hour_usd']:g} ({origin})"  # an input: as given
    return "price per chip-hour: " + "; ".join(seen.values())


def memory_line(section: dict[str, Any]) -> str:
    rows = section["per_device"]
    peak = rows[0]["memory"]["peak_bytes"] if rows else None
    if peak is None:
        return "peak memory on the simulated device: not recorded"
    processes = (section.get("steps") or {}).get("processes") or 1
    shares = []
    for r in rows:  # each device's memory: one logical core, one chip
        hbm = r["memory"].get("hbm_bytes")
        if hbm:
            verdict = "does NOT fit" if r["memory"]["fits"] is False else "fits"
            shares.append(f"{r['device']} {quantity(hbm, 'B')}: {peak / hbm:.1%}, {verdict}")
    return (f"peak memory on the simulated device: {quantity(peak, 'B')} per process, for the sizes, batch and "
            f"sharding the program ran with ({processes} process(es)); of each device's HBM: " + "; ".join(shares))


def where_time_goes(row: dict[str, Any]) -> str:
    parts = sorted(row["seconds_by_family"].items(), key=lambda kv: -kv[1])
    total = sum(v for _, v in parts) or 1.0
    shown = [f"{name} {value / total:.0%}" for name, value in parts if value / total >= 0.01][:6]
    return f"where the expected step time goes on {row['device']}: " + (", ".join(shown) or "-")


def panel_console(console: Console) -> Console:
    """Where the Estimate panel and tables print, at one width for the whole report: ``console`` on a
    terminal (its width); in a pipe, a file or a CI log, lines as long as they need, as `check` prints its
    own panel and runtime tables there (widths.PIPE_WIDTH): no cell is cut, whatever COLUMNS says."""
    from neuron_port.reporters.text.widths import PIPE_WIDTH

    if console.is_terminal or console.width >= PIPE_WIDTH:
        return console
    return Console(file=console.file, width=PIPE_WIDTH, emoji=False, markup=False, highlight=False)


def _compiles_neffs(row: dict[str, Any], kinds: dict[str, Any]) -> bool:
    neff = row["compile"].get("neff")  # absent in a report written before it: a Trainium compiles NEFFs
    return neff if isinstance(neff, bool) else kinds.get(row["device"], "trainium") == "trainium"


def compile_line(section: dict[str, Any]) -> str:
    """The first run's compiles on the first device that compiles NEFFs (a Trainium), and what the others
    (a GPU: eager CUDA kernels) are charged: none."""
    kinds = {d["id"]: d.get("kind") for d in section["devices"]}
    rows = section["per_device"]
    neff = [r for r in rows if _compiles_neffs(r, kinds)]
    others = [f"{r['device']}: {r['compile'].get('note') or 'no NEFF compile'}" for r in rows
              if not _compiles_neffs(r, kinds)]
    if not neff:
        return "first run: " + "; ".join(others)
    spared = "".join(f"; {other}" for other in others)
    c = neff[0]["compile"]
    return (f"first run: {c['eager_neffs']:,} eager NEFF compile(s) and {c['graphs']} graph compile(s), "
            f"about {duration(c['first_run_seconds'])}; with a warm shared NEFF cache "
            f"{duration(c['warm_cache_seconds'])}" + steady_compiles_text(c) + spared)


def steady_compiles_text(c: dict[str, Any]) -> str:
    """The compiles every steady step pays again (signatures that keep changing: NP902), cache or not."""
    n = c.get("steady_compiles_per_step") or 0
    return (f"; then {n:,.1f} more per steady step (NP902: a Python number keeps changing, no cache serves it), "
            f"{duration(c.get('steady_seconds_per_step') or 0)} per step, counted in the step time" if n else "")


def render_estimate(console: Console, section: Optional[dict[str, Any]]) -> None:
    if not section:
        return
    lines = estimate_lines(section)
    sized = instances_line(section)
    if sized:
        lines.append(sized)
    lines.extend(line for line in (comparison_line(section), calibration_line(section)) if line)
    first = section["per_device"][0] if section["per_device"] else None
    if first is not None:
        lines.append(compile_line(section))
        core = next((r for r in section["per_device"] if r["device"].endswith("-core")), first)
        lines.append(where_time_goes(core))
        lines.append(collectives_line(section))
        lines.append(action_line(section))
        lines.append(validation_line(section))
        lines.append(memory_line(section))
        lines.append(price_line(section))
    named = [f"{a['name']}={a['value']:g}{a['unit'] and ' ' + a['unit']}" for a in section["assumptions"]]
    lines.append("assumptions (docs/estimate.md): " + ", ".join(named))
    # wrapped, whatever the console's soft_wrap: the panel would crop its lines
    panel = Panel(Text("\n".join(lines), no_wrap=False, overflow="fold"), title="Estimate", expand=False)
    console = panel_console(console)
    console.print(panel)
    console.print(device_table(section))
    scaled = scaling_table(section)
    if scaled is not None:
        console.print(scaled)
