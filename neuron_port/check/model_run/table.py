"""The table of the models of one ``check --model`` call: per model (did its step run, CPU fallbacks,
unsupported features, device peak per rank) and per device of its estimate, whether it fits, the step time and $
per million tokens (where the device has a price: --price, or the shipped one).
Rows are made from each model's JSON report (``row_of``), so a row made in another process or on a Ray
worker is the same as one made here."""

from __future__ import annotations

from typing import Any, Optional


def row_of(doc: dict[str, Any]) -> dict[str, Any]:
    """One model's row from its JSON report."""
    runtime = doc.get("runtime") or {}
    status = runtime.get("status") or {}
    estimate = doc.get("estimate") or {}
    devices = [{"device": e.get("device"), "instance": (e.get("instance") or {}).get("spec"),
                "fits": (e.get("memory") or {}).get("fits"),
                "step_seconds": (e.get("step_seconds") or {}).get("expected"),
                "per_million_tokens_usd": (e.get("price") or {}).get("per_million_tokens_usd"),
                "chips": (e.get("price") or {}).get("chips")}
               for e in estimate.get("per_device") or ()]
    return {"exit_code": status.get("exit_code"), "fallbacks": len(runtime.get("fallbacks") or ()),
            "unsupported": len(runtime.get("unsupported") or ()),
            "findings": (doc.get("summary") or {}).get("by_code") or {},
            "peak_bytes": (estimate.get("work") or {}).get("peak_bytes"), "devices": devices,  # per rank
            "tokens_per_step": (estimate.get("steps") or {}).get("tokens_per_step")}


def _seconds(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def _money(usd: Optional[float]) -> str:
    return "-" if usd is None else f"${usd:,.2f}" if usd >= 0.01 else f"${usd:.2g}"


def table_rows(results: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the table as text cells: per model, one row per device of its estimate, the
    model's own cells on its first row only."""
    header = ["model", "step", "fallbacks", "unsupported", "peak/rank", "device", "fits", "step time", "$/M tokens"]
    rows = []
    for result in results:
        row = result.get("row")
        name = f"{result['model']} ({result.get('task', '')})"
        if row is None:
            rows.append([name, "error (below)"] + [""] * (len(header) - 2))
            continue
        ran = "ran" if row["exit_code"] == 0 else f"failed (exit {row['exit_code']})"
        peak = row["peak_bytes"]
        model_cells = [name, ran, str(row["fallbacks"]), str(row["unsupported"]),
                       "-" if peak is None else f"{peak / 1e9:,.2f} GB"]
        devices = row["devices"] or [{"device": "-", "fits": None, "step_seconds": None,
                                      "per_million_tokens_usd": None}]
        for i, d in enumerate(devices):
            fits = {True: "yes", False: "NO", None: "-"}[d["fits"]]
            chips = d.get("chips")
            where = d["device"] + (f" x{chips:g}" if chips else "") + (f" ({d['instance']})" if d.get("instance") else "")
            rows.append((model_cells if i == 0 else [""] * len(model_cells)) + [
                where, fits, _seconds(d["step_seconds"]), _money(d["per_million_tokens_usd"])])
    return header, rows
