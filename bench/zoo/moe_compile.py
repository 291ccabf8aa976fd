"""The MoE compile subset of the transformers zoo: every causal-LM architecture whose tiny config routes
tokens to experts, its eval forward under ``torch.compile(backend="neuron")`` on the simulated device,
compared with the CPU (issue 35 item 8: MoE routers call ``one_hot``, whose decomposition adds
``_assert_async.msg``; rules/compile_lowering.toml [import]).

    .venv/bin/python bench/zoo/moe_compile.py [--only mixtral,olmoe] [--experts eager] [--timeout 300]
        [--out results/moe_compile.json]

An architecture is MoE when its config (or its text sub-config) has an integer attribute whose name contains
``expert`` greater than 1 (num_experts, num_local_experts, n_routed_experts, ...): no list of model types.
Each one runs in its own process (``--one TYPE``): the zoo's tiny config and build (worker.py), an eval
forward on the CPU, then the same untouched model on ``neuron`` under torch.compile (a failed graph raises:
TorchNeuron's 2.33 default), logits compared (max abs difference over the largest CPU logit).
``--experts eager`` sets the config's ``_experts_implementation`` to transformers' per-expert loop (its router's
``one_hot`` and ``nonzero``) instead of the default grouped kernel, which in float32 under torch.compile is the
custom op ``transformers::grouped_mm_fallback`` (integrations/moe.py ``_can_use_grouped_mm``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.pop("NEURON_PORT_SIMULATE", None)  # the child enables the device itself


def _experts(cfg) -> int:
    """The largest integer ``*expert*`` attribute of the config or its text sub-config (0: not MoE)."""
    best = 0
    for c in (cfg, getattr(cfg, "text_config", None)):
        if c is None:
            continue
        for key, value in vars(c).items():
            if "expert" in key and isinstance(value, int) and not isinstance(value, bool):
                best = max(best, value)
    return best


def moe_architectures(only: set[str]) -> list[dict]:
    import configs
    import worker

    out = []
    for spec in worker.architectures(["causal"]):
        if only and spec["model_type"] not in only:
            continue
        try:
            cfg, _ = configs.build_config(spec["model_type"], configs.TINY)
        except Exception:  # noqa: BLE001 - the zoo's own sweep reports configs it cannot build
            continue
        if _experts(cfg) > 1:
            out.append(spec)
    return out


def run_one(model_type: str, experts: str | None = None) -> dict:
    import torch

    import neuron_backend

    enabled = neuron_backend.enable()
    import configs
    import worker

    spec = next(s for s in worker.architectures(["causal"]) if s["model_type"] == model_type)
    torch.set_num_threads(1)
    rec: dict = {"model_type": model_type, "class": spec["class"]}
    step = "build"
    try:
        if experts:  # the config's experts implementation, set before the model is built from it
            build_config = configs.build_config

            def with_experts(*args, **kwargs):
                cfg, overrides = build_config(*args, **kwargs)
                for c in (cfg, getattr(cfg, "text_config", None)):
                    if c is not None:
                        c._experts_implementation = experts
                return cfg, overrides

            configs.build_config = with_experts
        cfg, _, model, rec["params"] = worker.build_model(spec, configs.TINY)
        rec["experts"] = _experts(cfg)
        inputs = worker.make_inputs("causal", cfg)
        inputs.pop("labels", None)
        pristine = copy.deepcopy(model)
        step = "cpu"
        model.eval()
        with torch.no_grad():
            ref = worker._logits(model(**inputs)).float()
        if not enabled:
            raise RuntimeError("neuron_backend.enable() returned False")
        step = "compile"
        sim = pristine.to("neuron").eval()
        compiled = torch.compile(sim, backend="neuron")
        t0 = time.perf_counter()
        with torch.no_grad():
            out = worker._logits(compiled(**worker._to(inputs, "neuron"))).float().cpu()
        rec["compile_seconds"] = round(time.perf_counter() - t0, 1)
        rec["ok"] = True
        rec["rel_diff"] = float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-12))
        rec["matches"] = rec["rel_diff"] <= 1e-4
    except Exception as e:  # noqa: BLE001 - the report is the result
        rec["ok"] = False
        rec["step"] = step
        rec["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:400]}"
    # the graphs Dynamo handed to the backend (0: nothing was compiled, the model ran eagerly) and its graph breaks
    from torch._dynamo.utils import counters

    rec["graphs"] = counters["stats"].get("unique_graphs", 0)
    rec["graph_breaks"] = sum(counters["graph_break"].values())
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--out", default=str(HERE / "results" / "moe_compile.json"))
    ap.add_argument("--experts", default=None, help="the config's _experts_implementation (e.g. eager)")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.one:
        print("RESULT " + json.dumps(run_one(ns.one, ns.experts)), flush=True)
        return 0
    specs = moe_architectures({s for s in ns.only.split(",") if s})
    print(f"{len(specs)} MoE causal LMs: {', '.join(s['model_type'] for s in specs)}", file=sys.stderr)
    results = []
    for spec in specs:
        t0 = time.perf_counter()
        try:
            extra = ["--experts", ns.experts] if ns.experts else []
            proc = subprocess.run([sys.executable, __file__, "--one", spec["model_type"], *extra], capture_output=True,
                                  text=True, timeout=ns.timeout)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            rec = json.loads(line[7:]) if line else {
                "model_type": spec["model_type"], "ok": False, "step": "process",
                "error": f"exit {proc.returncode}: {' '.join(proc.stderr.split()[-40:])[:400]}"}
        except subprocess.TimeoutExpired:
            rec = {"model_type": spec["model_type"], "ok": False, "step": "timeout", "error": f"> {ns.timeout:.0f} s"}
        rec["seconds"] = round(time.perf_counter() - t0, 1)
        results.append(rec)
        verdict = ("matches" if rec.get("matches") else f"differs {rec.get('rel_diff'):.2g}") if rec["ok"] else \
            f"FAILED at {rec['step']}: {rec['error'][:160]}"
        print(f"{spec['model_type']}: {verdict} ({rec['seconds']} s)", file=sys.stderr, flush=True)
    Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.out).write_text(json.dumps({"results": results}, indent=1) + "\n")
    ok = sum(r["ok"] for r in results)
    print(f"{ok} of {len(results)} compiled; {sum(bool(r.get('matches')) for r in results)} matched the CPU",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
