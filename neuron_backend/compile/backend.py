"""``torch.compile(backend="neuron")`` on the simulated device.

What it does, like TorchNeuron's Dynamo backend:

* Dynamo -> AOTAutograd (forward and backward graphs, so training works) -> "lowering" check
  against the op policy -> NEFF cache lookup -> the ATen graphs run on the simulated device;
* static shapes only: while the simulator is enabled Dynamo's automatic dynamic shapes are off, so
  each new input shape is a new compile (3 shapes = 3 compiles); ``dynamic=True`` or a
  ``mark_dynamic`` dimension is rejected with TorchNeuron's "Dynamic shapes detected" error;
* ``mode=`` other than default logs TorchNeuron's warning and compiles as default (torch 2.13 passes
  ``mode`` to a custom backend as a keyword argument, so ``mode="max-autotune"`` does not crash);
* an ATen op that TorchNeuron's compile path cannot lower (Torch-MLIR -> StableHLO, measured in
  rules/compile_lowering.toml; lowering.py) fails the compile with one line naming the op and the user's
  line that calls it; with ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0`` (or ``options={"fallback_execution":
  True}``) the original FX graph runs eagerly instead, after TorchNeuron's two log lines;
* every compile, recompile (with Dynamo's guard-failure reason) and a hit of
  ``torch._dynamo.config.recompile_limit`` is recorded as a ``compile`` event (EVENTS.md);
* activation checkpointing in a compiled region: the RNG wrappers AOTAutograd's partitioner puts
  around recomputed random ops (``run_and_save_rng_state`` / ``run_with_rng_state``, which PyTorch
  implements for cpu/cuda/hpu/xpu only) are lowered to save and restore the CPU and neuron generators
  (rng_wrappers.py);
* every value of a graph runs with the strides its trace gave it (layout_check.py): the simulator's
  kernels return them, and a result in other strides is moved into them, or stops the run with a
  ``[neuron-port simulator]`` error when it aliases its input (issue 39).

While a compiled graph runs, the core's per-op accounting is paused: on Trainium a compiled graph
is one NEFF, not a series of eager op compiles. Its device memory is what the NEFF's inputs and outputs
hold (the peak is taken at its end), not each intermediate (the NEFF's scratchpad, which the runtime
manages). A graph that fell back to eager is counted op by op.

Registered with Dynamo by ``register()`` (called from ``neuron_backend.enable()``) and through the
``torch_dynamo_backends`` entry point (``neuron = neuron_backend.compile.backend:neuron_backend``).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from typing import Any

from ..after_import import AfterImport
from .describe import compile_id_and_reasons, describe_inputs, dynamic_dims, function_info
from .layout_check import add_layout_checks
from .lowering import unlowerable
from .rng_wrappers import lower_rng_hops

__all__ = ["neuron_backend", "register", "NeuronCompileError", "fallback_execution_enabled"]

log = logging.getLogger("neuron_backend.compile")
FALLBACK_ENV = "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"
PREFIX = "[neuron-port simulator] "

DYNAMIC_SHAPES_MESSAGE = (
    "Dynamic shapes detected in the model, but torch-neuronx requires static shapes. "
    "Found {n} dynamic dimension(s): {dims}\n"
    "To fix this issue:\n"
    "1. Ensure all input tensors have fixed, known shapes\n"
    "2. Avoid operations that create dynamic shapes (e.g., dynamic slicing, variable-length sequences)\n"
    "(torch.compile(dynamic=True) is not supported by the Neuron backend: leave dynamic unset or pass "
    "dynamic=False; each new input shape is compiled separately.)"
)
MODE_WARNING = "Neuron backend does not support mode='%s', falling back to default mode."

_lock = threading.Lock()
_registered = False


class NeuronCompileError(RuntimeError):
    """A graph the (simulated) Neuron compiler cannot lower."""


def fallback_execution_enabled(options: dict | None = None) -> bool:
    """TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION (default True in TorchNeuron 2.33: raise); the
    ``fallback_execution`` compile option overrides it."""
    if options and "fallback_execution" in options:
        return bool(options["fallback_execution"])
    v = os.environ.get(FALLBACK_ENV, "1").strip().lower()
    return v in ("0", "false", "no", "off")


# ---------------------------------------------------------------- registration
def _configure_dynamo() -> None:
    import torch._dynamo

    # Static shapes (TorchNeuron forces dynamic=False): no automatic dynamic after the first recompile.
    torch._dynamo.config.automatic_dynamic_shapes = False


def register() -> None:
    """Register the ``neuron`` Dynamo backend (idempotent).

    Importing torch._dynamo costs over a second, so enable() must not do it: if Dynamo is not loaded
    yet, the registration runs right after its first import (``torch.compile`` imports it). The
    ``torch_dynamo_backends`` entry point resolves ``backend="neuron"`` as well when the package is
    installed; the backend itself also applies the settings at its first call.
    """
    if "torch._dynamo" in sys.modules:
        _register_with_dynamo()
    elif not any(isinstance(f, AfterImport) and f.name == "torch._dynamo" for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport("torch._dynamo", _register_after_import))


def _register_after_import(module) -> None:
    try:
        _register_with_dynamo()
    except Exception as e:  # noqa: BLE001 - never break `import torch._dynamo`
        log.warning("neuron-port: could not register the neuron torch.compile backend: %s", e)


def _register_with_dynamo() -> None:
    global _registered
    with _lock:
        if _registered:
            return
        _registered = True
    from torch._dynamo.backends import registry

    _configure_dynamo()
    if "neuron" not in registry._COMPILER_FNS:
        registry.register_backend(neuron_backend, name="neuron")
    logging.getLogger("torch._dynamo.convert_frame").addHandler(_RecompileLimitHandler())


class _RecompileLimitHandler(logging.Handler):
    """Dynamo logs ``torch._dynamo hit config.recompile_limit (8)`` (a WARNING) and falls back to eager
    for that frame: record it."""

    def __init__(self):
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if "torch._dynamo hit config." not in str(record.msg):
                return
            args = record.args if isinstance(record.args, tuple) else ()
            limit_type, limit, func, reason = (list(args) + [None] * 4)[:4]
            from .. import events

            fn: dict[str, Any] = {"name": str(func)}
            m = re.fullmatch(r"'(.*)' \((.*):(\d+)\)", str(func))
            if m:
                fn = {"name": m.group(1), "file": m.group(2), "line": int(m.group(3))}
            events.record("compile", event="recompile_limit", backend="neuron", limit_type=limit_type,
                          limit=limit, function=fn, reason=str(reason) if reason is not None else None,
                          message=f"{PREFIX}torch._dynamo hit config.{limit_type} ({limit}) for {func}: the "
                                  "function now runs eagerly (no NEFF); on Trainium every op of it becomes an "
                                  "eager op")
        except Exception:  # noqa: BLE001 - a logging handler must not raise
            pass


# ---------------------------------------------------------------- the backend
def neuron_backend(gm, example_inputs, mode: str | None = None, options: dict | None = None, **kwargs):
    """Dynamo backend: ``torch.compile(model, backend="neuron")``."""
    _register_with_dynamo()  # found through the entry point without enable(): apply the settings now
    _configure_dynamo()
    from .. import events

    options = dict(options or {})
    if mode not in (None, "default"):
        log.warning(MODE_WARNING, mode)
    fn, code = function_info()
    compile_id, reasons = compile_id_and_reasons(code)
    recompile = bool(compile_id and not compile_id.endswith("/0"))
    ev = events.record(
        "compile", event="recompile" if recompile else "compile", backend="neuron", compile_id=compile_id,
        function=fn, inputs=describe_inputs(gm, example_inputs), reasons=reasons,
        reason=reasons[0] if reasons else None, mode=mode or "default", status="compiling", graphs=[],
    )
    dims = dynamic_dims(gm, example_inputs)
    if dims:
        msg = DYNAMIC_SHAPES_MESSAGE.format(n=len(dims), dims=dims)
        ev.update(status="rejected", error="RuntimeError", message=msg.split("\n", 1)[0])
        events.flush()
        raise RuntimeError(PREFIX + msg)
    try:
        compiled = _compile_aot(gm, example_inputs, ev, fn)
    except NeuronCompileError as e:
        if fallback_execution_enabled(options):
            log.error("Execution failed: %s", e)
            log.warning("Falling back to original GraphModule execution")
            ev.update(status="fallback", error="RuntimeError", message=ev.get("summary") or str(e), graphs=[])
            events.flush()
            return gm.forward  # eager on the simulated device, op by op (accounting stays on)
        ev.update(status="failed", error="RuntimeError", message=ev.get("summary") or str(e))
        events.flush()
        raise
    ev["status"] = "compiled"
    return compiled


def _compile_aot(gm, example_inputs, ev: dict, fn: dict):
    import torch._functorch.config as functorch_config
    from torch._dynamo.backends.common import aot_autograd

    def compiler(kind):
        return lambda g, ex: _compile_graph(g, ex, kind, ev, fn)

    aot = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                       inference_compiler=compiler("inference"), keep_inference_input_mutations=True)
    # Compile the backward graph now, not at the first backward(): the whole compile (and its
    # fallback decision) then happens here, like one neuronx-cc invocation per Dynamo graph.
    with functorch_config.patch(force_non_lazy_backward_lowering=True):
        return aot(gm, example_inputs)


def _compile_graph(g, example_inputs, kind: str, ev: dict, fn: dict):
    from . import graph_work, neff_cache

    bad = unlowerable(g)
    if bad:
        ev["unsupported_ops"] = sorted(set(ev.get("unsupported_ops", [])) | {u.op for u in bad})
        details = ev.setdefault("unsupported_details", [])
        details += [dict(u.to_json(), graph=kind) for u in bad if u.op not in {d["op"] for d in details}]
        summary = ev["summary"] = lowering_summary(bad, kind)  # the event's one-line message
        raise NeuronCompileError(
            PREFIX + "Compilation error occurred on Neuron for operation=torch_compile; "
            f'error message="COMPILATION FAILED: {summary}" (TorchNeuron\'s compile path, Torch-MLIR -> StableHLO, '
            f'has no lowering for it: {bad[0].reason}; set {FALLBACK_ENV}=0 to run the graph eagerly instead, '
            'or compute it outside the compiled region)'
        )
    lower_rng_hops(g)
    sig = describe_inputs(g, example_inputs)
    text = g.code + "\n" + repr([(d.get("dtype"), d.get("shape")) for d in sig])
    ops = sum(1 for n in g.graph.nodes if n.op == "call_function")
    info = neff_cache.compiled_graph(kind, text, {"function": fn.get("name"), "ops": ops})
    info["ops"] = ops
    ev["graphs"].append(info)
    run = graph_work.track(g, info, _runner(g))  # its ops and runs, for the cost model
    add_layout_checks(g, kind)  # after the description: the checks are the simulator's, not the NEFF's ops
    return run


def lowering_summary(bad, kind: str) -> str:
    """One line: the ops without a lowering, each with the user's line that calls it."""
    ops = ", ".join(f"{u.op} ({u.where()})" if u.file else u.op for u in bad)
    return f"no Neuron lowering for {ops} in the {kind} graph"


def _runner(g):
    """Run an ATen graph as one NEFF: the core's per-op accounting paused (no eager ops), and its memory
    counted as the compiled program uses it (``mem_graph_begin``/``end``): the inputs, held for the whole
    run, and the outputs (what AOTAutograd saves for the backward, the gradients, the results), not each
    intermediate, which on Trainium lives in the NEFF's scratchpad, outside the allocator's statistics."""
    from ..device import runtime

    c = runtime.C

    def run(args):
        fwd = g.forward  # read per call: add_layout_checks recompiles g after this runner is made
        if c is None:
            return fwd(*args)
        c.set_accounting(False)
        c.mem_graph_begin()
        try:
            return fwd(*args)  # the intermediates die with fwd's frame, before the peak is taken below
        finally:
            c.mem_graph_end()
            c.set_accounting(True)

    run._boxed_call = True  # AOTAutograd calling convention: one list argument
    return run
