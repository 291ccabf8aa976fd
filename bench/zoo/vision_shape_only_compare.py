"""Compare a shape-only vision sweep with a real simulated one, architecture by architecture (issue 36 item 5).

    .venv/bin/python bench/zoo/vision_shape_only_compare.py --real DIR [--real DIR2 ...] --fake DIR [--fake DIR2 ...]
        [--out bench/zoo/results/vision_shape_only]

Each DIR holds a ``vision_sweep.py`` run's ``vision_results.json`` (``--compile none`` for the real run,
``--shape-only`` for the other); several folders on one side are merged, a later folder's architectures
replacing an earlier one's (the sweep run in parts: torchvision classification, timm, the other tasks, or a
rerun after a fix). An architecture counts when it runs for real: CPU ok and the simulated step completed
(whatever its numerics). For each, the shape-only step must complete and report the same findings as the
transformers sweep's comparison: ``shape_only_compare.findings`` / ``differences`` (CPU-fallback ops and
calls, unsupported features, distributed constraints, float64 ops and calls, eager signatures and calls per
op, ``add``/``add_`` together; a second count with PyTorch's tensor-subclass paths in autograd merged,
``shape_only_compare.subclass_differences``: the overloads and autograd's view-replay zero-fills; a third
up to an assumed even split, ``shape_only_compare.split_equal``; a fourth up to data-dependent sizes,
``shape_only_compare.sizes_equal``: a detector's kept boxes and NMS survivors, by kind and op). A layout
difference is a difference: it is shape-only's to fix (docs/shape-only.md), not merged.
Writes ``OUT/comparison.json`` and ``OUT/comparison.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from shape_only_compare import (_write, differences, findings, not_equal_line, sizes_equal,  # noqa: E402
                                split_equal, subclass_differences)


def _load(folders: list[str]) -> tuple[dict, list[dict]]:
    """Rows by id (a later folder's replace an earlier one's) and each folder's machine record."""
    rows: dict = {}
    machines = []
    for folder in folders:
        path = Path(folder) / "vision_results.json"
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"{path}: cannot read a vision sweep's results ({exc})")
        rows.update({r["id"]: r for r in doc["architectures"]})
        machines.append({"folder": str(folder), **{k: doc["machine"].get(k) for k in (
            "started", "wall_seconds", "jobs", "timeout", "load_before", "load_after", "torch", "torchvision", "timm",
            "shape_only", "command")}})
    return rows, machines


def _sim(row: dict) -> dict:
    return (row.get("raw") or {}).get("sim") or {}


def _group(row: dict) -> str:
    return f"{row['source']} {row['task']}"


def compare(real: dict, fake: dict) -> list[dict]:
    out = []
    for aid, r in real.items():
        if not (r["cpu_ok"] and _sim(r).get("ok")):
            continue
        f = fake.get(aid)
        row = {"id": aid, "group": _group(r), "family": r.get("family"), "params": r.get("params"),
               "size": r.get("size"), "real_numerics": r["sim"]["status"]}
        fsim = _sim(f) if f else {}
        if f is None:
            row["status"] = "not_run"
        elif not f["cpu_ok"]:
            row.update(status="cpu_failed", reason=f.get("cpu_reason"))
        elif not fsim.get("ok"):
            err = fsim.get("error") or {}
            msg = err.get("message") or ""
            row.update(status="failed", failed_step=fsim.get("failed_step"),
                       reason=f"{err.get('type')}: {msg.splitlines()[0][:300] if msg else ''}", frame=err.get("frame"))
        elif not fsim.get("shape_only_active"):
            row["status"] = "not_shape_only"
        else:
            diff = differences(findings(_sim(r)), findings(fsim))
            row.update(status="equal" if not diff else "differs", differences=diff)
            if diff:
                rest = subclass_differences(_sim(r), fsim)
                row["equal_modulo_subclass_paths"] = not rest
                if rest:
                    row["differences_modulo_subclass_paths"] = rest
                    row["equal_modulo_split"] = split_equal(_sim(r), fsim, rest)
                    if not row["equal_modulo_split"]:
                        row["equal_modulo_sizes"] = sizes_equal(_sim(r), fsim)
        out.append(row)
    return out


def _counts(rows: list[dict]) -> dict:
    c = Counter(r["status"] for r in rows)
    split = c["equal"] + sum(1 for r in rows if r.get("equal_modulo_subclass_paths") or r.get("equal_modulo_split"))
    return {"real_ran": len(rows), "shape_only_ran": c["equal"] + c["differs"], "equal": c["equal"],
            "equal_modulo_subclass_paths": c["equal"] + sum(1 for r in rows if r.get("equal_modulo_subclass_paths")),
            "equal_modulo_split": split,
            "equal_modulo_sizes": split + sum(1 for r in rows if r.get("equal_modulo_sizes")),
            "share_equal": round(c["equal"] / len(rows), 4) if rows else None, "by_status": dict(sorted(c.items()))}


def build(real_folders: list[str], fake_folders: list[str]) -> dict:
    real, real_m = _load(real_folders)
    fake, fake_m = _load(fake_folders)
    rows = compare(real, fake)
    groups: dict = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    return {**_counts(rows), "groups": {g: _counts(rs) for g, rs in groups.items()},
            "real": real_m, "shape_only": fake_m,
            "real_failed": [{"id": aid, "status": r["sim"]["status"], "reason": r["sim"].get("reason")}
                            for aid, r in real.items() if r["cpu_ok"] and not _sim(r).get("ok")],
            "not_in_real": sorted(set(fake) - set(real)),
            "architectures": rows}


def markdown(doc: dict) -> str:
    out = ["# Shape-only vision sweep: findings against the real simulated run", "",
           f"{doc['real_ran']} architectures run for real (CPU ok, simulated step completed); {doc['shape_only_ran']} "
           f"of them ran shape-only; {doc['equal']} with equal findings ({100 * (doc['share_equal'] or 0):.1f}%), "
           f"{doc['equal_modulo_subclass_paths']} with PyTorch's tensor-subclass paths in autograd merged "
           "(an op's in-place and out-of-place overloads as one; `_index_put_impl_`'s unsafe flag dropped; the "
           "zero-fills of autograd's two view paths), "
           f"{doc['equal_modulo_split']} up to an assumed even split as well (a router's; none expected here), "
           f"{doc['equal_modulo_sizes']} up to data-dependent sizes (the shape-only run listed a size rule, NP911, "
           "and the findings are the same by kind and op; calls and signatures after the sizes not compared: "
           "`shape_only_compare.sizes_equal`).", "",
           "Runs (real, then shape-only):", ""]
    for m in doc["real"] + doc["shape_only"]:
        out.append(f"- `{m['folder']}`: {'shape-only' if m.get('shape_only') else 'real'}, started {m.get('started')}, "
                   f"{m.get('wall_seconds')} s wall, {m.get('jobs')} worker(s), {m.get('timeout')} s limit, load "
                   f"{[round(x, 2) for x in m.get('load_before') or []]} before; torch {m.get('torch')}, torchvision "
                   f"{m.get('torchvision')}, timm {m.get('timm')}; `{m.get('command')}`")
    out += ["", "| group | run for real | ran shape-only | equal | equal (subclass paths merged) | equal (and up to a split) "
            "| equal (and up to data-dependent sizes) | statuses |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for g, c in list(doc["groups"].items()) + [("**total**", doc)]:
        out.append(f"| {g} | {c['real_ran']} | {c['shape_only_ran']} | {c['equal']} | {c['equal_modulo_subclass_paths']} | "
                   f"{c['equal_modulo_split']} | {c['equal_modulo_sizes']} | "
                   + ", ".join(f"{k} {v}" for k, v in c["by_status"].items()) + " |")
    bad = [r for r in doc["architectures"] if r["status"] != "equal"]
    out += ["", "## Not equal", ""]
    if not bad:
        out.append("None.")
    out += [not_equal_line(r, f"**{r['id']}**") for r in bad]
    if doc["real_failed"]:
        out += ["", "## Failing for real too (not counted)", ""]
        out += [f"- {r['id']}: {r['status']} {r.get('reason') or ''}" for r in doc["real_failed"]]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", action="append", required=True, help="a real run's folder (repeatable; later replaces)")
    ap.add_argument("--fake", action="append", required=True, help="a shape-only run's folder (repeatable)")
    ap.add_argument("--out", default=str(HERE / "results" / "vision_shape_only"))
    a = ap.parse_args(argv)
    doc = build(a.real, a.fake)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "comparison.json", json.dumps(doc, indent=1, default=str) + "\n")
    _write(out / "comparison.md", markdown(doc))
    print(f"ran for real {doc['real_ran']}, shape-only ran {doc['shape_only_ran']}, equal findings {doc['equal']}, "
          f"equal with subclass paths merged {doc['equal_modulo_subclass_paths']}, and up to a split "
          f"{doc['equal_modulo_split']}, up to data-dependent sizes {doc['equal_modulo_sizes']}; {doc['by_status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
