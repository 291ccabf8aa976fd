"""Each zoo architecture at its published default size, shape-only, through the user path of
``neuron-port check --model`` (issue 36 item 5).

    .venv/bin/python bench/zoo/default_size.py [--only llama,t5] [--first N] [--jobs 2] [--timeout 300]
        [--batch 1] [--seq 128] [--out bench/zoo/results/shape_only/default_size.json]

Per architecture (worker.architectures(): the four auto-mappings, the common architectures first, then
mapping order): the config at the config class's own defaults (``AutoConfig.for_model(type)``, nothing
shrunk: Llama's defaults are the 7B shape) written as a ``config.json``, the task of its family, and the
standard training step of ``check --model`` (``neuron_port.check.model_run``: the model built under
``with torch.device("neuron")`` by the task's Auto class, bf16 autocast, loss, backward, AdamW) at
``--batch`` x ``--seq``, shape-only, with a time limit per model. Models run ``--jobs`` at a time through
``run_models`` (the local process pool of ``check --model MODEL --model MODEL ...``). The file is
rewritten after each call, so an interrupted sweep keeps what it finished; ``--resume`` skips the
architectures it holds; ``--merge FILE...`` merges runs made side by side (``--only`` parts, ``--out``
files of their own) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

TASKS = {"causal": "causal-lm", "masked": "masked-lm", "seq2seq": "seq2seq", "image": "image-classification"}
# the architectures most projects port, first (the subset when the whole sweep does not fit the time)
COMMON = ["llama", "mistral", "qwen2", "gpt2", "t5", "bart", "bert", "roberta", "vit", "gemma", "phi3", "mixtral",
          "qwen3", "falcon", "gpt_neox", "opt", "distilbert", "deberta-v2", "electra", "mbart", "pegasus", "marian",
          "convnext", "resnet", "swin", "deit", "beit", "gemma2", "phi", "starcoder2", "olmo", "mt5", "xlm-roberta",
          "albert", "efficientnet", "mobilenet_v2", "regnet", "dinov2", "qwen3_moe", "deepseek_v3", "gpt_bigcode",
          "bloom", "codegen", "gptj", "stablelm", "granite", "cohere", "mamba", "rwkv", "longt5"]


def ordered(specs: list[dict]) -> list[dict]:
    rank = {t: i for i, t in enumerate(COMMON)}
    return sorted(specs, key=lambda s: (rank.get(s["model_type"], len(COMMON)), specs.index(s)))


def default_config(spec: dict) -> dict:
    """The config class's defaults as a config.json, naming the class as a published one does
    (``architectures``: transformers' ``from_config`` needs it where the task maps the type to several
    classes, DeiT's with and without a teacher)."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(spec["model_type"]).to_dict()
    config["architectures"] = [spec["class"]]
    return config


def summary(spec: dict, result: dict, seconds: float) -> dict:
    out = {"id": spec["id"], "model_type": spec["model_type"], "family": spec["family"], "task": result.get("task"),
           "seconds": round(seconds, 1)}
    if result.get("row") is None:
        out.update(ok=False, error=result.get("error") or "no report")
        return out
    doc, row = result["report"], result["row"]
    status = doc["runtime"]["status"]
    out.update(ok=row["exit_code"] == 0, exit_code=row["exit_code"], fallbacks=row["fallbacks"],
               unsupported=row["unsupported"], findings=row["findings"], peak_bytes=row["peak_bytes"],
               fallback_ops=sorted({f.get("op") for f in doc["runtime"].get("fallbacks") or ()}),
               unsupported_features=sorted({u.get("feature") or u.get("op") or "?"
                                            for u in doc["runtime"].get("unsupported") or ()}))
    tail = status.get("stderr_tail") or ""
    tail = "\n".join(tail) if isinstance(tail, list) else tail  # the report keeps it as lines
    line = next((ln for ln in tail.splitlines() if ln.startswith("model_run:")), None)
    if line:
        out["model_run"] = line
    if not out["ok"]:
        out["error"] = status.get("timed_out") and "timeout" or _last_error(tail)
        out["stderr_tail"] = tail[-2500:]
    return out


def _last_error(tail: str) -> str:
    lines = [ln for ln in tail.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if not ln.startswith((" ", "\t")) and ("Error" in ln or "Exception" in ln or ":" in ln):
            return ln[:400]
    return lines[-1][:400] if lines else "failed (no output)"


def merge(out: Path, files: list[Path]) -> int:
    docs = [json.loads(out.read_text())] if out.is_file() else []
    docs += [json.loads(f.read_text()) for f in files]
    rows: dict = {}
    for d in docs:
        rows.update({r["id"]: r for r in d.get("results", [])})
    doc = {**docs[0], "results": list(rows.values()),
           "merged": [{k: d.get(k) for k in ("command", "started", "finished", "load_before", "load_after")}
                      for d in docs]}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    os.replace(tmp, out)
    print(f"default size: {sum(1 for r in rows.values() if r['ok'])} of {len(rows)} ran (merged {len(files)} files)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="causal,masked,seq2seq,image")
    ap.add_argument("--only", default="")
    ap.add_argument("--first", type=int, default=0, help="only the first N (common architectures first)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--out", default=str(HERE / "results" / "shape_only" / "default_size.json"))
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--retry-failed", action="store_true", help="with --resume: run the failed ones again")
    ap.add_argument("--merge", nargs="+", default=None, metavar="FILE",
                    help="merge other runs' files (sweeps run side by side on parts, --only/--out) into --out, a "
                         "later file's architectures replacing an earlier one's; runs nothing")
    a = ap.parse_args(argv)
    if a.merge:
        return merge(Path(a.out), [Path(f) for f in a.merge])
    import worker
    from neuron_port.check.model_run.engines import run_models
    from neuron_port.check.model_run.spec import ModelRun

    specs = ordered(worker.architectures([f for f in a.families.split(",") if f]))
    if a.only:
        want = {w.strip() for w in a.only.split(",") if w.strip()}
        specs = [s for s in specs if s["model_type"] in want or s["id"] in want]
    if a.first:
        specs = specs[:a.first]
    out = Path(a.out)
    doc = {"command": " ".join(["bench/zoo/default_size.py", *(argv if argv is not None else sys.argv[1:])]),
           "started": time.strftime("%Y-%m-%d %H:%M:%S"), "load_before": os.getloadavg(), "batch": a.batch,
           "seq": a.seq, "timeout": a.timeout, "jobs": a.jobs, "selected": [s["id"] for s in specs], "results": []}
    if a.resume and out.is_file():
        old = json.loads(out.read_text())
        selected = {s["id"] for s in specs}
        doc["results"] = [r for r in old.get("results", []) if r["ok"] or not a.retry_failed or r["id"] not in selected]
        doc["earlier"] = {k: old.get(k) for k in ("command", "started", "finished", "load_before", "load_after")}
    done = {r["id"] for r in doc["results"]}
    pending = [s for s in specs if s["id"] not in done]
    jobs = max(1, min(a.jobs, 2))
    for i in range(0, len(pending), jobs):
        chunk, runs, ready = pending[i:i + jobs], [], []
        for spec in chunk:
            try:
                runs.append(ModelRun(spec["model_type"], default_config(spec), TASKS[spec["family"]],
                                     a.batch, a.seq))
                ready.append(spec)
            except Exception as exc:  # noqa: BLE001 - a config that cannot be made is the model's row
                doc["results"].append({"id": spec["id"], "model_type": spec["model_type"], "family": spec["family"],
                                       "ok": False, "stage": "config", "error": f"{type(exc).__name__}: {exc}"[:400]})
        t0 = time.perf_counter()
        results = run_models(runs, timeout=a.timeout, jobs=len(runs)) if runs else []
        seconds = time.perf_counter() - t0
        for spec, result in zip(ready, results):
            rec = summary(spec, result, seconds)
            doc["results"].append(rec)
            print(f"[{len(doc['results'])}/{len(specs)}] {spec['id']}: {'ok' if rec['ok'] else 'FAILED ' + str(rec.get('error'))[:160]}"
                  f" ({seconds:.0f} s)", flush=True)
        doc["load_after"] = os.getloadavg()
        doc["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        os.replace(tmp, out)
    ok = sum(1 for r in doc["results"] if r["ok"])
    print(f"default size: {ok} of {len(doc['results'])} ran ({len(specs) - len(doc['results'])} not run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
