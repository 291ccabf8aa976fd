"""Classify the failures of the default-size sweep (``default_size.py``) and give its share against the
issue's denominator (issue 36 item 5: >= 95% of the architectures that run for real at the tiny size run
shape-only at their published default size).

    .venv/bin/python bench/zoo/default_size_classify.py [--default results/shape_only/default_size.json]
        [--real results/shape_only/real/results.json] [--json OUT]

Per failed architecture, two facts found without neuron-port (in this process, nothing enabled):

* ``tiny_real``: did it run for real (CPU and simulator) in the tiny sweep? Only those are in the
  denominator; an architecture that does not run on the CPU at its tiny size is not.
* ``builds``: does its default config build a model and run one training step on PyTorch's ``meta``
  device (no memory, no neuron-port: transformers' own ``from_config``, the zoo's inputs)? A config whose
  class defaults leave a field ``None`` that the model needs (``rope_theta``, ``num_experts_per_tok``)
  fails there the same way: the config's, not shape-only's (the build's error, or the step's when it is
  the sweep's error). The error is printed beside the sweep's.

What remains (it builds, it runs for real at the tiny size, and failed shape-only) is shape-only's to fix
or classify by hand; they are listed with their errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # neuron-port's simulator stays out of this process


def builds(spec: dict) -> str | None:
    """None if the default config builds the task's model on the meta device, else the error."""
    import torch
    import transformers

    from default_size import default_config

    try:
        config = transformers.AutoConfig.for_model(spec["model_type"], **{
            k: v for k, v in default_config(spec).items() if k != "model_type"})
        cls = getattr(transformers, spec["class"])
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            model = cls._from_config(config)
    except Exception as exc:  # noqa: BLE001 - the error is the finding
        return f"{type(exc).__name__}: {exc}"[:300]
    try:  # one step on meta tensors: a field the forward needs (``num_experts_per_tok``) fails here too
        import worker

        model.train()
        inputs = worker._to(worker.make_inputs(spec["family"], config), "meta")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            worker._loss(model(**inputs)).backward()
    except Exception as exc:  # noqa: BLE001
        return f"step: {type(exc).__name__}: {exc}"[:300]
    return None


def same_failure(sweep: str, meta: str | None) -> bool:
    """The sweep's error is the meta run's (its first line, the class and message)."""
    if not meta:
        return False
    meta = meta.removeprefix("step: ")
    return sweep.splitlines()[0][:80] == meta.splitlines()[0][:80]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--default", default=str(HERE / "results" / "shape_only" / "default_size.json"))
    ap.add_argument("--real", default=str(HERE / "results" / "shape_only" / "real" / "results.json"))
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)
    import worker

    runs = json.loads(Path(a.default).read_text())["results"]
    real = {r["id"]: r for r in json.loads(Path(a.real).read_text())["architectures"]}
    specs = {s["id"]: s for s in worker.architectures(["causal", "masked", "seq2seq", "image"])}
    tiny_real = {i for i, r in real.items() if r.get("cpu_ok") and r.get("sim_ok")}
    rows = []
    for r in runs:
        row = {"id": r["id"], "ok": r["ok"], "tiny_real": r["id"] in tiny_real}
        if not r["ok"]:
            row["error"] = str(r.get("error"))[:300]
            row["build_error"] = builds(specs[r["id"]]) if r["id"] in specs else "not in this transformers"
            row["class"] = ("not in the denominator (does not run for real at the tiny size)" if not row["tiny_real"]
                            else "config: its defaults do not build a model, without neuron-port"
                            if row["build_error"] and not row["build_error"].startswith("step: ")
                            else "config: fails the same without neuron-port (a step on PyTorch's meta device)"
                            if same_failure(row["error"], row["build_error"])
                            else "shape-only (to classify)")
        rows.append(row)
    counted = [r for r in rows if r["tiny_real"]]
    ran = sum(r["ok"] for r in counted)
    builds_ok = [r for r in counted if r["ok"] or not r["class"].startswith("config")]
    out = {"tried": len(rows), "in_denominator": len(counted), "ran": ran,
           "share": round(ran / len(counted), 4) if counted else None,
           "in_denominator_whose_config_builds": len(builds_ok),
           "share_of_those": round(ran / len(builds_ok), 4) if builds_ok else None,
           "not_tried_in_denominator": sorted(tiny_real - {r["id"] for r in rows}),
           "failures": [r for r in rows if not r["ok"]]}
    print(f"tried {out['tried']}; in the denominator (run for real at the tiny size) {out['in_denominator']}, "
          f"ran {ran} ({100 * (out['share'] or 0):.1f}%); whose default config builds: {len(builds_ok)}, "
          f"ran {100 * (out['share_of_those'] or 0):.1f}%; denominator not tried: {len(out['not_tried_in_denominator'])}")
    for r in out["failures"]:
        print(f"  {r['id']}: {r['class']}\n      sweep: {r['error'][:160]}"
              + (f"\n      build: {r['build_error'][:160]}" if r.get("build_error") else ""))
    if a.json:
        tmp = Path(a.json).with_suffix(".tmp")
        tmp.write_text(json.dumps(out, indent=1) + "\n")
        os.replace(tmp, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
