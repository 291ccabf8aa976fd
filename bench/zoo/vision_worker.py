"""One vision architecture in its own process: build, then a CPU step, a simulated-``neuron`` step and
(``compile``) a ``torch.compile(backend="neuron")`` step, each compared with the CPU one; a compiled step
that differs is compared again with the same model compiled on the CPU (``backend="aot_eager"``, the same
AOTAutograd graphs), which tells the compiled graph's own rounding from a simulator error.

A step, on a copy of the same untouched model (seed 0) and the same inputs: a train-mode forward, the
loss, its backward, one SGD step (lr 0.1, momentum 0.9, weight decay 1e-4: the parameters move by
the gradient, so a wrong gradient shows in them), then an eval-mode forward (BatchNorm's running
statistics updated by the train forward are used). Dropout and stochastic-depth rates are set to 0
(``vision_models.without_randomness``): the device's random draws come from its own generator, as on
CUDA, so masks cannot match the CPU run's; the ops still run, with rate 0.

Compared with the CPU run (``compare``): the loss, the train-mode outputs, every gradient, every
parameter after the step, and the eval-mode outputs (not for detection, whose eval output is
thresholded post-processing of random weights: a score 1e-7 on either side of the threshold changes
the number of boxes). A tensor matches when ``max|a - b| <= TOL * max(max|a|, FLOOR * M)`` with ``M``
the largest magnitude of its kind (all gradients, all parameters, ...): tensors that are ~0 next to
the rest are judged on the scale of the rest. One JSON line per phase is appended to ``result_path``
as soon as it is over (``config``, ``cpu``, ``sim``, ``compile``), so a crash keeps what ran before.

A spec with ``"shape_only": True`` (``vision_sweep.py --shape-only``) runs the simulator phase
shape-only, as ``worker.py`` does (``NEURON_PORT_SHAPE_ONLY=1`` before the device is enabled; every
``neuron`` tensor a fake): the same step, the same copies to the CPU (zeros there), no numerics
compared and no compiled phase. Both kinds of run record the findings ``vision_shape_only_compare.py``
compares (``worker._sim_summary``: fallbacks, unsupported, float64 calls per op, eager signatures and
their calls per op).
"""

from __future__ import annotations

import copy
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vision_models as vm  # noqa: E402
from worker import _emit, _sim_summary, error_info, start_worker  # noqa: E402

TOL, FLOOR, LOSS_TOL = 1e-3, 1e-3, 1e-4
MAX_PARAMS = 150_000_000  # peak memory ~ 7 copies (weights, grads, momentum, CPU copies compared): ~4 GB at 150 M


def _optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)


def run_phase(spec: dict, model, inputs: dict, device: str, compiled: bool = False, backend: str = "neuron") -> dict:
    res: dict = {"steps": {}}
    t0 = time.perf_counter()
    step = "to_device"
    try:
        model = model.to(device)
        dev_inputs = vm.to(inputs, device)
        fn = torch.compile(model, backend=backend) if compiled else model
        step = "forward"
        model.train()
        torch.manual_seed(2)
        loss, outs = vm.forward(spec, fn, dev_inputs, train=True)
        res["loss"] = float(loss.detach().float().cpu())
        res["_outputs"] = [o.detach().float().cpu() for o in outs]
        res["steps"]["forward"] = round(time.perf_counter() - t0, 3)
        step = "backward"
        t1 = time.perf_counter()
        loss.backward()
        res["_grads"] = {n: p.grad.detach().float().cpu() for n, p in model.named_parameters() if p.grad is not None}
        res["grad_tensors"] = len(res["_grads"])
        res["steps"]["backward"] = round(time.perf_counter() - t1, 3)
        step = "optimizer_step"
        t1 = time.perf_counter()
        _optimizer(model).step()
        res["_params"] = {n: p.detach().float().cpu() for n, p in model.named_parameters()}
        res["steps"]["optimizer_step"] = round(time.perf_counter() - t1, 3)
        step = "eval_forward"
        t1 = time.perf_counter()
        model.eval()
        with torch.no_grad():
            _, ev = vm.forward(spec, fn, dev_inputs, train=False)
        res["_eval"] = [o.detach().float().cpu() for o in ev]
        res["steps"]["eval_forward"] = round(time.perf_counter() - t1, 3)
        res["ok"] = True
    except Exception as e:  # noqa: BLE001 - the harness reports every failure
        res["ok"] = False
        res["failed_step"] = step
        res["error"] = error_info(e)
    res["seconds"] = round(time.perf_counter() - t0, 3)
    return res


def _worst(a_list, b_list, names=None) -> dict:
    """The worst tensor of one kind (see the module docstring): its name, max abs diff and ratio to
    its tolerance (<= 1 matches)."""
    if len(a_list) != len(b_list):
        return {"match": False, "why": f"{len(a_list)} tensors vs {len(b_list)}"}
    big = max((float(a.abs().max()) for a in a_list if a.numel()), default=0.0)
    worst = {"match": True, "ratio": 0.0, "max_abs_diff": 0.0, "tensors": len(a_list)}
    for i, (a, b) in enumerate(zip(a_list, b_list)):
        name = names[i] if names else str(i)
        if a.shape != b.shape:
            return {"match": False, "why": f"{name}: shape {list(a.shape)} vs {list(b.shape)}"}
        if not a.numel():
            continue
        if not torch.equal(a.isnan(), b.isnan()) or not torch.equal(a.isinf(), b.isinf()):
            return {"match": False, "why": f"{name}: NaN/inf differ", "worst": name}
        fin = a.isfinite()
        d = float((a[fin] - b[fin]).abs().max()) if fin.any() else 0.0
        scale = max(float(a[fin].abs().max()) if fin.any() else 0.0, FLOOR * big, 1e-12)
        ratio = d / (TOL * scale)
        if ratio > worst["ratio"]:
            worst.update(ratio=ratio, max_abs_diff=d, worst=name)
    worst["match"] = worst["ratio"] <= 1.0
    worst["ratio"] = round(worst["ratio"], 4)
    return worst


def compare(spec: dict, cpu: dict, other: dict) -> dict:
    out: dict = {"loss_cpu": cpu.get("loss"), "loss_other": other.get("loss")}
    la, lb = cpu.get("loss"), other.get("loss")
    out["loss"] = {"match": la is not None and lb is not None and abs(la - lb) <= LOSS_TOL * max(abs(la), 1e-6),
                   "rel_diff": None if la is None or lb is None else abs(la - lb) / max(abs(la), 1e-6)}
    out["outputs"] = _worst(cpu["_outputs"], other["_outputs"])
    gn = sorted(cpu["_grads"])
    if sorted(other["_grads"]) != gn:
        out["grads"] = {"match": False, "why": f"{len(gn)} gradients on CPU, {len(other['_grads'])} here"}
    else:
        out["grads"] = _worst([cpu["_grads"][n] for n in gn], [other["_grads"][n] for n in gn], gn)
    pn = sorted(cpu["_params"])
    out["params"] = _worst([cpu["_params"][n] for n in pn], [other["_params"][n] for n in pn], pn)
    if spec["task"] != "detection":
        out["eval"] = _worst(cpu["_eval"], other["_eval"])
    out["match"] = all(out[k]["match"] for k in ("loss", "outputs", "grads", "params", "eval") if k in out)
    return out


def _public(d: dict) -> dict:
    return {k: v for k, v in d.items() if not k.startswith("_")}


def run_one(spec: dict, result_path: str | None = None, log_path: str | None = None,
            events_dir: str | None = None, simulate: bool = True) -> None:
    """The worker process's body (see the module docstring); ``spec["compile"]`` adds the compile phase."""
    start_worker(log_path)
    shape_only = bool(spec.get("shape_only"))
    if shape_only:
        os.environ["NEURON_PORT_SHAPE_ONLY"] = "1"  # read by neuron_backend.enable()
    else:
        os.environ.pop("NEURON_PORT_SHAPE_ONLY", None)
    rpath = Path(result_path) if result_path else None
    sim_enabled = False
    if simulate:  # first, as NEURON_PORT_SIMULATE=1 would (see worker.py)
        if events_dir:
            os.makedirs(events_dir, exist_ok=True)
            os.environ["NEURON_PORT_EVENTS_DIR"] = events_dir
        import neuron_backend

        sim_enabled = neuron_backend.enable()

    attempts, chosen = [], None
    for name, size, frames in vm.ATTEMPTS:
        t0 = time.perf_counter()
        try:
            model = vm.build(spec, size)
            size_used = size or vm.native_size(spec, model)
            zeroed = vm.without_randomness(model)
        except Exception as e:  # noqa: BLE001
            attempts.append({"attempt": name, "stage": "build", "error": error_info(e)})
            continue
        n = vm.n_params(model)
        if n > MAX_PARAMS:
            attempts.append({"attempt": name, "stage": "size", "params": n,
                             "error": {"type": "TooLarge", "message": f"{n:,} parameters (limit {MAX_PARAMS:,})", "frame": None}})
            break
        inputs = vm.make_inputs(spec, model, size_used, frames)
        pristine = copy.deepcopy(model)
        cpu = run_phase(spec, model, inputs, "cpu")
        cpu["build_seconds"] = round(time.perf_counter() - t0 - cpu["seconds"], 3)
        attempts.append({"attempt": name, "stage": "cpu", "ok": cpu["ok"], "params": n, "size": size_used, "rates_zeroed": zeroed,
                         "error": cpu.get("error"), "failed_step": cpu.get("failed_step")})
        if cpu["ok"]:
            chosen = (name, size_used, frames, pristine, inputs, n, cpu)
            break
        del model, pristine
    if chosen is None:
        _emit(rpath, "config", {"ok": False, "attempts": attempts})
        _emit(rpath, "cpu", {"ok": False, "attempts": attempts})
        return
    name, size_used, frames, pristine, inputs, n, cpu = chosen
    _emit(rpath, "config", {"ok": True, "attempt": name, "params": n, "size": size_used,
                            "frames": frames if spec["task"] == "video" else None, "failed_attempts": attempts[:-1]})
    _emit(rpath, "cpu", _public(cpu))
    if not simulate:
        return
    if not sim_enabled:
        _emit(rpath, "sim", {"ok": False, "error": {"type": "SimulatorNotEnabled", "message": "neuron_backend.enable() returned False", "frame": None}})
        return
    compiled = spec.get("compile") and not shape_only
    keep = copy.deepcopy(pristine) if compiled else None
    keep_cpu = copy.deepcopy(pristine) if compiled else None  # the CPU compiled reference, if needed
    sim = _device_phase(spec, pristine, inputs, cpu, _sim_summary, shape_only=shape_only)
    _emit(rpath, "sim", _public(sim))
    if keep is None:
        return
    del pristine
    comp = _device_phase(spec, keep, inputs, cpu, _compile_summary, compiled=True)
    if comp["ok"] and not comp["numerics"].get("match"):
        # A compiled graph rounds differently from eager on any device (AOTAutograd's decompositions,
        # another reduction order): the same graph compiled on the CPU tells that from a simulator error.
        ref = run_phase(spec, keep_cpu, inputs, "cpu", compiled=True, backend="aot_eager")
        comp["cpu_compiled_ok"] = ref["ok"]
        if ref["ok"]:
            comp["numerics_vs_cpu_compiled"] = compare(spec, ref, comp)
            comp["cpu_compiled_vs_cpu"] = compare(spec, cpu, ref)
    _emit(rpath, "compile", _public(comp))


def _device_phase(spec: dict, model, inputs: dict, cpu: dict, summary, compiled: bool = False,
                  shape_only: bool = False) -> dict:
    """A step on the simulated device, its simulator statistics (``summary`` of ``neuron_backend.stats()``)
    and, when it ran for real, its numbers compared with the CPU step's (shape-only: placeholders, none)."""
    import neuron_backend

    res = run_phase(spec, model, inputs, "neuron", compiled=compiled)
    try:
        res.update(summary(neuron_backend.stats()))
    except Exception as e:  # noqa: BLE001
        res["stats_error"] = error_info(e)
    res["shape_only"] = shape_only
    if shape_only:
        from neuron_backend import shape_only as so

        res["shape_only_active"] = so.is_active()  # the mode was really on (else the comparison is void)
        res.pop("loss", None)  # a placeholder, not the loss
    elif res["ok"]:
        res["numerics"] = compare(spec, cpu, res)
    return res


def _compile_summary(stats: dict) -> dict:
    out = _sim_summary(stats)
    comp = stats.get("compile") or {}
    out["compile"] = {k: comp.get(k) for k in ("graphs", "failed", "graph_breaks", "fallbacks", "recompiles") if k in comp}
    out["compile_events"] = [{k: e.get(k) for k in ("event", "op", "ops", "message", "reason") if e.get(k) is not None}
                             for e in stats.get("events", []) if e.get("kind") == "compile"][:20]
    return out


if __name__ == "__main__":  # one architecture in this process: vision_worker.py torchvision:classification:resnet18 [--compile] [--shape-only]
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("id", help="source:task:name, e.g. timm:classification:resnet10t")
    ap.add_argument("--cpu-only", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--shape-only", action="store_true", help="the simulator phase shape-only (no compiled phase)")
    a = ap.parse_args()
    src, task, name = a.id.split(":", 2)
    fam = "?"
    run_one({"id": a.id, "source": src, "task": task, "name": name, "family": fam, "compile": a.compile,
             "shape_only": a.shape_only}, simulate=not a.cpu_only)
