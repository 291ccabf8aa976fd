"""Tables and classification of a vision sweep (``vision_results.json`` / ``vision_results.md``).

Each simulator run (eager, and compiled where the sweep compiled) of an architecture that ran on CPU
is one of:

- ``ok``: the step ran and the loss, outputs, gradients, parameters after the step and eval outputs
  are within tolerance of the CPU run's (``vision_worker.compare``); a compiled step also when it is
  within tolerance of the same model compiled on the CPU (``aot_eager``) where that differs from eager;
- ``limitation``: the simulator said it is a TorchNeuron limitation: its ``[neuron-port simulator]``
  error or an ``unsupported`` event (``check``: NP906; compiled: a graph with an op that has no
  Neuron lowering, NP908);
- ``defect``: any other exception, a crash, a hang, or numbers outside tolerance (``wrong-result``).
"""

from __future__ import annotations

import re
import time

from report import SIM_PREFIX, _cell

TASK_TITLES = {"classification": "classification", "detection": "detection", "segmentation": "segmentation",
               "video": "video", "optical_flow": "optical flow", "diffusion": "diffusion"}


def classify_run(run: dict | None, compiled: bool = False) -> dict:
    if not run:
        return {"status": "not_run"}
    if run.get("ok"):
        num = run.get("numerics") or {}
        again = run.get("numerics_vs_cpu_compiled") or {}
        if compiled and num.get("match") is False and again.get("match"):
            return {"status": "ok", "reference": "cpu_compiled",
                    "reason": "differs from CPU eager as the CPU's own compiled step does (aot_eager); "
                              "matches that step"}
        if num.get("match") is False:
            bad = [k for k in ("loss", "outputs", "grads", "params", "eval") if k in num and not num[k].get("match")]
            detail = "; ".join(f"{k}: {_what(num[k])}" for k in bad)
            return {"status": "defect", "kind": "wrong-result", "reason": f"differs from CPU in {detail}"}
        return {"status": "ok"}
    err = run.get("error") or {}
    msg = err.get("message") or ""
    if run.get("unsupported") or SIM_PREFIX in msg:
        code = "NP908" if compiled and "operation=torch_compile" in msg else "NP906"
        first = next((ln for ln in msg.splitlines() if SIM_PREFIX in ln), msg.splitlines()[0] if msg else "")
        lowering = re.search(r"no Neuron lowering for .*? in the \w+ graph", msg)
        if lowering:
            first = lowering.group(0)
        return {"status": "limitation", "codes": [code], "reason": first[:300]}
    kind = {"Timeout": "hang", "WorkerDied": "crash"}.get(err.get("type"), "exception")
    return {"status": "defect", "kind": kind, "reason": f"{err.get('type')}: {msg.splitlines()[0][:300] if msg else ''}"}


def _what(d: dict) -> str:
    if "why" in d:
        return d["why"]
    if "rel_diff" in d:
        return f"relative diff {d['rel_diff']:.3g}"
    return f"{d.get('worst')} max abs diff {d.get('max_abs_diff', 0):.3g} ({d.get('ratio')} x tolerance)"


def _cpu_reason(rec: dict) -> str:
    cfg = rec.get("config") or {}
    attempts = cfg.get("attempts") or []
    parts = []
    for a in attempts:
        err = a.get("error") or {}
        msg = (err.get("message") or "").strip().splitlines()
        parts.append(f"[{a.get('attempt')} {a.get('stage')}] {err.get('type')}: {msg[0][:160] if msg else ''}")
    return "; ".join(parts) or "?"


def build(results: list[dict], info: dict, simulated: bool = True) -> dict:
    rows = []
    for rec in results:
        cfg = rec.get("config") or {}
        cpu_ok = bool((rec.get("cpu") or {}).get("ok"))
        sim, comp = rec.get("sim") or {}, rec.get("compile") or {}
        rows.append({
            "id": rec["id"], "source": rec["source"], "task": rec["task"], "name": rec["name"], "family": rec["family"],
            "params": cfg.get("params"), "size": cfg.get("size"), "attempt": cfg.get("attempt"), "cpu_ok": cpu_ok,
            "cpu_reason": None if cpu_ok else _cpu_reason(rec),
            "sim": classify_run(rec.get("sim")) if cpu_ok else {"status": "not_run"},
            "compile": classify_run(rec.get("compile"), compiled=True) if cpu_ok and rec.get("compile") else {"status": "not_run"},
            "sim_error": sim.get("error"), "sim_failed_step": sim.get("failed_step"),
            "compile_error": comp.get("error"), "compile_failed_step": comp.get("failed_step"),
            "fallback_ops": sim.get("fallback_ops") or {}, "eager_compiles": sim.get("eager_compiles"),
            "numerics": sim.get("numerics"), "compile_numerics": comp.get("numerics"),
            "seconds": rec.get("seconds"), "raw": rec,
        })
    groups: dict = {}
    for r in rows:
        groups.setdefault(f"{r['source']} {TASK_TITLES[r['task']]}", []).append(r)
    doc_groups = {g: _counts(rs) for g, rs in groups.items()}
    total = _counts(rows)
    fb: dict = {}
    for r in rows:
        if r["sim"]["status"] == "ok":
            for op in r["fallback_ops"]:
                fb[op] = fb.get(op, 0) + 1
    total["fallback_ops_by_architectures"] = dict(sorted(fb.items(), key=lambda kv: (-kv[1], kv[0])))
    return {"schema": 1, "generated": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": info, "simulated": simulated,
            "total": total, "groups": doc_groups, "architectures": rows}


def _counts(rs: list[dict]) -> dict:
    cpu = [r for r in rs if r["cpu_ok"]]
    comp = [r for r in cpu if r["compile"]["status"] != "not_run"]
    c = {"architectures": len(rs), "cpu_ok": len(cpu)}
    for key, runs in (("sim", cpu), ("compile", comp)):
        ok = sum(1 for r in runs if r[key]["status"] == "ok")
        c[key] = {"run": len(runs), "ok": ok, "share": round(ok / len(runs), 4) if runs else None,
                  "limitations": sum(1 for r in runs if r[key]["status"] == "limitation"),
                  "defects": sum(1 for r in runs if r[key]["status"] == "defect")}
    return c


def _share(c: dict) -> str:
    return f"{100 * c['share']:.1f}%" if c["share"] is not None else "-"


def headline(doc: dict) -> str:
    t = doc["total"]
    if not doc.get("simulated"):
        return f"{t['cpu_ok']} of {t['architectures']} vision architectures ran on CPU (simulator not run)"
    s, c = t["sim"], t["compile"]
    if (doc.get("machine") or {}).get("shape_only"):  # placeholders: the step completes, no numerics to compare
        return (f"{s['ok']} of {t['cpu_ok']} vision architectures that run on CPU complete the step shape-only "
                f"({_share(s)}; {s['limitations']} documented limitations, {s['defects']} defects)")
    return (f"{s['ok']} of {t['cpu_ok']} vision architectures that run on CPU run on the simulator with CPU numerics "
            f"({_share(s)}; {s['limitations']} documented limitations, {s['defects']} defects); compiled: "
            f"{c['ok']} of {c['run']} ({_share(c)}; {c['limitations']} limitations, {c['defects']} defects)")


def markdown(doc: dict) -> str:
    m = doc["machine"]
    out = ["# Vision sweep", "", f"{headline(doc)}.", "",
           (f"Tables rebuilt {m.get('started')} from the per-architecture files of earlier runs (" if m.get("report_only") else
            f"Run {m.get('started')} ({m.get('wall_seconds')} s wall, ") + f"{m.get('jobs')} worker process(es), "
           f"{m.get('timeout')} s limit per architecture, variants: {m.get('variants')}, compiled: {m.get('compile')}): "
           f"Python {m.get('python')}, torch {m.get('torch')}, torchvision {m.get('torchvision')}, timm {m.get('timm')}, "
           f"{m.get('platform')}, {m.get('cpus')} CPUs, load {m.get('load_before')} before. Command: `{m.get('command')}`.", "",
           "| group | architectures | CPU ok | simulator ok | share | limitations | defects | compiled | compiled ok | limitations | defects |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for g, c in list(doc["groups"].items()) + [("**total**", doc["total"])]:
        s, k = c["sim"], c["compile"]
        out.append(f"| {g} | {c['architectures']} | {c['cpu_ok']} | {s['ok']} | {_share(s)} | {s['limitations']} | "
                   f"{s['defects']} | {k['run']} | {k['ok']} | {k['limitations']} | {k['defects']} |")
    rows = doc["architectures"]
    for key, title in (("sim", "Simulator (eager)"), ("compile", "torch.compile(backend=\"neuron\")")):
        bad = [r for r in rows if r[key]["status"] in ("limitation", "defect")]
        out += ["", f"## {title}: runs that are not ok", ""]
        if not bad:
            out.append("None.")
            continue
        out += ["| architecture | classification | step | reason | first model frame |", "|---|---|---|---|---|"]
        for r in bad:
            c = r[key]
            label = c["status"] + (f" ({', '.join(c['codes'])})" if c.get("codes") else f" ({c.get('kind')})")
            fr = (r.get(f"{key}_error") or {}).get("frame") or {}
            where = f"`{fr.get('file')}:{fr.get('line')}`" if fr else ""
            out.append(f"| {r['id']} | {label} | {r.get(f'{key}_failed_step') or ''} | {_cell(c['reason'])[:260]} | {where} |")
    fb = doc["total"].get("fallback_ops_by_architectures") or {}
    if fb:
        out += ["", "## CPU fallback ops (number of simulator-ok architectures using each)", "",
                ", ".join(f"`{op}` {n}" for op, n in fb.items())]
    failed = [r for r in rows if not r["cpu_ok"]]
    out += ["", f"## Did not run on CPU ({len(failed)}, not counted)", ""]
    if failed:
        out += ["| architecture | reason |", "|---|---|"] + [f"| {r['id']} | {_cell(r['cpu_reason'])[:300]} |" for r in failed]
    out += ["", "## All architectures", "",
            "| architecture | family | params | input | simulator | worst ratio (grads / params) | compiled | fallback ops | eager compiles |",
            "|---|---|---:|---:|---|---|---|---|---:|"]
    for r in rows:
        num = r.get("numerics") or {}
        ratio = (f"{num.get('grads', {}).get('ratio', '-')} / {num.get('params', {}).get('ratio', '-')}" if num else "-")
        params = f"{r['params']:,}" if r["params"] else "-"
        sim = "-" if not r["cpu_ok"] else r["sim"]["status"]
        fbs = ", ".join(op.replace("aten::", "") for op in r["fallback_ops"])
        out.append(f"| {r['id']} | {r['family']} | {params} | {r['size'] or '-'} | {sim} | {ratio} | {r['compile']['status']} | "
                   f"{fbs} | {r['eager_compiles'] if r['eager_compiles'] is not None else '-'} |")
    return "\n".join(out) + "\n"
