"""Tables and classification of a zoo sweep (``results.json`` / ``results.md``).

Every simulator failure of an architecture that ran on CPU is classified:

- ``limitation``: a documented TorchNeuron limitation. The simulator said so itself: the exception is
  its ``[neuron-port simulator]`` unsupported-feature error, or it recorded an ``unsupported`` event
  (``neuron-port check`` reports those as NP906 ``unsupported-feature``) or a distributed
  ``unsupported`` event (NP907 ``distributed-constraint``).
- ``defect``: anything else (an exception of another kind, a crash, a hang), i.e. a simulator bug until
  shown otherwise. A run that completes but whose eval logits differ from the CPU run's is also a
  defect (``wrong-result``).
"""

from __future__ import annotations

import time

SIM_PREFIX = "[neuron-port simulator]"
FAMILY_TITLES = {"causal": "causal LM", "masked": "masked LM", "seq2seq": "seq2seq LM", "image": "image classification"}


def classify(rec: dict) -> dict:
    cpu, sim = rec.get("cpu") or {}, rec.get("sim")
    if not cpu.get("ok"):
        return {"status": "cpu_failed", "reason": _cpu_reason(rec)}
    if not sim:
        return {"status": "not_simulated"}
    unsupported = sim.get("unsupported") or []
    dist = sim.get("distributed_unsupported") or []
    if sim.get("ok"):
        num = sim.get("numerics") or {}
        if num.get("match") is False:
            return {"status": "defect", "kind": "wrong-result",
                    "reason": f"eval logits differ from CPU (max abs diff {num.get('max_abs_diff', num.get('logits'))})"}
        return {"status": "ok"}
    err = sim.get("error") or {}
    msg = err.get("message") or ""
    codes = []
    if unsupported or SIM_PREFIX in msg and not dist:
        codes.append("NP906")
    if dist:
        codes.append("NP907")
    if codes:
        features = sorted({u.get("feature") for u in unsupported if u.get("feature")})
        return {"status": "limitation", "codes": codes, "features": features,
                "reason": msg.splitlines()[0][:300] if msg else ", ".join(features)}
    kind = {"Timeout": "hang", "WorkerDied": "crash"}.get(err.get("type"), "exception")
    return {"status": "defect", "kind": kind, "reason": f"{err.get('type')}: {msg.splitlines()[0][:300] if msg else ''}"}


def _cpu_reason(rec: dict) -> str:
    cfg = rec.get("config") or {}
    attempts = cfg.get("attempts") or (rec.get("cpu") or {}).get("attempts") or []
    if not attempts:
        err = (rec.get("cpu") or {}).get("error") or {}
        return f"{err.get('type')}: {(err.get('message') or '').splitlines()[0][:200] if err.get('message') else ''}"
    a = attempts[0]  # the tiny attempt's reason (the wider one usually fails the same way)
    err = a.get("error") or {}
    msg = (err.get("message") or "").strip().splitlines()
    return f"[{a.get('stage')}] {err.get('type')}: {msg[0][:200] if msg else ''}"


def build(results: list[dict], info: dict, simulated: bool = True) -> dict:
    rows = []
    for rec in results:
        c = classify(rec)
        sim = rec.get("sim") or {}
        cfg = rec.get("config") or {}
        rows.append({
            "id": rec["id"], "family": rec["family"], "model_type": rec["model_type"], "class": rec["class"],
            "params": cfg.get("params") or next((a.get("params") for a in cfg.get("attempts", []) if a.get("params")), None),
            "attempt": cfg.get("attempt"),
            "cpu_ok": bool((rec.get("cpu") or {}).get("ok")),
            "sim_ok": bool(sim.get("ok")) if sim else None,
            "classification": c,
            "error": sim.get("error") if sim and not sim.get("ok") else None,
            "failed_step": sim.get("failed_step"),
            "fallback_ops": sim.get("fallback_ops") or {},
            "eager_compiles": sim.get("eager_compiles"),
            "numerics": sim.get("numerics"),
            "seconds": rec.get("seconds"),
            "raw": rec,
        })
    fams = {}
    for fam in dict.fromkeys(r["family"] for r in rows):
        fr = [r for r in rows if r["family"] == fam]
        cpu_ok = [r for r in fr if r["cpu_ok"]]
        sim_ok = [r for r in cpu_ok if r["sim_ok"]]
        fams[fam] = {"architectures": len(fr), "config_built": sum(1 for r in fr if r["params"]),
                     "cpu_ok": len(cpu_ok), "sim_ok": len(sim_ok),
                     "limitations": sum(1 for r in cpu_ok if r["classification"]["status"] == "limitation"),
                     "defects": sum(1 for r in cpu_ok if r["classification"]["status"] == "defect"),
                     "share": round(len(sim_ok) / len(cpu_ok), 4) if cpu_ok else None}
    cpu_ok = [r for r in rows if r["cpu_ok"]]
    sim_ok = [r for r in cpu_ok if r["sim_ok"]]
    fallback_count: dict = {}
    for r in sim_ok:
        for op in r["fallback_ops"]:
            fallback_count[op] = fallback_count.get(op, 0) + 1
    total = {"architectures": len(rows), "config_built": sum(1 for r in rows if r["params"]),
             "cpu_ok": len(cpu_ok), "sim_ok": len(sim_ok),
             "limitations": sum(1 for r in cpu_ok if r["classification"]["status"] == "limitation"),
             "defects": sum(1 for r in rows if r["classification"]["status"] == "defect"),
             "share": round(len(sim_ok) / len(cpu_ok), 4) if cpu_ok else None,
             "fallback_ops_by_architectures": dict(sorted(fallback_count.items(), key=lambda kv: (-kv[1], kv[0])))}
    return {"schema": 1, "generated": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": info, "simulated": simulated,
            "total": total, "families": fams, "architectures": rows}


def headline(doc: dict) -> str:
    t = doc["total"]
    if not doc.get("simulated"):
        return f"{t['cpu_ok']} of {t['architectures']} architectures ran on CPU (simulator not run)"
    share = f"{100 * t['share']:.1f}%" if t["share"] is not None else "n/a"
    return (f"{t['sim_ok']} of {t['cpu_ok']} architectures that run on CPU also run on the simulator ({share}); "
            f"{t['architectures']} architectures, {t['config_built']} tiny configs built, "
            f"{t['limitations']} documented limitations, {t['defects']} simulator defects")


def _cell(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown(doc: dict) -> str:
    m = doc["machine"]
    out = ["# Model-zoo sweep", "",
           f"{headline(doc)}.", "",
           f"Run {m.get('started')} ({m.get('wall_seconds')} s wall, {m.get('jobs')} worker processes, "
           f"{m.get('timeout')} s limit per architecture): Python {m.get('python')}, torch {m.get('torch')}, "
           f"transformers {m.get('transformers')}, {m.get('platform')}, {m.get('cpus')} CPUs, "
           f"load {m.get('load_before')} before. Command: `{m.get('command')}`.", "",
           "| family | architectures | tiny config built | CPU ok | simulator ok | share | limitations | defects |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for fam, f in list(doc["families"].items()) + [("total", doc["total"])]:
        share = f"{100 * f['share']:.1f}%" if f["share"] is not None else "-"
        out.append(f"| {FAMILY_TITLES.get(fam, fam)} | {f['architectures']} | {f['config_built']} | {f['cpu_ok']} | "
                   f"{f['sim_ok']} | {share} | {f['limitations']} | {f['defects']} |")
    rows = doc["architectures"]
    fails = [r for r in rows if r["classification"]["status"] in ("limitation", "defect")]
    out += ["", "## Simulator failures (architectures that run on CPU)", ""]
    if not fails:
        out.append("None.")
    else:
        out += ["| architecture | class | classification | step | error | first model frame |", "|---|---|---|---|---|---|"]
        for r in fails:
            c = r["classification"]
            label = c["status"] + (f" ({', '.join(c['codes'])})" if c.get("codes") else f" ({c.get('kind')})")
            fr = (r.get("error") or {}).get("frame") or {}
            where = f"`{fr.get('file')}:{fr.get('line')}` `{_cell(fr.get('code', ''))[:80]}`" if fr else ""
            out.append(f"| {r['id']} | {r['class']} | {label} | {r.get('failed_step') or ''} | {_cell(c['reason'])[:240]} | {where} |")
    fb = doc["total"].get("fallback_ops_by_architectures") or {}
    if fb:
        out += ["", "## CPU fallback ops (number of simulator-ok architectures using each)", "",
                ", ".join(f"`{op}` {n}" for op, n in fb.items())]
    cpu_failed = [r for r in rows if not r["cpu_ok"]]
    out += ["", f"## Architectures that did not run on CPU ({len(cpu_failed)})", "",
            "Not counted in the share: the tiny config could not be built or the model failed on CPU.", ""]
    if cpu_failed:
        out += ["| architecture | reason |", "|---|---|"]
        out += [f"| {r['id']} | {_cell(r['classification'].get('reason', ''))[:260]} |" for r in cpu_failed]
    out += ["", "## All architectures", "",
            "| architecture | class | params | CPU | simulator | error | fallback ops | eager compiles |",
            "|---|---|---:|---|---|---|---|---:|"]
    for r in rows:
        sim = "-" if r["sim_ok"] is None else ("ok" if r["sim_ok"] else "**failed**")
        c = r["classification"]
        err = "" if c["status"] in ("ok", "not_simulated") else _cell(c.get("reason", ""))[:120]
        if c["status"] == "ok" and (r.get("numerics") or {}).get("generate_equal") is False:
            err = "generate tokens differ from CPU (logits match)"
        fbs = ", ".join(f"{op.replace('aten::', '')}" for op in r["fallback_ops"])
        params = f"{r['params']:,}" if r["params"] else "-"
        out.append(f"| {r['id']} | {r['class']} | {params} | {'ok' if r['cpu_ok'] else 'failed'} | {sim} | {err} | "
                   f"{fbs} | {r['eager_compiles'] if r['eager_compiles'] is not None else '-'} |")
    return "\n".join(out) + "\n"
