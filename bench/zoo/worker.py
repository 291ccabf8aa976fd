"""One architecture, in its own process: tiny config, then CPU run, then simulated-``neuron`` run.

``run_one(spec, result_path, ...)`` is the target of one worker process (started by ``sweep.py``, or
run in-process with ``python bench/zoo/worker.py MODEL_TYPE --family causal``). It appends one JSON
line per phase to ``result_path`` as soon as that phase is over (``config``, ``cpu``, ``sim``), so a
segfault or a hang in the simulator phase still leaves the config and CPU results for the parent.

Each phase, on a model built from the same seed: forward with labels in train mode and backward of
the loss; an eval-mode forward (its logits are compared between CPU and simulator); for causal LMs
``generate`` of 3 greedy tokens. The device is enabled with
``neuron_backend.enable()`` when the worker starts (as ``NEURON_PORT_SIMULATE=1`` would; CPU tensors
never reach it); the simulator phase moves a copy of the untouched model with ``.to("neuron")`` and
reads ``neuron_backend.stats()`` at the end.

A spec with ``"shape_only": True`` (``sweep.py --shape-only``) runs the simulator phase shape-only
(``NEURON_PORT_SHAPE_ONLY=1`` before the device is enabled, as ``check --shape-only`` sets it): every
``neuron`` tensor is a fake, the CPU-built model moved with ``.to("neuron")`` as a user's would be. Its
findings are compared with a real simulated run's (``shape_only_compare.py``); its values are
placeholders, so no numerics are compared.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import configs  # noqa: E402

# family -> (mapping in transformers.models.auto.modeling_auto, what the run does)
FAMILIES = {
    "causal": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "masked": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "seq2seq": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "image": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
}
BATCH, SEQ, TGT_SEQ, NEW_TOKENS = 2, 8, 6, 3
MAX_PARAMS = 30_000_000  # a "tiny" model above this means an attribute was not recognised
_SKIP_FRAMES = ("/torch/", "/neuron_backend/", "/multiprocessing/", "/bench/zoo/worker.py")


def architectures(families=None) -> list[dict]:
    """Every (family, model_type, class) of the chosen auto-mappings, in mapping order."""
    from transformers.models.auto import modeling_auto

    out = []
    for fam in families or FAMILIES:
        for model_type, cls in getattr(modeling_auto, FAMILIES[fam]).items():
            if isinstance(cls, (tuple, list)):
                cls = cls[0]
            out.append({"family": fam, "model_type": model_type, "class": cls, "id": f"{fam}:{model_type}"})
    return out


# ---------------------------------------------------------------- errors


def error_info(exc: BaseException) -> dict:
    """Exception type, message and the innermost frame outside torch / the simulator / the stdlib
    (normally the transformers modeling line that called the failing op)."""
    tb = traceback.extract_tb(exc.__traceback__)
    stdlib = os.path.dirname(os.__file__)
    frame = None
    for fr in reversed(tb):
        f = fr.filename.replace("\\", "/")
        if any(s in f for s in _SKIP_FRAMES) or f.startswith(stdlib + "/") and "site-packages" not in f:
            continue
        frame = fr
        break
    msg = str(exc)
    return {
        "type": type(exc).__name__ if type(exc).__module__ == "builtins" else f"{type(exc).__module__}.{type(exc).__name__}",
        "message": msg[:2000],
        "frame": None if frame is None else {
            "file": _short_path(frame.filename), "line": frame.lineno, "function": frame.name, "code": (frame.line or "").strip()},
        "traceback_tail": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])[-3000:],
    }


def _short_path(p: str) -> str:
    p = p.replace("\\", "/")
    for marker in ("/site-packages/", "/bench/zoo/"):
        if marker in p:
            return p.split(marker, 1)[1] if marker == "/site-packages/" else "bench/zoo/" + p.split(marker, 1)[1]
    return p


# ---------------------------------------------------------------- model and inputs


def _vocab(cfg) -> int:
    for c in (cfg, getattr(cfg, "text_config", None), getattr(cfg, "decoder", None)):
        v = getattr(c, "vocab_size", None) if c is not None else None
        if isinstance(v, int) and v > 0:
            return v
    return 512


def _image_shape(cfg) -> tuple[int, int, int]:
    c = getattr(cfg, "vision_config", None) or cfg
    ch = getattr(c, "num_channels", None) or 3
    size = getattr(c, "image_size", None) or 32
    if isinstance(size, dict):
        size = (size.get("height", 32), size.get("width", 32))
    if isinstance(size, (list, tuple)):
        h, w = (size[0], size[-1])
    else:
        h = w = size
    return ch, h, w


def _special_ids(cfg, depth: int = 0) -> set[int]:
    """Every special token id of the config and its sub-configs (random inputs avoid them: an image or
    audio placeholder token in a text-only input makes multimodal models look for features)."""
    ids: set[int] = set()
    d = cfg.to_dict() if hasattr(cfg, "to_dict") else cfg
    for k, v in d.items():
        if isinstance(v, dict) and depth < 3:
            ids |= _special_ids(v, depth + 1)
        elif isinstance(k, str) and "token" in k and (k.endswith("_id") or k.endswith("_index") or k.endswith("_ids")):
            for x in v if isinstance(v, list) else [v]:
                if isinstance(x, int) and not isinstance(x, bool):
                    ids.add(x)
    return ids


def _random_ids(cfg, shape, g) -> torch.Tensor:
    vocab = _vocab(cfg)
    lo, hi = (4, vocab - 16) if vocab > 64 else (0, vocab)
    ids = torch.randint(lo, hi, shape, generator=g)
    special = sorted(i for i in _special_ids(cfg) if lo <= i < hi)
    if special:
        allowed = torch.tensor(sorted(set(range(lo, hi)) - set(special)))
        mask = torch.isin(ids, torch.tensor(special))
        ids[mask] = allowed[torch.randint(0, len(allowed), (int(mask.sum()),), generator=g)]
    return ids


def make_inputs(family: str, cfg, seed: int = 1, main_input: str | None = None) -> dict:
    g = torch.Generator().manual_seed(seed)
    if family == "image" and main_input == "input_ids":  # ImageGPT: images as color-cluster tokens
        ids = _random_ids(cfg, (BATCH, SEQ), g)
        return {"input_ids": ids, "labels": torch.randint(0, getattr(cfg, "num_labels", 2) or 2, (BATCH,), generator=g)}
    if family == "image":
        ch, h, w = _image_shape(cfg)
        n_labels = getattr(cfg, "num_labels", 2) or 2
        return {"pixel_values": torch.randn(BATCH, ch, h, w, generator=g),
                "labels": torch.randint(0, n_labels, (BATCH,), generator=g)}
    ids = _random_ids(cfg, (BATCH, SEQ), g)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if family == "seq2seq" and getattr(cfg, "is_encoder_decoder", False):
        labels = _random_ids(cfg, (BATCH, TGT_SEQ), g)
        start = getattr(cfg, "decoder_start_token_id", None)
        start = start if isinstance(start, int) else 0
        inputs["labels"] = labels
        inputs["decoder_input_ids"] = torch.cat([torch.full((BATCH, 1), start), labels[:, :-1]], dim=1)
    else:  # causal and masked LMs, and decoder-only "seq2seq" (audio-to-text) models given text only
        inputs["labels"] = ids.clone()
    return inputs


def _to(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    return obj


def _loss(out) -> torch.Tensor:
    loss = getattr(out, "loss", None)
    if loss is None and isinstance(out, dict):
        loss = out.get("loss")
    if loss is not None and loss.numel() == 1:
        return loss
    total = None
    values = out.values() if hasattr(out, "values") else (out if isinstance(out, (tuple, list)) else [out])
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.requires_grad:
            total = v.float().mean() if total is None else total + v.float().mean()
    if total is None:
        raise RuntimeError("the model returned no differentiable output")
    return total


def _logits(out):
    for key in ("logits", "prediction_logits", "last_hidden_state"):
        v = getattr(out, key, None)
        if isinstance(v, torch.Tensor):
            return v
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return None


def build_model(spec: dict, tiny: configs.Tiny):
    import transformers

    cfg, overrides = configs.build_config(spec["model_type"], tiny)
    cls = getattr(transformers, spec["class"], None)
    if cls is None:
        raise configs.ConfigError(f"transformers has no class {spec['class']} (optional dependency missing?)")
    # a text-only class of a composite model type takes the text (or decoder) sub-config, as
    # AutoModelForCausalLM.from_config does
    want = getattr(cls, "config_class", None)
    if isinstance(want, type) and not isinstance(cfg, want):
        for name in ("text_config", "decoder", "language_config", "llm_config"):
            sub = getattr(cfg, name, None)
            if isinstance(sub, want):
                cfg = sub
                break
    if spec["family"] == "causal" and getattr(cfg, "is_decoder", None) is False and not getattr(cfg, "is_encoder_decoder", False):
        cfg.is_decoder = True  # encoder models used as causal LMs (BertLMHeadModel ...) require it
    torch.manual_seed(0)
    model = cls(cfg)
    model = model.float()
    n = sum(p.numel() for p in model.parameters())
    return cfg, overrides, model, n


# ---------------------------------------------------------------- one phase


def run_phase(family: str, model, cfg, device: str) -> dict:
    """forward+backward (train mode), eval forward, generate (causal); each step timed."""
    res: dict = {"steps": {}}
    t0 = time.perf_counter()
    step = "inputs"
    try:
        inputs = make_inputs(family, cfg, main_input=getattr(model, "main_input_name", None))
        step = "to_device"
        model = model.to(device)
        step = "forward"
        model.train()
        torch.manual_seed(2)
        out = model(**_to(inputs, device))
        loss = _loss(out)
        res["loss"] = float(loss.detach().float().cpu())
        res["steps"]["forward"] = round(time.perf_counter() - t0, 3)
        step = "backward"
        t1 = time.perf_counter()
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        res["grad_tensors"] = len(grads)
        res["steps"]["backward"] = round(time.perf_counter() - t1, 3)
        step = "eval_forward"
        t1 = time.perf_counter()
        model.eval()
        with torch.no_grad():
            ev = model(**_to(inputs, device))
        lg = _logits(ev)
        res["_eval_logits"] = None if lg is None else lg.detach().float().cpu()
        res["steps"]["eval_forward"] = round(time.perf_counter() - t1, 3)
        if family == "causal":
            step = "generate"
            t1 = time.perf_counter()
            gen_kwargs = {"max_new_tokens": NEW_TOKENS, "do_sample": False}
            gc = getattr(model, "generation_config", None)
            if gc is not None and gc.pad_token_id is None:
                eos = gc.eos_token_id
                gen_kwargs["pad_token_id"] = (eos[0] if isinstance(eos, list) and eos else eos) if eos is not None else 0
            with torch.no_grad():
                seq = model.generate(input_ids=inputs["input_ids"].to(device),
                                     attention_mask=inputs["attention_mask"].to(device), **gen_kwargs)
            res["generated"] = seq[:, SEQ:].cpu().tolist()
            res["steps"]["generate"] = round(time.perf_counter() - t1, 3)
        res["ok"] = True
    except Exception as e:  # noqa: BLE001 - the harness reports every failure
        res["ok"] = False
        res["failed_step"] = step
        res["error"] = error_info(e)
    res["seconds"] = round(time.perf_counter() - t0, 3)
    return res


def _emit(path: Path | None, kind: str, payload: dict) -> None:
    line = json.dumps({"kind": kind, **payload}, default=str)
    if path is None:
        print(line, flush=True)
        return
    with open(path, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _sim_summary(stats: dict) -> dict:
    unsupported = [{"feature": u.get("feature"), "op": u.get("op"), "error": u.get("error"),
                    "message": (u.get("message") or "")[:300], "action": u.get("action"), "count": u.get("count")}
                   for u in stats.get("unsupported", [])]
    dist = [e for e in stats.get("events", []) if e.get("kind") == "distributed" and e.get("event") == "unsupported"]
    summary = stats.get("summary", {})
    return {
        "fallback_ops": {f["op"]: f["calls"] for f in stats.get("fallbacks", [])},
        "eager_compiles": summary.get("eager_compiles"),
        "op_calls": summary.get("op_calls"),
        "fallback_calls": summary.get("fallback_calls"),
        "unsupported": unsupported,
        "distributed_unsupported": [{"op": e.get("op"), "message": (e.get("message") or "")[:300]} for e in dist],
        "float64_ops": sorted({d["op"] for d in stats.get("demotions", []) if d.get("dtype") == "float64"}),
        "float64_calls": _float64_calls(stats),
        "eager_signatures": _eager_signatures(stats),
        # a shape-only run's assumed even splits (a router's tokens per expert): shape_only_compare judges the
        # ops they size by their work (moe_parity.py); [] in a real run
        "even_splits": [{k: e.get(k) for k in ("op", "site", "shape")} for e in stats.get("events", [])
                        if e.get("kind") == "shape_only" and e.get("event") == "size_rule"
                        and e.get("rule") == "even_split"],
    }


def _float64_calls(stats: dict) -> dict:
    out: dict = {}
    for d in stats.get("demotions", []):
        if d.get("dtype") == "float64":
            out[d["op"]] = out.get(d["op"], 0) + (d.get("calls") or 0)
    return out


def _eager_signatures(stats: dict) -> dict:
    """op -> {signature: calls} of the eager compiles (what the parity test compares per site; here per
    signature, the sites being transformers' lines in both runs), plus the calls of the signatures the
    events module summed beyond its per-op limit under ``"(omitted N)"``."""
    out: dict = {}
    for e in stats.get("eager_compiles", []):
        if e.get("kind") != "eager_compile":
            continue
        sigs = out.setdefault(e["op"], {})
        sig = e.get("signature")
        sig = sig if isinstance(sig, str) else json.dumps(sig)  # a list of argument descriptions
        sigs[sig] = sigs.get(sig, 0) + (e.get("calls") or 0)
    for t in stats.get("eager_compiles_truncated", []):
        out.setdefault(t["op"], {})[f"(omitted {t.get('omitted_signatures')})"] = t.get("omitted_calls")
    return out


def compare(cpu: dict, sim: dict) -> dict:
    a, b = cpu.get("_eval_logits"), sim.get("_eval_logits")
    out: dict = {}
    if a is not None and b is not None:
        if a.shape != b.shape:
            out["logits"] = f"shape {list(a.shape)} vs {list(b.shape)}"
            out["match"] = False
        else:
            diff = (a - b).abs().nan_to_num(nan=float("inf"))
            scale = max(1.0, float(a.abs().nan_to_num().max()))
            out["max_abs_diff"] = float(diff.max()) if diff.numel() else 0.0
            out["match"] = bool(out["max_abs_diff"] <= 1e-3 * scale) or bool(torch.equal(a.isnan(), b.isnan()) and torch.allclose(a.nan_to_num(), b.nan_to_num(), atol=1e-3 * scale, rtol=1e-3))
    if "loss" in cpu and "loss" in sim:
        out["loss_cpu"], out["loss_sim"] = cpu["loss"], sim["loss"]
    if "generated" in cpu and "generated" in sim:
        out["generate_equal"] = cpu["generated"] == sim["generated"]
    return out


def start_worker(log_path: str | None) -> None:
    """A worker's first steps: its output into ``log_path`` (file descriptors 1 and 2, so C++ output and
    faulthandler's dump land there too), faulthandler on, one intra-op thread."""
    if log_path:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    import faulthandler

    faulthandler.enable()
    torch.set_num_threads(1)


def run_one(spec: dict, result_path: str | None = None, log_path: str | None = None,
            events_dir: str | None = None, simulate: bool = True) -> None:
    """The worker process's body (see the module docstring)."""
    start_worker(log_path)
    shape_only = bool(spec.get("shape_only"))
    if shape_only:
        os.environ["NEURON_PORT_SHAPE_ONLY"] = "1"  # read by neuron_backend.enable()
    else:
        os.environ.pop("NEURON_PORT_SHAPE_ONLY", None)
    rpath = Path(result_path) if result_path else None
    family = spec["family"]
    # The simulator is switched on first, as NEURON_PORT_SIMULATE=1 does during `import torch`: CPU
    # tensors are not affected, and autograd sizes its per-device queues at the first backward (a
    # device registered after a CPU backward fails its own backward with an engine assert).
    sim_enabled = False
    if simulate:
        if events_dir:
            os.makedirs(events_dir, exist_ok=True)
            os.environ["NEURON_PORT_EVENTS_DIR"] = events_dir
        import neuron_backend

        sim_enabled = neuron_backend.enable()

    # ---- config (+ the CPU run decides which attempt is used)
    attempts = []
    chosen = None
    for name, tiny in configs.ATTEMPTS:
        t0 = time.perf_counter()
        try:
            cfg, overrides, model, n_params = build_model(spec, tiny)
        except Exception as e:  # noqa: BLE001
            attempts.append({"attempt": name, "stage": "config" if isinstance(e, configs.ConfigError) else "build",
                             "error": error_info(e)})
            continue
        if n_params > MAX_PARAMS:
            attempts.append({"attempt": name, "stage": "size", "params": n_params,
                             "error": {"type": "TooLarge", "message": f"{n_params:,} parameters (limit {MAX_PARAMS:,})",
                                       "frame": None}})
            continue
        pristine = copy.deepcopy(model)
        cpu = run_phase(family, model, cfg, "cpu")
        cpu["build_seconds"] = round(time.perf_counter() - t0 - cpu["seconds"], 3)
        attempts.append({"attempt": name, "stage": "cpu", "ok": cpu["ok"], "params": n_params,
                         "error": cpu.get("error"), "failed_step": cpu.get("failed_step")})
        if cpu["ok"]:
            chosen = (name, cfg, overrides, pristine, n_params, cpu)
            break
        del model, pristine
    if chosen is None:
        _emit(rpath, "config", {"ok": any(a["stage"] == "cpu" for a in attempts), "attempts": attempts})
        _emit(rpath, "cpu", {"ok": False, "attempts": attempts})
        return
    name, cfg, overrides, pristine, n_params, cpu = chosen
    _emit(rpath, "config", {"ok": True, "attempt": name, "params": n_params, "overrides": overrides,
                            "failed_attempts": attempts[:-1], "config_class": type(cfg).__name__})
    _emit(rpath, "cpu", {k: v for k, v in cpu.items() if not k.startswith("_")})
    if not simulate:
        return

    # ---- simulator
    import neuron_backend

    if not sim_enabled:
        _emit(rpath, "sim", {"ok": False, "error": {"type": "SimulatorNotEnabled", "message": "neuron_backend.enable() returned False", "frame": None}})
        return
    sim = run_phase(family, pristine, cfg, "neuron")
    try:
        sim.update(_sim_summary(neuron_backend.stats()))
    except Exception as e:  # noqa: BLE001
        sim["stats_error"] = error_info(e)
    sim["shape_only"] = shape_only
    if shape_only:
        from neuron_backend import shape_only as so

        sim["shape_only_active"] = so.is_active()  # the mode was really on (else the comparison is void)
        sim.pop("generated", None)  # placeholders, not tokens
    else:
        sim["numerics"] = compare(cpu, sim)
    _emit(rpath, "sim", {k: v for k, v in sim.items() if not k.startswith("_")})


if __name__ == "__main__":  # debug one architecture in this process: worker.py llama [--family causal] [--cpu-only]
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("model_type")
    ap.add_argument("--family", default="causal", choices=list(FAMILIES))
    ap.add_argument("--cpu-only", action="store_true")
    ap.add_argument("--shape-only", action="store_true", help="the simulator phase shape-only")
    a = ap.parse_args()
    spec = next(s for s in architectures([a.family]) if s["model_type"] == a.model_type)
    spec["shape_only"] = a.shape_only
    run_one(spec, simulate=not a.cpu_only)
