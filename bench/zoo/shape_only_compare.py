"""Compare a shape-only zoo sweep with a real simulated one, architecture by architecture (issue 36 item 5).

    .venv/bin/python bench/zoo/shape_only_compare.py [--real bench/zoo/results/shape_only/real]
        [--fake bench/zoo/results/shape_only/fake] [--out bench/zoo/results/shape_only]

Both sweeps are ``sweep.py`` runs of the same tree (``--shape-only`` for the second). An architecture counts
when it runs for real: CPU ok and simulator ok in the real sweep. For each, the shape-only run must complete
and report the same findings, the categories the parity test (tests/check/test_shape_only_parity.py)
compares: CPU-fallback ops and their calls, unsupported features, distributed constraints, float64 ops and
their calls, and eager compile signatures with their calls per op. Autograd's gradient accumulation is
``aten::add_.Tensor`` on real tensors and ``aten::add.Tensor`` on fakes (docs/shape-only.md, "What differs"):
the two ops' signatures are compared together, as one multiset of (signature, calls) summed. Values cannot
be compared (fakes). A second count merges PyTorch's tensor-subclass paths in autograd (``_subclass_paths``,
``_view_replay``), a third a router's assumed even split (``split_equal``), a fourth data-dependent sizes
(``sizes_equal``). Writes ``OUT/comparison.json`` and ``OUT/comparison.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

from moe_parity import split_parity

HERE = Path(__file__).resolve().parent
ACCUMULATION = ("aten::add.Tensor", "aten::add_.Tensor")
CATEGORIES = ("fallbacks", "unsupported", "distributed", "float64", "eager_compiles")


def _subclass_paths(eager: dict) -> dict:
    """Eager signatures with PyTorch's tensor-subclass branches merged: autograd formulas take an out-of-place
    path where any tensor is a subclass (``isTensorSubclassLike``: FakeTensor is one), e.g. index's backward
    ``_index_put_impl_(zeros, ..., accumulate, unsafe=True)`` vs ``new_zeros().index_put(...)`` and
    ``scatter_add_`` vs ``scatter_add``: an op's in-place and out-of-place overloads are one op here, and
    ``_index_put_impl_``'s ``unsafe`` flag (a bounds check, not work) is dropped. Same work, other ops."""
    out: dict = {}
    for op, sigs in eager.items():
        name, _, overload = op.partition(".")
        if name.startswith("aten::") and name.endswith("_") and not name.endswith("__"):
            name = name[:-1]
        merged = out.setdefault(f"{name}.{overload}" if overload else name, {})
        for sig, calls in sigs.items():
            if name in ("aten::_index_put_impl", "aten::index_put"):
                try:
                    args = json.loads(sig)
                    sig = json.dumps(args[:4] if len(args) > 4 else args)
                except ValueError:
                    pass
                name_key = "aten::index_put (+_impl_)"
                merged = out.setdefault(name_key, {})
            merged[sig] = merged.get(sig, 0) + calls
    return {k: v for k, v in out.items() if v}


ZERO_FILL = "aten::zero"  # ``aten::zero_`` once _subclass_paths has merged its in-place overload


def _numel(sig: str) -> tuple[int, int] | None:
    """(dimensions, elements) of a one-tensor signature (``["f32[4,8]"]``), else None."""
    try:
        (arg,) = json.loads(sig)
        dims = arg[arg.index("[") + 1:arg.rindex("]")]
    except (ValueError, TypeError):
        return None
    sizes = [int(d) for d in dims.split(",") if d.strip()]
    n = 1
    for d in sizes:
        n *= d
    return len(sizes), n


def _view_replay(real: dict, fake: dict) -> None:
    """Zero-fills of autograd's two view paths merged, in place (both runs' merged eager signatures).

    A view of a real tensor records no view function; one of a Python-dispatch tensor (FakeTensor) does
    (torchgen/gen_inplace_or_view_type.py, SETUP_REPLAY_VIEW_IF_NOT_SUPPORT_AS_STRIDED_OR_VIEW_WITH_METADATA_CHANGE:
    ``self.unsafeGetTensorImpl()->is_python_dispatch()``). When the view's base then changes in place, autograd
    regenerates the view's backward (torch/csrc/autograd/variable.cpp, VariableHooks::grad_fn): for a real
    tensor ``AsStridedBackward0``, whose ``as_strided_backward`` (FunctionsManual.cpp) zero-fills one flat
    buffer of the base's storage size (``grad.new_zeros(base_size)``); for a fake a replay of the views,
    whose backward zero-fills each view's input shape (``slice_backward``, ``select_backward``) or nothing
    (``view``, ``transpose``). So: flat zero-fills only the real run makes are dropped, and, where there are
    any, the shape-only run's extra zero-fills of at most the largest of those buffers' elements."""
    r, f = dict(real.get(ZERO_FILL) or {}), dict(fake.get(ZERO_FILL) or {})
    storage = 0
    for sig, calls in list(r.items()):
        shape = _numel(sig)
        if shape and shape[0] == 1 and calls > f.get(sig, 0):
            storage = max(storage, shape[1])
            r[sig] = f.get(sig, 0)
    if storage:
        for sig, calls in list(f.items()):
            shape = _numel(sig)
            if shape and shape[1] <= storage and calls > r.get(sig, 0):
                f[sig] = r.get(sig, 0)
    for side, merged in ((real, r), (fake, f)):
        merged = {s: c for s, c in merged.items() if c}
        if merged:
            side[ZERO_FILL] = merged
        else:
            side.pop(ZERO_FILL, None)


def _one_hot(real: dict, fake: dict) -> None:
    """``F.one_hot``'s two paths merged, in place (both runs' merged eager signatures). ATen's ``one_hot``
    (aten/src/ATen/native/Onehot.cpp) tests the input for the Python dispatch key ("using meta bit test to
    catch Fake Tensor"): a fake takes ``eq(self.unsqueeze(-1), arange(E))``, a real tensor ``zeros`` then
    ``scatter_(-1, self.unsqueeze(-1), 1)``. Each real ``scatter.value`` of that form (``i64[S..., E]``,
    ``-1``, ``i64[S..., 1]``, ``1``) and the fake's ``eq.Tensor`` of ``i64[S..., 1]`` with ``i64[E]`` and
    ``arange`` of ``E`` are dropped, call for call."""
    scatters, eqs, aranges = (real.get("aten::scatter.value") or {}, fake.get("aten::eq.Tensor") or {},
                              fake.get("aten::arange.start_out") or {})
    for sig, calls in list(scatters.items()):
        try:
            dst, dim, index, value = json.loads(sig)
        except ValueError:
            continue
        if dim != "-1" or value != "1" or not dst.startswith("i64[") or not index.startswith("i64["):
            continue
        sizes = dst[4:-1].split(",")
        if index != f"i64[{','.join(sizes[:-1] + ['1'])}]":
            continue
        eq, arange = json.dumps([index, f"i64[{sizes[-1]}]"]), json.dumps(["0", sizes[-1], "1", "i64[0]"])
        n = min(calls, eqs.get(eq, 0), aranges.get(arange, 0))
        for table, key in ((scatters, sig), (eqs, eq), (aranges, arange)):
            if n:
                table[key] -= n
                if not table[key]:
                    del table[key]
    for side, op, table in ((real, "aten::scatter.value", scatters), (fake, "aten::eq.Tensor", eqs),
                            (fake, "aten::arange.start_out", aranges)):
        if table:
            side[op] = table
        else:
            side.pop(op, None)


def merged_findings(real_sim: dict, fake_sim: dict) -> tuple[dict, dict]:
    """Both runs' findings with PyTorch's tensor-subclass paths merged: per run (``_subclass_paths``) and
    between the two (``_view_replay``, ``_one_hot``)."""
    a, b = findings(real_sim, True), findings(fake_sim, True)
    _view_replay(a["eager_compiles"], b["eager_compiles"])
    _one_hot(a["eager_compiles"], b["eager_compiles"])
    return a, b


def subclass_differences(real_sim: dict, fake_sim: dict) -> dict:
    """What still differs once PyTorch's tensor-subclass paths in autograd are merged."""
    return differences(*merged_findings(real_sim, fake_sim))


def split_equal(real_sim: dict, fake_sim: dict, rest: dict) -> bool:
    """Equal up to an assumed even split (moe_parity.py): the shape-only run noted one (a router's tokens per
    expert), only eager signatures still differ, and each op that differs has the real run's calls, work and
    signatures once sizes are erased (the split is random in a real run: its sizes cannot be equal)."""
    if not fake_sim.get("even_splits") or set(rest) != {"eager_compiles"}:
        return False
    a, b = merged_findings(real_sim, fake_sim)
    return split_parity(a["eager_compiles"], b["eager_compiles"])["equal_modulo_split"]


def by_op(f: dict) -> dict:
    """Findings by kind and op: which ops fall back, compile, are demoted from float64; the unsupported
    features and distributed constraints as they are. Calls and signatures dropped."""
    return {"fallbacks": sorted(f["fallbacks"]), "unsupported": f["unsupported"], "distributed": f["distributed"],
            "float64": sorted(f["float64"]), "eager_compiles": sorted(f["eager_compiles"])}


def sizes_equal(real_sim: dict, fake_sim: dict) -> bool:
    """Equal up to data-dependent sizes: the shape-only run listed a size or choice it could not know (an NP911
    size rule; the sweep records those of a ``topk`` or histogram of values nobody knows, ``even_splits``), and,
    with subclass paths merged, both runs report the same findings by kind and op (``by_op``): the same ops
    fall back, compile and are demoted, the same unsupported features and constraints. Calls and signatures
    are not compared: the boxes a detector keeps, NMS's survivors, the tokens each expert gets are the data's,
    and every op after them has their sizes (the upper bound's shape-only, the random weights' in the real
    run); a loop over them runs another number of times. The records carry no line per op (a zoo step's
    findings are all at its one model call), so the op stands for the finding."""
    if not fake_sim.get("even_splits"):
        return False
    a, b = merged_findings(real_sim, fake_sim)
    return by_op(a) == by_op(b)


def findings(sim: dict, subclass_paths: bool = False) -> dict:
    eager: dict = {}
    accumulation: Counter = Counter()
    for op, sigs in (sim.get("eager_signatures") or {}).items():
        if op in ACCUMULATION:
            for sig, calls in sigs.items():
                accumulation[sig] += calls
        else:
            eager[op] = dict(sigs)
    if accumulation:
        eager["aten::add.Tensor + aten::add_.Tensor"] = dict(accumulation)
    if subclass_paths:
        eager = _subclass_paths(eager)
    return {
        "fallbacks": dict(sim.get("fallback_ops") or {}),
        "unsupported": sorted(json.dumps({k: u.get(k) for k in ("feature", "op", "error", "action")}, sort_keys=True)
                              for u in sim.get("unsupported") or []),
        "distributed": sorted(json.dumps(d, sort_keys=True) for d in sim.get("distributed_unsupported") or []),
        "float64": dict(sim.get("float64_calls") or {}),
        "eager_compiles": eager,
    }


def differences(a: dict, b: dict) -> dict:
    """Per category, what differs (real -> shape-only), short."""
    out = {}
    for cat in CATEGORIES:
        x, y = a[cat], b[cat]
        if x == y:
            continue
        if isinstance(x, dict):
            keys = sorted(set(x) | set(y))
            diff = {}
            for k in keys:
                if x.get(k) != y.get(k):
                    if isinstance(x.get(k), dict) or isinstance(y.get(k), dict):
                        xs, ys = x.get(k) or {}, y.get(k) or {}
                        diff[k] = {"real_only": {s: c for s, c in xs.items() if ys.get(s) != c},
                                   "shape_only_only": {s: c for s, c in ys.items() if xs.get(s) != c}}
                    else:
                        diff[k] = [x.get(k), y.get(k)]
            out[cat] = diff
        else:
            out[cat] = {"real_only": sorted(set(x) - set(y)), "shape_only_only": sorted(set(y) - set(x))}
    return out


def _rows(doc: dict) -> dict:
    return {r["id"]: r for r in doc["architectures"]}


def compare(real: dict, fake: dict) -> dict:
    rr, fr = _rows(real), _rows(fake)
    rows = []
    for aid, r in rr.items():
        if not (r["cpu_ok"] and r["sim_ok"]):
            continue
        f = fr.get(aid)
        row = {"id": aid, "class": r["class"]}
        fsim = ((f or {}).get("raw") or {}).get("sim") or {}
        if f is None:
            row.update(status="not_run")
        elif not f["cpu_ok"]:
            row.update(status="cpu_failed", reason=f["classification"].get("reason"))
        elif not f["sim_ok"]:
            err = f.get("error") or {}
            row.update(status="failed", failed_step=f.get("failed_step"),
                       reason=f"{err.get('type')}: {(err.get('message') or '').splitlines()[0][:300] if err.get('message') else ''}",
                       frame=err.get("frame"))
        elif not fsim.get("shape_only_active"):
            row.update(status="not_shape_only")
        else:
            diff = differences(findings(r["raw"]["sim"]), findings(fsim))
            row.update(status="equal" if not diff else "differs", differences=diff)
            if diff:
                rest = subclass_differences(r["raw"]["sim"], fsim)
                row["equal_modulo_subclass_paths"] = not rest
                if rest:
                    row["differences_modulo_subclass_paths"] = rest
                    row["equal_modulo_split"] = split_equal(r["raw"]["sim"], fsim, rest)
                    if not row["equal_modulo_split"]:
                        row["equal_modulo_sizes"] = sizes_equal(r["raw"]["sim"], fsim)
        rows.append(row)
    counts = Counter(r["status"] for r in rows)
    ran = sum(1 for r in rows if r["status"] in ("equal", "differs"))
    modulo = counts["equal"] + sum(1 for r in rows if r.get("equal_modulo_subclass_paths"))
    split = modulo + sum(1 for r in rows if r.get("equal_modulo_split"))
    sizes = split + sum(1 for r in rows if r.get("equal_modulo_sizes"))
    return {"real_ran": len(rows), "shape_only_ran": ran, "equal": counts["equal"],
            "equal_modulo_subclass_paths": modulo, "equal_modulo_split": split, "equal_modulo_sizes": sizes,
            "share_equal": round(counts["equal"] / len(rows), 4) if rows else None,
            "by_status": dict(counts),
            "real": real["machine"], "shape_only": fake["machine"],
            "real_failed": [{"id": r["id"], "classification": r["classification"]} for r in rr.values()
                            if r["cpu_ok"] and not r["sim_ok"]],
            "architectures": rows}


def not_equal_line(r: dict, name: str) -> str:
    """One architecture that is not equal, for comparison.md: what differs and what is left once merged."""
    if r["status"] == "differs":
        parts = [f"{cat}: " + json.dumps(d)[:600] for cat, d in r["differences"].items()]
        rest = r.get("differences_modulo_subclass_paths")
        tag = "equal with subclass paths merged" if r.get("equal_modulo_subclass_paths") else (
            "equal up to the assumed even split" if r.get("equal_modulo_split") else
            "equal up to data-dependent sizes (by op)" if r.get("equal_modulo_sizes") else
            "still differs with subclass paths merged: " + ", ".join(
                f"{cat} {sorted(d)[:4]}" for cat, d in (rest or {}).items()))
        return f"- {name} findings differ ({tag}): " + "; ".join(parts)
    fr = r.get("frame") or {}
    where = f" at `{fr.get('file')}:{fr.get('line')}`" if fr else ""
    return (f"- {name} {r['status']}{' in ' + r['failed_step'] if r.get('failed_step') else ''}: "
            f"{r.get('reason') or ''}{where}")


def markdown(doc: dict) -> str:
    m = doc["shape_only"]
    out = ["# Shape-only zoo sweep: findings against the real simulated run", "",
           f"{doc['real_ran']} architectures run for real (CPU and simulator ok); {doc['shape_only_ran']} of them "
           f"ran shape-only; {doc['equal']} with equal findings ({100 * (doc['share_equal'] or 0):.1f}%), "
           f"{doc['equal_modulo_subclass_paths']} with PyTorch's tensor-subclass paths in autograd merged "
           "(an op's in-place and out-of-place overloads as one; `_index_put_impl_`'s unsafe flag dropped; "
           "the zero-fills of autograd's two view paths, `as_strided_backward`'s flat buffer and the views' own); "
           f"{doc.get('equal_modulo_split')} when, besides, an MoE router's split that the shape-only run assumed even "
           "(NP911) differs only in its sizes: per op the same calls, work and signatures with sizes erased "
           f"(moe_parity.py); {doc.get('equal_modulo_sizes')} up to data-dependent sizes (the shape-only run "
           "listed a size rule, NP911, and the findings are the same by kind and op: `sizes_equal`).", "",
           f"Shape-only run {m.get('started')} ({m.get('wall_seconds')} s wall, {m.get('jobs')} workers, "
           f"{m.get('timeout')} s limit), real run {doc['real'].get('started')} ({doc['real'].get('wall_seconds')} s "
           f"wall); torch {m.get('torch')}, transformers {m.get('transformers')}, load {m.get('load_before')} before.",
           "", "| status | architectures |", "|---|---:|"]
    out += [f"| {k} | {v} |" for k, v in sorted(doc["by_status"].items())]
    bad = [r for r in doc["architectures"] if r["status"] != "equal"]
    out += ["", "## Not equal", ""]
    if not bad:
        out.append("None.")
    out += [not_equal_line(r, f"**{r['id']}** ({r['class']})") for r in bad]
    if doc["real_failed"]:
        out += ["", "## Failing for real too (not counted)", ""]
        out += [f"- {r['id']}: {r['classification'].get('status')} {r['classification'].get('reason', '')}"
                for r in doc["real_failed"]]
    return "\n".join(out) + "\n"


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    base = HERE / "results" / "shape_only"
    ap.add_argument("--real", default=str(base / "real"))
    ap.add_argument("--fake", action="append", default=None,
                    help="a shape-only sweep's folder (default fake/); given again, a later sweep's architectures "
                         "replace an earlier one's (a rerun of some after a fix)")
    ap.add_argument("--out", default=str(base))
    a = ap.parse_args(argv)
    docs = []
    for folder in [a.real, *(a.fake or [str(base / "fake")])]:
        path = Path(folder) / "results.json"
        try:
            docs.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"{path}: cannot read a sweep's results ({exc})", file=sys.stderr)
            return 2
    real, fake = docs[0], docs[1]
    if len(docs) > 2:
        rows = {r["id"]: r for r in fake["architectures"]}
        for later in docs[2:]:
            rows.update({r["id"]: r for r in later["architectures"]})
        fake = {**fake, "architectures": list(rows.values()),
                "machine": {**fake["machine"], "reruns": [d["machine"] for d in docs[2:]]}}
    doc = compare(real, fake)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "comparison.json", json.dumps(doc, indent=1, default=str) + "\n")
    _write(out / "comparison.md", markdown(doc))
    print(f"ran for real {doc['real_ran']}, shape-only ran {doc['shape_only_ran']}, equal findings {doc['equal']}, "
          f"equal with subclass paths merged {doc['equal_modulo_subclass_paths']}, "
          f"and up to assumed even splits {doc['equal_modulo_split']}, up to data-dependent sizes "
          f"{doc['equal_modulo_sizes']}; "
          f"{doc['by_status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
