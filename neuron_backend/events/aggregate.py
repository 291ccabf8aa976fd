"""The snapshot: everything recorded so far as one dict (what ``neuron_backend.stats()`` returns and
what the events file contains, EVENTS.md), built from the C++ core's op table (per op: policy, calls,
and per signature: calls, first-sighting sequence number, flags, description) and what Python
recorded. Runs when a snapshot is written, never per op.
"""

from __future__ import annotations

import sys

from . import process, sites, state, steps
from .cost_fields import fallback_fields, signature_lines, summary_fields

# training frameworks with no Trainium accelerator: imported by a run that put nothing on the device, one of
# them chose the CPU (check's NP913 names it)
FRAMEWORKS_WITHOUT_NEURON = ("lightning", "pytorch_lightning", "lightning_fabric")
MAX_SIGNATURES_PER_OP = 200  # eager_compile lines per op in the file (the most-called ones); the rest are summed

# Policy names and signature flag bits of the C++ core: read from its Policy / SigFlag enums by
# hooks.install() (load_enums), never copied here by hand.
_POLICY_NAMES: dict[int, str] = {}
F64 = I64 = COMPLEX = 0


def load_enums(c_module) -> None:
    global _POLICY_NAMES, F64, I64, COMPLEX
    _POLICY_NAMES = {int(v): name for name, v in c_module.Policy.__members__.items()}
    F64, I64, COMPLEX = (int(c_module.SigFlag.F64), int(c_module.SigFlag.I64), int(c_module.SigFlag.COMPLEX))


def _raw_ops() -> list:
    return state.C.op_stats() if state.C is not None else []


def op_table(raw=None, outside=None) -> list[dict]:
    out = []
    for name, pol, calls, sigs in (raw if raw is not None else _raw_ops()):
        if calls == 0:
            continue
        line = {"kind": "op", "op": name, "policy": _POLICY_NAMES.get(pol, str(pol)), "calls": calls,
                "unique_signatures": len(sigs)}
        if outside and name in outside:
            line["outside_calls"] = outside[name]
        if _POLICY_NAMES.get(pol) == "native_no_neff" and sigs:  # a copy: no NEFF, but the bytes it moves
            line["signatures"] = signature_lines(sigs, sites.first_seen, outside)
        out.append(line)
    return out


def snapshot() -> dict:
    """All data as one dict (what stats() returns and what the events file contains)."""
    raw = _raw_ops()
    outside = steps.outside_calls(raw)  # per signature and op: its calls in phases that were not training steps
    ops = op_table(raw, outside)
    fallbacks, compiles, demotions, truncated = [], [], [], []
    i64: dict[str, dict] = {}
    for name, pol, calls, sigs in raw:
        if calls == 0:
            continue
        policy = _POLICY_NAMES.get(pol, str(pol))
        if policy == "fallback":
            per_site: dict[int, int] = {}
            for c, seq, _flags, _u, _d in sigs:
                sid = sites.site_index(seq)
                per_site[sid] = per_site.get(sid, 0) + c
            fallbacks.append({"kind": "fallback", "op": name, "calls": calls,
                              **fallback_fields(state.C, name, sigs, sites.first_seen, outside),
                              "sites": [{"site": sites.site_of(s), "calls": c}
                                        for s, c in sorted(per_site.items(), key=lambda kv: -kv[1])]})
        if policy == "native":
            ranked = sorted(sigs, key=lambda g: -g[0])
            for c, seq, _flags, _u, desc in ranked[:MAX_SIGNATURES_PER_OP]:
                line = {"kind": "eager_compile", "op": name, "signature": desc, "calls": c, "cache_hits": c - 1,
                        "site": sites.site_by_id(seq)}
                first = sites.first_seen(seq)
                if first is not None:
                    line["first_seen"] = first
                if seq in outside:
                    line["outside_calls"] = outside[seq]
                compiles.append(line)
            if len(ranked) > MAX_SIGNATURES_PER_OP:
                rest = ranked[MAX_SIGNATURES_PER_OP:]
                truncated.append({"kind": "eager_compile_truncated", "op": name, "omitted_signatures": len(rest),
                                  "omitted_calls": sum(g[0] for g in rest),
                                  "first_seen": sites.first_seen_counts(rest)})
        f64_sites: dict[int, list[int]] = {}
        for c, seq, flags, _u, desc in sigs:
            if flags & F64:
                sid = sites.site_index(seq)
                f64_sites.setdefault(sid, [0, 0])
                f64_sites[sid][0] += c
                f64_sites[sid][1] += 1
            if flags & I64:
                e = i64.setdefault(name, {"kind": "demotion", "dtype": "int64", "op": name, "calls": 0,
                                          "aggregated": True, "sites": []})
                e["calls"] += c
                s = sites.site_by_id(seq)
                if s is not None and len(e["sites"]) < 5 and not any(
                        (x["file"], x["line"]) == (s["file"], s["line"]) for x in e["sites"]):
                    e["sites"].append(s)
        for sid, (c, n) in f64_sites.items():
            demotions.append({"kind": "demotion", "dtype": "float64", "computed_as": "float32", "op": name,
                              "calls": c, "signatures": n, "site": sites.site_of(sid)})
    demotions.extend(i64.values())
    with state.lock:
        unsupported = [dict(e) for e in state.unsupported.values()]
        recs = [dict(r) for r in state.recorded]
    return {
        "process": process.process_info(),
        "ops": ops,
        "fallbacks": fallbacks,
        "eager_compiles": compiles,
        "eager_compiles_truncated": truncated,
        "demotions": demotions,
        "unsupported": unsupported,
        "events": recs,
        "explicit_ops": dict(state.C.explicit_counts()) if state.C is not None else {},
        "summary": _summary(ops, compiles, fallbacks),
    }


def _summary(ops, compiles, fallbacks) -> dict:
    return {
        "kind": "summary",
        "op_calls": sum(o["calls"] for o in ops),
        "native_calls": sum(o["calls"] for o in ops if o["policy"] != "fallback"),
        "fallback_calls": sum(o["calls"] for o in ops if o["policy"] == "fallback"),
        "fallback_ops": len(fallbacks),
        "eager_compiles": sum(o["unique_signatures"] for o in ops if o["policy"] == "native"),
        "eager_cache_hits": sum(o["calls"] - o["unique_signatures"] for o in ops if o["policy"] == "native"),
        **steps.totals(), **summary_fields(state.C), "user_files": sites.user_files(),
        "frameworks": [name for name in FRAMEWORKS_WITHOUT_NEURON if name in sys.modules],
    }
