"""Model-zoo sweep: every transformers architecture of four auto-mappings, on CPU and on the simulated
``neuron`` device, one crash-isolated worker process per architecture.

    .venv/bin/python bench/zoo/sweep.py [--families causal,masked,seq2seq,image] [--only llama,bert]
        [--jobs 2] [--timeout 300] [--out bench/zoo/results] [--cpu-only] [--shape-only]

Workers are forked from a fork server that has imported torch and transformers once (``forkserver``
context with preload), so a worker costs the model's own import, not torch's. Each worker writes its
phases to ``OUT/raw/<family>__<type>.jsonl``, its output to ``OUT/logs/<family>__<type>.log`` and the
simulator's events file to ``OUT/events/<family>__<type>/``. A worker that exceeds ``--timeout`` is
killed (SIGTERM, then SIGKILL); one that dies (segfault, abort, kill) is reported with its signal, and
the simulator's last events snapshot supplies the fallbacks and compiles seen before the crash.

The results go to ``OUT/results.json`` and ``OUT/results.md`` (see ``report.py``). ``--shape-only`` runs
the simulator phase shape-only (worker.py; default ``--out``: ``results/shape_only/fake``); compare it with
a real run's results with ``shape_only_compare.py``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.pop("NEURON_PORT_SIMULATE", None)  # workers enable the device themselves (worker.run_one)


def _safe(arch_id: str) -> str:
    return arch_id.replace(":", "__").replace("/", "_")


def _read_lines(path: Path) -> dict:
    out: dict = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            out[d.pop("kind")] = d
    return out


def _events_fallback(events_dir: Path) -> dict:
    """Fallbacks / compiles / unsupported from the events snapshot of a worker that died."""
    out: dict = {"fallback_ops": {}, "eager_compiles": None, "unsupported": [], "distributed_unsupported": []}
    files = sorted(events_dir.glob("neuron-events-*.jsonl"))
    if not files:
        return out
    for line in files[-1].read_text().splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue
        k = e.get("kind")
        if k == "fallback":
            out["fallback_ops"][e["op"]] = e.get("calls")
        elif k == "summary":
            out["eager_compiles"] = e.get("eager_compiles")
        elif k == "unsupported":
            out["unsupported"].append({"feature": e.get("feature"), "op": e.get("op"), "error": e.get("error"),
                                       "message": (e.get("message") or "")[:300], "action": e.get("action")})
        elif k == "distributed" and e.get("event") == "unsupported":
            out["distributed_unsupported"].append({"op": e.get("op"), "message": (e.get("message") or "")[:300]})
    return out


def _log_tail(path: Path, n: int = 40) -> str:
    if not path.is_file():
        return ""
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if not ln.startswith("[transformers]")]
    return "\n".join(lines[-n:])


def collect(spec: dict, out: Path, exitcode: int | None, timed_out: bool, seconds: float) -> dict:
    name = _safe(spec["id"])
    raw = _read_lines(out / "raw" / f"{name}.jsonl")
    rec = {**spec, "seconds": round(seconds, 2), "exitcode": exitcode, "timed_out": timed_out,
           "config": raw.get("config"), "cpu": raw.get("cpu"), "sim": raw.get("sim")}
    if spec.get("compile"):  # the vision sweep's torch.compile phase (vision_worker.py)
        rec["compile"] = raw.get("compile")
    died = timed_out or (exitcode not in (0, None))
    if died:
        how = (f"timeout after {seconds:.0f} s" if timed_out else
               f"killed by signal {signal.Signals(-exitcode).name}" if exitcode < 0 else f"exit code {exitcode}")
        tail = _log_tail(out / "logs" / f"{name}.log")
        err = {"type": "Timeout" if timed_out else "WorkerDied", "message": how, "frame": None, "log_tail": tail[-3000:]}
        if rec["config"] is None:
            rec["config"] = {"ok": False, "attempts": [{"attempt": "?", "stage": "worker", "error": err}]}
        elif rec["cpu"] is None:
            rec["cpu"] = {"ok": False, "error": err}
        elif rec["sim"] is None and rec["cpu"].get("ok"):
            rec["sim"] = {"ok": False, "error": err, **_events_fallback(out / "events" / name)}
        elif spec.get("compile") and rec.get("compile") is None and rec["sim"].get("ok"):
            rec["compile"] = {"ok": False, "error": err, **_events_fallback(out / "events" / name)}
    return rec


TRANSFORMERS_PRELOAD = ["torch", "transformers", "transformers.modeling_utils", "transformers.generation", "worker",
                        "configs"]


def run_sweep(specs: list[dict], out: Path, jobs: int = 2, timeout: float = 300.0, simulate: bool = True,
              progress=print, target=None, preload=None) -> list[dict]:
    """Run ``target(spec, raw_path, log_path, events_dir, simulate)`` (default ``worker.run_one``) for each
    spec in a worker process forked from a server that imported ``preload`` once."""
    if target is None:
        import worker

        target = worker.run_one
    for sub in ("raw", "logs", "events"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(TRANSFORMERS_PRELOAD if preload is None else preload)
    pending = list(specs)
    running: dict = {}
    results: list[dict] = []
    done = 0
    while pending or running:
        while pending and len(running) < jobs:
            spec = pending.pop(0)
            name = _safe(spec["id"])
            raw = out / "raw" / f"{name}.jsonl"
            raw.unlink(missing_ok=True)
            ev = out / "events" / name
            for f in ev.glob("*") if ev.is_dir() else []:
                f.unlink()
            p = ctx.Process(target=target, name=name,
                            args=(spec, str(raw), str(out / "logs" / f"{name}.log"), str(ev), simulate))
            p.start()
            running[p] = (spec, time.monotonic())
        time.sleep(0.05)
        for p, (spec, t0) in list(running.items()):
            elapsed = time.monotonic() - t0
            timed_out = False
            if p.is_alive():
                if elapsed < timeout:
                    continue
                timed_out = True
                p.terminate()
                p.join(5)
                if p.is_alive():
                    p.kill()
            p.join()
            del running[p]
            rec = collect(spec, out, p.exitcode, timed_out, elapsed)
            results.append(rec)
            done += 1
            progress(f"[{done}/{len(specs)}] {spec['id']}: {_status(rec)} ({elapsed:.1f} s)")
    order = {s["id"]: i for i, s in enumerate(specs)}
    results.sort(key=lambda r: order[r["id"]])
    return results


def _status(rec: dict) -> str:
    cpu, sim = rec.get("cpu") or {}, rec.get("sim") or {}
    if not cpu.get("ok"):
        return "CPU failed"
    if not sim:
        return "CPU ok"
    if sim.get("ok"):
        return "CPU ok, simulator ok"
    e = sim.get("error") or {}
    return f"CPU ok, simulator FAILED: {e.get('type')}: {(e.get('message') or '').splitlines()[0][:120] if e.get('message') else ''}"


def machine() -> dict:
    import torch
    import transformers

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "platform": platform.platform(), "cpus": os.cpu_count(), "load_before": load}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="causal,masked,seq2seq,image")
    ap.add_argument("--only", default="", help="comma-separated model types (or family:type)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per architecture (both phases)")
    ap.add_argument("--out", default=None, help="default: results, or results/shape_only/fake with --shape-only")
    ap.add_argument("--cpu-only", action="store_true", help="skip the simulator phase (config development)")
    ap.add_argument("--shape-only", action="store_true", help="the simulator phase shape-only (fake device tensors)")
    a = ap.parse_args(argv)
    if a.out is None:
        a.out = str(HERE / "results" / "shape_only" / "fake") if a.shape_only else str(HERE / "results")
    import worker
    import report

    fams = [f.strip() for f in a.families.split(",") if f.strip()]
    specs = worker.architectures(fams)
    if a.only:
        want = {w.strip() for w in a.only.split(",") if w.strip()}
        specs = [s for s in specs if s["model_type"] in want or s["id"] in want]
    if a.shape_only:
        specs = [{**s, "shape_only": True} for s in specs]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    info = machine()
    t0 = time.time()
    results = run_sweep(specs, out, jobs=max(1, min(a.jobs, 2)), timeout=a.timeout, simulate=not a.cpu_only)
    info["shape_only"] = a.shape_only
    info.update({"started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0)),
                 "wall_seconds": round(time.time() - t0, 1), "jobs": a.jobs, "timeout": a.timeout,
                 "load_after": os.getloadavg() if hasattr(os, "getloadavg") else None,
                 "command": " ".join(["bench/zoo/sweep.py", *(argv if argv is not None else sys.argv[1:])])})
    doc = report.build(results, info, simulated=not a.cpu_only)
    (out / "results.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    (out / "results.md").write_text(report.markdown(doc))
    print(report.headline(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
