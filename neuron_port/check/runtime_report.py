"""Turns the simulator's per-process event files (neuron_backend/EVENTS.md) into the report's
``runtime`` section and NP9xx findings, merging ranks per (kind, site).

This is where the fallback, recompile and demotion accounting of `check` lives; the simulator only
records, this module aggregates and judges.
"""

from __future__ import annotations

import json
import linecache
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from neuron_port.check.runner import RunStatus
from neuron_port.check.preview import PreviewTree
from neuron_port.results import Finding, Fix
from neuron_port.rules.registry import rule_by_code

# A dimension must take at least this many values at one line to count as a varying length.
MIN_VARYING_VALUES = 3

TENSOR_RE = re.compile(r"^(?P<dtype>[a-z]+\d*)\[(?P<dims>[0-9,]*)\]")


@dataclass
class ProcessEvents:
    path: Path
    process: dict = field(default_factory=dict)
    lines: list[dict] = field(default_factory=list)
    summary: Optional[dict] = None
    bad_lines: int = 0


def read_events(events_dir: Path) -> list[ProcessEvents]:
    out = []
    for path in sorted(events_dir.glob("*.jsonl")):
        proc = ProcessEvents(path=path)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for raw in text.splitlines():
            if not raw.strip():
                continue
            try:
                event = json.loads(raw)
            except json.JSONDecodeError:
                proc.bad_lines += 1  # a torn line cannot happen with atomic snapshots; tolerate anyway
                continue
            kind = event.get("kind")
            if kind == "process":
                proc.process = event
            elif kind == "summary":
                proc.summary = event
            else:
                proc.lines.append(event)
        out.append(proc)
    return out


class SiteMapper:
    """Maps absolute file paths in events to paths relative to the checked folder (and, for a
    preview run, from the rewritten copy back to the user's original lines)."""

    def __init__(self, root: Path, preview: Optional[PreviewTree] = None) -> None:
        self.root = root.resolve()
        self.preview = preview

    def __call__(self, site: Optional[dict]) -> Optional[dict]:
        if not site:
            return None
        file = site.get("file") or ""
        line = int(site.get("line") or 0)
        code = site.get("code") or ""
        path: str = file
        resolved = Path(file)
        if self.preview is not None and _is_under(resolved, self.preview.root):
            rel = resolved.relative_to(self.preview.root).as_posix()
            line = self.preview.original_line(rel, line)
            original = self.root / rel
            code = linecache.getline(str(original), line).strip() or code
            path = rel
        elif _is_under(resolved, self.root):
            path = resolved.relative_to(self.root).as_posix()
        out = {"path": path, "line": line, "function": site.get("function"), "code": code}
        if site.get("thread"):
            out["thread"] = site["thread"]
        return out


def _is_under(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _site_key(site: Optional[dict]) -> tuple:
    if not site:
        return ("", 0)
    return (site["path"], site["line"])


def parse_tensor(arg: Any) -> Optional[tuple[str, tuple[int, ...]]]:
    if not isinstance(arg, str):
        return None
    match = TENSOR_RE.match(arg)
    if not match:
        return None
    dims = tuple(int(d) for d in match.group("dims").split(",") if d)
    return match.group("dtype"), dims


def varying_dims(signatures: Iterable[list]) -> list[dict]:
    """For signatures of one op at one site: which (argument, dimension) varied, with its values."""
    sigs = [s for s in signatures if isinstance(s, list)]
    if len(sigs) < 2:
        return []
    width = min(len(s) for s in sigs)
    out = []
    for index in range(width):
        parsed = [parse_tensor(s[index]) for s in sigs]
        if any(p is None for p in parsed):
            continue
        ranks = {len(p[1]) for p in parsed}  # type: ignore[index]
        if len(ranks) != 1:
            out.append({"arg": index, "dim": None, "values": sorted({len(p[1]) for p in parsed})})  # type: ignore[index]
            continue
        for dim in range(ranks.pop()):
            values = sorted({p[1][dim] for p in parsed})  # type: ignore[index]
            if len(values) > 1:
                out.append({"arg": index, "dim": dim, "values": values})
    return out


def padding_buckets(values: Iterable[int], limit: int = 4) -> list[int]:
    """Powers of two covering the observed values, at most ``limit`` of them (the largest kept)."""
    values = [v for v in values if v > 0]
    if not values:
        return []
    buckets = sorted({1 << math.ceil(math.log2(v)) for v in values})
    if len(buckets) > limit:
        step = len(buckets) / limit
        buckets = sorted({buckets[min(len(buckets) - 1, math.ceil((i + 1) * step) - 1)] for i in range(limit)})
    return buckets


def _finding(code: str, message: str, site: Optional[dict], severity: Optional[str] = None) -> Finding:
    rule = rule_by_code(code)
    path = site["path"] if site else "<unknown>"
    line = max(1, site["line"]) if site else 1
    end_col = len(site.get("code") or "") + 1 if site else 1
    return Finding(
        code=rule.CODE, name=rule.NAME, severity=severity or rule.SEVERITY, path=path, line=line, column=1,
        end_line=line, end_column=max(1, end_col), message=message,
        fix=Fix(available=False, applied=False, safety="none"), effort=rule.EFFORT, source="runtime",
    )


def _describe_dims(dims: list[dict]) -> str:
    parts = []
    for d in dims[:3]:
        values = d["values"]
        shown = ",".join(str(v) for v in values[:6]) + ("..." if len(values) > 6 else "")
        where = f"rank of arg {d['arg']}" if d["dim"] is None else f"dim {d['dim']} of arg {d['arg']}"
        parts.append(f"{where} took {len(values)} values: {shown}")
    return "; ".join(parts)


def build_runtime(processes: list[ProcessEvents], status: RunStatus, mapper: SiteMapper) -> tuple[dict, list[Finding]]:
    findings: list[Finding] = []
    ops_calls = native_calls = fallback_calls = 0
    signatures: set[tuple] = set()
    fallbacks: dict[str, dict] = {}
    eager: dict[tuple, dict] = {}
    demotions: dict[tuple, dict] = {}
    int64: dict[str, dict] = {}
    unsupported: dict[tuple, dict] = {}
    compiles: dict[tuple, dict] = {}
    distributed: dict[tuple, dict] = {}
    neff = {"hits": 0, "misses": 0}
    ranks = []

    for proc in processes:
        rank = proc.process.get("rank")
        ranks.append(rank)
        for ev in proc.lines:
            kind = ev.get("kind")
            if kind == "op":
                calls = int(ev.get("calls", 0))
                ops_calls += calls
                if ev.get("policy") == "fallback":
                    fallback_calls += calls
                else:
                    native_calls += calls
            elif kind == "fallback":
                entry = fallbacks.setdefault(ev["op"], {"op": ev["op"], "calls": 0, "sites": {}})
                entry["calls"] += int(ev.get("calls", 0))
                for s in ev.get("sites", []):
                    site = mapper(s.get("site"))
                    slot = entry["sites"].setdefault(_site_key(site), {"site": site, "calls": 0, "ranks": set()})
                    slot["calls"] += int(s.get("calls", 0))
                    slot["ranks"].add(rank)
            elif kind == "eager_compile":
                site = mapper(ev.get("site"))
                sig = tuple(json.dumps(a) for a in ev.get("signature", []))
                signatures.add((ev["op"], sig))
                entry = eager.setdefault((ev["op"], _site_key(site)),
                                         {"op": ev["op"], "site": site, "signatures": {}, "calls": 0})
                entry["signatures"][sig] = ev.get("signature", [])
                entry["calls"] += int(ev.get("calls", 0))
            elif kind == "demotion":
                if ev.get("aggregated") or ev.get("dtype") == "int64":
                    entry = int64.setdefault(ev["op"], {"dtype": "int64", "op": ev["op"], "calls": 0, "sites": {}})
                    entry["calls"] += int(ev.get("calls", 0))
                    for s in ev.get("sites", [])[:5]:
                        site = mapper(s if "file" in (s or {}) else (s or {}).get("site"))
                        if site:
                            entry["sites"][_site_key(site)] = site
                    continue
                site = mapper(ev.get("site"))
                entry = demotions.setdefault((ev["op"], _site_key(site)), {
                    "dtype": ev.get("dtype", "float64"), "computed_as": ev.get("computed_as", "float32"),
                    "op": ev["op"], "calls": 0, "site": site})
                entry["calls"] += int(ev.get("calls", 0))
            elif kind == "unsupported":
                site = mapper(ev.get("site"))
                key = (ev.get("feature"), ev.get("op"), _site_key(site))
                entry = unsupported.setdefault(key, {
                    "feature": ev.get("feature"), "op": ev.get("op"), "message": ev.get("message"),
                    "error": ev.get("error"), "action": ev.get("action"), "count": 0, "site": site})
                entry["count"] += int(ev.get("count", 1))
            elif kind == "compile":
                # keyed by the call site, which compile, recompile and recompile-limit events share
                site = mapper(ev.get("site"))
                fn = ev.get("function")
                entry = compiles.setdefault(_site_key(site), {
                    "function": None, "definition": None, "site": site, "count": 0, "reasons": [],
                    "recompile_limit_hits": 0, "failures": [], "shapes": [], "ranks": set()})
                entry["ranks"].add(rank)
                if isinstance(fn, dict):
                    entry["function"] = fn.get("name") or entry["function"]
                    if entry["definition"] is None and fn.get("file"):
                        entry["definition"] = mapper({"file": fn["file"], "line": fn.get("line") or 0,
                                                      "function": fn.get("name"), "code": ""})
                elif fn and entry["function"] is None:
                    entry["function"] = str(fn)
                event_type = ev.get("event") or "compile"
                if event_type == "recompile_limit":
                    entry["recompile_limit_hits"] += 1
                    if ev.get("reason"):
                        entry["reasons"].append(ev["reason"])
                    continue
                state = ev.get("status")
                if state in ("failed", "fallback", "rejected"):
                    entry["failures"].append({"status": state, "reason": ev.get("message") or ev.get("error"),
                                              "action": "fell back to eager" if state == "fallback" else "raised"})
                    continue
                entry["count"] += 1
                if ev.get("reason") and ev["reason"] not in entry["reasons"]:
                    entry["reasons"].append(ev["reason"])
                inputs = ev.get("inputs")
                if inputs is not None and len(entry["shapes"]) < 10:
                    entry["shapes"].append([i.get("shape") for i in inputs if isinstance(i, dict)])
            elif kind == "distributed":
                site = mapper(ev.get("site"))
                name = ev.get("op") or ev.get("event") or "?"  # collectives carry op; setup events only event
                violation = ev.get("event") == "unsupported"
                key = (name, violation, _site_key(site))
                entry = distributed.setdefault(key, {
                    "op": name, "event": ev.get("event"), "site": site, "count": 0, "bytes": 0, "ranks": set(),
                    "error": ev.get("error") if violation else None, "message": ev.get("message"),
                    "action": ev.get("action")})
                entry["count"] += int(ev.get("count", 1))
                entry["bytes"] += int(ev.get("bytes", 0) or 0)
                entry["ranks"].add(rank)
            elif kind == "neff_cache":
                neff["hits"] += int(ev.get("hits", 0) or 0)
                neff["misses"] += int(ev.get("misses", 0) or 0)
                for part in ("eager", "compiled"):
                    if isinstance(ev.get(part), dict):
                        slot = neff.setdefault(part, {"hits": 0, "misses": 0})
                        slot["hits"] += int(ev[part].get("hits", 0) or 0)
                        slot["misses"] += int(ev[part].get("misses", 0) or 0)

    # -- sections ------------------------------------------------------------------------------------
    fallback_list = []
    for entry in sorted(fallbacks.values(), key=lambda e: -e["calls"]):
        sites = sorted(entry["sites"].values(), key=lambda s: -s["calls"])
        fallback_list.append({"op": entry["op"], "calls": entry["calls"], "sites": [
            {**(s["site"] or {}), "calls": s["calls"], "ranks": sorted(r for r in s["ranks"] if r is not None)}
            for s in sites]})
        for s in sites:
            findings.append(_finding("NP901", rule_by_code("NP901").MESSAGE.format(op=entry["op"], calls=s["calls"]),
                                     s["site"]))

    eager_list = []
    variance = []
    for entry in sorted(eager.values(), key=lambda e: (-len(e["signatures"]), e["op"])):
        n = len(entry["signatures"])
        eager_list.append({"op": entry["op"], "site": entry["site"], "unique_signatures": n, "calls": entry["calls"]})
        if n > 1:
            # A dimension with few values at one line is usually several different tensors (the layers
            # of a model, the parameters an optimizer visits); a dimension with many is a length that
            # changes with the data. Rank changes are always different tensors.
            dims = [d for d in varying_dims(entry["signatures"].values())
                    if d["dim"] is not None and len(d["values"]) >= MIN_VARYING_VALUES]
            if dims:
                dims.sort(key=lambda d: -len(d["values"]))
                variance.append({"op": entry["op"], "site": entry["site"], "signatures": n, "calls": entry["calls"],
                                 "varying": dims, "suggested_buckets": padding_buckets(dims[0]["values"])})
    # one NP902 finding per site (several ops on one line share the cause)
    by_site: dict[tuple, list[dict]] = defaultdict(list)
    for v in variance:
        by_site[_site_key(v["site"])].append(v)
    for items in sorted(by_site.values(), key=lambda vs: -max(v["signatures"] for v in vs)):
        if items[0]["site"] is None:
            continue  # no user frame to point at (kept in runtime.shape_variance)
        worst = max(items, key=lambda v: v["signatures"])
        ops = ", ".join(sorted({v["op"] for v in items}))
        message = rule_by_code("NP902").MESSAGE.format(
            op=worst["op"], n=worst["signatures"], dims=_describe_dims(worst["varying"]),
            buckets=worst["suggested_buckets"])
        if len(items) > 1:
            message += f" (also {len(items) - 1} other op(s) here: {ops})"
        findings.append(_finding("NP902", message, worst["site"]))

    compile_list = []
    for entry in sorted(compiles.values(), key=lambda e: -e["count"]):
        entry["function"] = entry["function"] or "<compiled function>"
        compile_list.append({**entry, "ranks": sorted(r for r in entry["ranks"] if r is not None)})
        reason = entry["reasons"][-1] if entry["reasons"] else "new input shapes"
        if entry["count"] > 1:
            findings.append(_finding("NP903", rule_by_code("NP903").MESSAGE.format(
                function=entry["function"], count=entry["count"], reason=reason), entry["site"]))
        if entry["recompile_limit_hits"]:
            findings.append(_finding("NP904", rule_by_code("NP904").MESSAGE.format(
                function=entry["function"], reason=reason), entry["site"]))
        for failure in entry["failures"][:1]:
            findings.append(_finding("NP908", rule_by_code("NP908").MESSAGE.format(
                function=entry["function"], reason=failure["reason"]), entry["site"]))

    demotion_list = sorted(demotions.values(), key=lambda e: -e["calls"])
    demo_sites: dict[tuple, list[dict]] = defaultdict(list)
    for d in demotion_list:
        demo_sites[_site_key(d["site"])].append(d)
    for items in demo_sites.values():
        calls = sum(d["calls"] for d in items)
        ops = ", ".join(sorted({d["op"] for d in items}))
        findings.append(_finding("NP905", rule_by_code("NP905").MESSAGE.format(op=ops, calls=calls), items[0]["site"]))
    int64_list = [{**e, "sites": list(e["sites"].values())} for e in sorted(int64.values(), key=lambda e: -e["calls"])]

    unsupported_list = sorted(unsupported.values(), key=lambda e: -e["count"])
    for u in unsupported_list:
        findings.append(_finding("NP906", rule_by_code("NP906").MESSAGE.format(
            feature=u["feature"], message=u["message"]), u["site"]))

    distributed_list = []
    for entry in sorted(distributed.values(), key=lambda e: -e["count"]):
        item = {**entry, "ranks": sorted(r for r in entry["ranks"] if r is not None)}
        distributed_list.append(item)
        if entry["event"] == "unsupported":
            findings.append(_finding("NP907", rule_by_code("NP907").MESSAGE.format(
                message=entry["message"] or entry["error"]), entry["site"]))

    if not status.succeeded:
        if status.error:
            what = f"could not start: {status.error}"
        elif status.timed_out:
            what = f"timed out after {status.duration:.0f} s"
        elif status.signal:
            what = f"was killed by {status.signal}"
        else:
            what = f"exited with code {status.exit_code}"
        last = next((line for line in reversed(status.stderr_tail) if line.strip()), "")
        findings.append(Finding(
            code="NP909", name=rule_by_code("NP909").NAME, severity="error", path=".", line=1, column=1,
            end_line=1, end_column=1, message=rule_by_code("NP909").MESSAGE.format(what=what)
            + (f": {last.strip()}" if last else ""),
            fix=Fix(False, False, "none"), effort=rule_by_code("NP909").EFFORT, source="runtime"))

    if not neff["hits"] and not neff["misses"]:
        for proc in processes:
            summary = proc.summary or {}
            neff["misses"] += int(summary.get("eager_compiles", 0) or 0)
            neff["hits"] += int(summary.get("eager_cache_hits", 0) or 0)

    runtime = {
        "status": status.to_json(),
        "processes": [{"rank": p.process.get("rank"), "pid": p.process.get("pid"),
                       "status": p.process.get("status"),
                       "complete": bool((p.summary or {}).get("complete"))} for p in processes],
        "ops": {
            "calls": ops_calls,
            "native_calls": native_calls,
            "fallback_calls": fallback_calls,
            "unique_signatures": len(signatures),
            "readiness": round(native_calls / ops_calls, 4) if ops_calls else None,
        },
        "fallbacks": fallback_list,
        "eager_compiles": eager_list,
        "shape_variance": variance,
        "compiles": compile_list,
        "demotions": demotion_list + int64_list,
        "unsupported": unsupported_list,
        "distributed": distributed_list,
        "neff_cache": neff,
    }
    return runtime, findings
