"""Vision sweep: torchvision (classification, detection, segmentation, video, optical flow) and timm (the
smallest variant of every family), random weights, one training step on CPU, on the simulated
``neuron`` device and (a subset) under ``torch.compile(backend="neuron")``, compared; one
crash-isolated worker process per architecture (``sweep.run_sweep``).

Runs in the vision venv that ``bench/zoo/setup_vision.sh`` creates (torch 2.14.1 + torchvision 0.29.1 +
timm 1.0.31; see README.md for why not the project's .venv); ``--sources transformers`` (tiny configs of
transformers' vision models) also runs in the project's .venv, which is how CI runs a subset:

    bench/zoo/.venv/bin/python bench/zoo/vision_sweep.py [--sources torchvision,timm] [--tasks ...]
        [--variants smallest|all] [--only resnet18,timm:classification:vit_tiny_patch16_224]
        [--compile torchvision|all|none|NAMES] [--jobs 1] [--timeout 600] [--out DIR] [--cpu-only] [--shape-only]

Output: ``OUT/vision_results.json`` and ``OUT/vision_results.md`` (``vision_report.py``); the
architecture selection (parameter counts on the meta device) is kept in ``OUT/vision_selection-<sources>.json``
and reused while torch, torchvision and timm keep their versions.

``--shape-only`` runs the simulator phase shape-only (``vision_worker.py``; no compiled phase; default
``--out``: ``results/vision_shape_only/fake``); ``vision_shape_only_compare.py`` compares its findings with
a real run's (``--compile none --out results/vision_shape_only/real``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # timm never downloads with pretrained=False; belt and braces
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.pop("NEURON_PORT_SIMULATE", None)  # workers enable the device themselves

SOURCES = ("torchvision", "timm", "transformers", "diffusers")


def versions(sources=SOURCES) -> dict:
    import importlib

    import torch

    out = {"torch": torch.__version__}
    for name in sources:
        out[name] = importlib.import_module(name).__version__
    return out


def preload(sources) -> list[str]:
    extra = ["transformers", "transformers.modeling_utils", "configs"] if "transformers" in sources else []
    return ["torch", *[s for s in sources if s != "transformers"], *extra, "vision_models", "vision_worker"]


def selection(out: Path, variants: str, sources=SOURCES, progress=print) -> list[dict]:
    """The architectures to run: every builder's parameter count is kept in ``OUT/vision_selection-<sources>.json``
    (reused while the versions are the same), then ``variants`` picks from it."""
    import vision_models as vm

    cache = out / f"vision_selection-{'+'.join(sources)}.json"
    key = versions(sources)
    doc = json.loads(cache.read_text()) if cache.is_file() else {}
    if doc.get("key") != key:
        progress(f"counting the parameters of every builder on the meta device ({key})")
        t0 = time.time()
        doc = {"key": key, "architectures": vm.count(sources)}
        doc["seconds"] = round(time.time() - t0, 1)
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        tmp.replace(cache)
    specs = [dict(s) for s in doc["architectures"]]
    return specs if variants == "all" else vm.smallest(specs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", default="torchvision,timm")
    ap.add_argument("--tasks", default=",".join(("classification", "detection", "segmentation", "video", "optical_flow",
                                                 "diffusion")))
    ap.add_argument("--variants", default="smallest", choices=("smallest", "all"))
    ap.add_argument("--only", default="", help="comma-separated builder names or ids (source:task:name)")
    ap.add_argument("--compile", default="torchvision",
                    help="which architectures also run compiled: a source, 'all', 'none' or builder names")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per architecture (all phases)")
    ap.add_argument("--out", default=None, help="default: results, or results/vision_shape_only/fake with --shape-only")
    ap.add_argument("--cpu-only", action="store_true")
    ap.add_argument("--shape-only", action="store_true",
                    help="the simulator phase shape-only (fake device tensors, no numerics, no compiled phase)")
    ap.add_argument("--report-only", action="store_true",
                    help="no run: rebuild the tables from the per-architecture files of earlier runs in OUT/raw")
    ap.add_argument("--recorded", default=None,
                    help="with --report-only: an earlier vision_results.json whose records stand in for the "
                         "architectures that have no file in OUT/raw (a partial re-run with --only)")
    a = ap.parse_args(argv)
    if a.out is None:
        a.out = str(HERE / "results" / "vision_shape_only" / "fake") if a.shape_only else str(HERE / "results")
    import sweep
    import vision_report
    import vision_worker

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    sources = tuple(s.strip() for s in a.sources.split(",") if s.strip())
    bad = set(sources) - set(SOURCES)
    if bad:
        ap.error(f"unknown source(s) {', '.join(sorted(bad))} (choose from {', '.join(SOURCES)})")
    tasks = {t.strip() for t in a.tasks.split(",") if t.strip()}
    specs = [s for s in selection(out, a.variants, sources) if s["task"] in tasks]
    if a.only:
        want = {w.strip() for w in a.only.split(",") if w.strip()}
        specs = [s for s in specs if s["name"] in want or s["id"] in want]
    comp = {c.strip() for c in a.compile.split(",") if c.strip()}
    for s in specs:
        s["compile"] = not a.cpu_only and not a.shape_only and (
            "all" in comp or s["source"] in comp or s["name"] in comp or s["id"] in comp)
        if a.shape_only:
            s["shape_only"] = True
    info = {"python": platform.python_version(), **versions(sources), "platform": platform.platform(), "cpus": os.cpu_count(),
            "load_before": os.getloadavg(), "jobs": a.jobs, "timeout": a.timeout, "variants": a.variants,
            "compile": "none" if a.shape_only else a.compile, "report_only": a.report_only, "shape_only": a.shape_only}
    t0 = time.time()
    if a.report_only:  # the architectures an earlier run wrote (wall time: the sum of their own times)
        recorded = {}
        if a.recorded:
            recorded = {r["id"]: r["raw"] for r in json.loads(Path(a.recorded).read_text())["architectures"]
                        if r.get("raw")}
        results = [sweep.collect(s, out, 0, False, 0.0) if (out / "raw" / f"{sweep._safe(s['id'])}.jsonl").is_file()
                   else recorded.get(s["id"]) for s in specs]
        results = [r for r in results if r is not None]
        info["recorded"] = a.recorded
    else:
        results = sweep.run_sweep(specs, out, jobs=max(1, min(a.jobs, 2)), timeout=a.timeout, simulate=not a.cpu_only,
                                  target=vision_worker.run_one, preload=preload(sources))
    wall = None if a.report_only else round(time.time() - t0, 1)
    info.update({"started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0)),
                 "wall_seconds": wall, "load_after": os.getloadavg(),
                 "command": " ".join(["bench/zoo/vision_sweep.py", *(argv if argv is not None else sys.argv[1:])])})
    doc = vision_report.build(results, info, simulated=not a.cpu_only)
    for name, text in (("vision_results.json", json.dumps(doc, indent=1, default=str) + "\n"),
                       ("vision_results.md", vision_report.markdown(doc))):
        tmp = out / (name + ".tmp")
        tmp.write_text(text)
        tmp.replace(out / name)
    print(vision_report.headline(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
