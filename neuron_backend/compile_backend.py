"""``torch.compile(backend="neuron")`` on the simulated device.

What it does, like TorchNeuron's Dynamo backend:

* Dynamo -> AOTAutograd (forward and backward graphs, so training works) -> "lowering" check
  against the op policy -> NEFF cache lookup -> the ATen graphs run on the simulated device;
* static shapes only: while the simulator is enabled Dynamo's automatic dynamic shapes are off, so
  each new input shape is a new compile (3 shapes = 3 compiles); ``dynamic=True`` or a
  ``mark_dynamic`` dimension is rejected with TorchNeuron's "Dynamic shapes detected" error;
* ``mode=`` other than default logs TorchNeuron's warning and compiles as default (torch 2.13 passes
  ``mode`` to a custom backend as a keyword argument, so ``mode="max-autotune"`` does not crash);
* an ATen op without a native lowering (not in ``rules/op_policy.toml`` [native]) fails the
  compile; with ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0`` (or ``options={"fallback_execution":
  True}``) the original FX graph runs eagerly instead, after TorchNeuron's two log lines;
* every compile, recompile (with Dynamo's guard-failure reason) and a hit of
  ``torch._dynamo.config.recompile_limit`` is recorded as a ``compile`` event (EVENTS.md);
* activation checkpointing in a compiled region: the RNG wrappers AOTAutograd's partitioner puts
  around recomputed random ops (``run_and_save_rng_state`` / ``run_with_rng_state``, which PyTorch
  implements for cpu/cuda/hpu/xpu only) are lowered to save and restore the CPU and neuron generators.

While a compiled graph runs, the core's per-op accounting is paused: on Trainium a compiled graph
is one NEFF, not a series of eager op compiles. A graph that fell back to eager is counted op by op.

Registered with Dynamo by ``register()`` (called from ``neuron_backend.enable()``) and through the
``torch_dynamo_backends`` entry point (``neuron = neuron_backend.compile_backend:neuron_backend``).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from typing import Any

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

# FX graph ops that lower without a kernel of their own (views, metadata, functionalization copies,
# shape queries). Everything else must be a native op of the policy to compile.
STRUCTURAL_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "alias", "detach", "t", "transpose", "permute", "expand", "squeeze",
    "unsqueeze", "slice", "select", "split", "split_with_sizes", "chunk", "narrow", "as_strided", "copy",
    "copy_", "clone", "_to_copy", "empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided",
    "new_zeros", "new_ones", "new_full", "full", "full_like", "zeros", "zeros_like", "ones", "ones_like",
    "scalar_tensor", "lift_fresh", "lift_fresh_copy", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size",
    "view_as", "expand_as", "unbind", "_reshape_alias", "contiguous", "resize_", "set_",
})

_lock = threading.Lock()
_registered = False
_seen_reasons: dict[Any, int] = {}


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
    elif not any(isinstance(f, _DynamoImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _DynamoImportHook())


class _DynamoImportHook:
    """A meta-path finder that only watches for ``torch._dynamo`` and registers the backend after it loads."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch._dynamo":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader_exec = spec.loader.exec_module

        def exec_module(module):
            loader_exec(module)
            try:
                _register_with_dynamo()
            except Exception as e:  # noqa: BLE001 - never break `import torch._dynamo`
                log.warning("neuron-port: could not register the neuron torch.compile backend: %s", e)

        spec.loader.exec_module = exec_module
        return spec


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
            from . import events

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
    from . import events

    options = dict(options or {})
    if mode not in (None, "default"):
        log.warning(MODE_WARNING, mode)
    fn, code = _function_info()
    compile_id, reasons = _compile_id_and_reasons(code)
    recompile = bool(compile_id and not compile_id.endswith("/0"))
    ev = events.record(
        "compile", event="recompile" if recompile else "compile", backend="neuron", compile_id=compile_id,
        function=fn, inputs=_describe_inputs(gm, example_inputs), reasons=reasons,
        reason=reasons[0] if reasons else None, mode=mode or "default", status="compiling", graphs=[],
    )
    dims = _dynamic_dims(gm, example_inputs)
    if dims:
        msg = DYNAMIC_SHAPES_MESSAGE.format(n=len(dims), dims=dims)
        ev.update(status="rejected", error="RuntimeError", message=PREFIX + msg)
        events.flush()
        raise RuntimeError(PREFIX + msg)
    try:
        compiled = _compile_aot(gm, example_inputs, ev, fn)
    except NeuronCompileError as e:
        if fallback_execution_enabled(options):
            log.error("Execution failed: %s", e)
            log.warning("Falling back to original GraphModule execution")
            ev.update(status="fallback", error="RuntimeError", message=str(e), graphs=[])
            events.flush()
            return gm.forward  # eager on the simulated device, op by op (accounting stays on)
        ev.update(status="failed", error="RuntimeError", message=str(e))
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


def _op_name(target) -> str | None:
    import torch

    if isinstance(target, torch._ops.OpOverload):
        ns, name = target._schema.name.split("::", 1)
        return f"{name}.{target._overloadname}" if target._overloadname != "default" else name
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name.split("::", 1)[1]
    return None


def _unlowerable_ops(g) -> list[str]:
    from . import policy

    native = set(policy.native_ops())
    hops = _rng_hops()
    bad: list[str] = []
    for node in g.graph.nodes:
        if node.op != "call_function":
            continue
        target = node.target
        if target in hops:  # an RNG wrapper of activation checkpointing: the wrapped op is what lowers
            target = node.args[hops[target]] if len(node.args) > hops[target] else None
        name = _op_name(target)
        if name is None:
            continue  # operator.getitem and other Python glue
        ns = target._schema.name.split("::", 1)[0] if hasattr(target, "_schema") else "aten"
        base = name.split(".", 1)[0]
        if ns != "aten":
            if ns in ("_c10d_functional", "c10d_functional", "prims") or base in STRUCTURAL_OPS:
                continue
        elif name in native or base in native or base in STRUCTURAL_OPS:
            continue
        qual = f"{ns}::{name}"
        if qual not in bad:
            bad.append(qual)
    return bad


# ---------------------------------------------------------------- RNG wrappers of activation checkpointing
def _rng_hops() -> dict:
    """The partitioner's RNG wrappers of recomputed random ops -> the index of the wrapped op argument."""
    try:
        from torch._prims import rng_prims
    except Exception:  # noqa: BLE001
        return {}
    return {rng_prims.run_and_save_rng_state: 0, rng_prims.run_with_rng_state: 1}


def _rng_device(args, kwargs):
    """The device of a wrapped random op: its first tensor argument's (as rng_prims), else ``device=``."""
    import torch
    from torch.utils._pytree import tree_leaves

    for a in tree_leaves((args, kwargs)):
        if isinstance(a, torch.Tensor):
            return a.device
    d = kwargs.get("device")
    return torch.device(d) if d is not None else None


def _rng_state(dev):
    """The CPU default generator's state (native_dropout, SDPA dropout) and the neuron device generator's
    (rand, randn, bernoulli_, ...) as one uint8 tensor: what a random op on ``dev`` may draw from."""
    import torch

    return torch.cat([torch.get_rng_state(), torch.neuron.get_rng_state(dev)])


def _set_rng_state(state, dev) -> None:
    import torch

    n = torch.get_rng_state().numel()
    torch.set_rng_state(state[:n].clone())
    torch.neuron.set_rng_state(state[n:].clone(), dev)


def _neuron_run_and_save_rng_state(op, *args, **kwargs):
    """run_and_save_rng_state on neuron tensors: (the generator states, op(*args))."""
    from torch._prims import rng_prims

    dev = _rng_device(args, kwargs)
    if dev is None or dev.type != "neuron":
        return rng_prims.run_and_save_rng_state(op, *args, **kwargs)
    return _rng_state(dev), op(*args, **kwargs)


def _neuron_run_with_rng_state(rng_state, op, *args, **kwargs):
    """run_with_rng_state on neuron tensors: op(*args) with the generators set to the saved states,
    then restored (the recompute in backward draws what the forward drew)."""
    from torch._prims import rng_prims

    dev = _rng_device(args, kwargs)
    if dev is None or dev.type != "neuron":
        return rng_prims.run_with_rng_state(rng_state, op, *args, **kwargs)
    current = _rng_state(dev)
    _set_rng_state(rng_state, dev)
    try:
        return op(*args, **kwargs)
    finally:
        _set_rng_state(current, dev)


def _lower_rng_hops(g) -> int:
    """Activation checkpointing in a compiled region: the partitioner wraps every recomputed op tagged
    ``nondeterministic_seeded`` (dropout, rand*, the fused SDPA ops) in ``run_and_save_rng_state`` (forward
    graph) / ``run_with_rng_state`` (backward graph), implemented for cpu/cuda/hpu/xpu only ("Backend not
    supported for neuron"). Like Inductor, the backend lowers them: here to save/restore the CPU and the
    neuron generators. Returns how many nodes were lowered."""
    try:
        from torch._prims import rng_prims
    except Exception:  # noqa: BLE001
        return 0
    lowered = {rng_prims.run_and_save_rng_state: _neuron_run_and_save_rng_state,
               rng_prims.run_with_rng_state: _neuron_run_with_rng_state}
    n = 0
    for node in g.graph.nodes:
        if node.op == "call_function" and node.target in lowered:
            node.target = lowered[node.target]
            n += 1
    if n:
        g.recompile()
    return n


def _compile_graph(g, example_inputs, kind: str, ev: dict, fn: dict):
    from . import graph_work, neff_cache

    bad = _unlowerable_ops(g)
    if bad:
        where = fn.get("name", "?")
        if fn.get("file"):
            where += f" ({fn['file']}:{fn.get('line')})"
        ev["unsupported_ops"] = sorted(set(ev.get("unsupported_ops", [])) | set(bad))
        raise NeuronCompileError(
            PREFIX + "Compilation error occurred on Neuron for operation=torch_compile;\n"
            f'error message="COMPILATION FAILED: no Neuron lowering for {", ".join(bad)} in the {kind} graph '
            f'of {where}. The simulator\'s op policy (rules/op_policy.toml) lists no native kernel for these ops; '
            f'set {FALLBACK_ENV}=0 to run the graph eagerly instead, or compute them outside the compiled region."'
        )
    _lower_rng_hops(g)
    sig = _describe_inputs(g, example_inputs)
    text = g.code + "\n" + repr([(d.get("dtype"), d.get("shape")) for d in sig])
    ops = sum(1 for n in g.graph.nodes if n.op == "call_function")
    info = neff_cache.compiled_graph(kind, text, {"function": fn.get("name"), "ops": ops})
    info["ops"] = ops
    ev["graphs"].append(info)
    return graph_work.track(g, info, _runner(g))  # its ops and runs, for the cost model


def _runner(g):
    """Run an ATen graph with the core's per-op accounting paused (one NEFF, not eager ops)."""
    from . import device

    c = device._C
    fwd = g.forward

    def run(args):
        if c is None:
            return fwd(*args)
        c.set_accounting(False)
        try:
            return fwd(*args)
        finally:
            c.set_accounting(True)

    run._boxed_call = True  # AOTAutograd calling convention: one list argument
    return run


# ---------------------------------------------------------------- what is being compiled
def _function_info() -> tuple[dict, Any]:
    """Name and source line of the compiled function (a module's forward for modules)."""
    from . import events

    code = None
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        code = tx.f_code if tx is not None else None
    except Exception:  # noqa: BLE001
        code = None
    if code is not None and not events._is_internal(os.path.abspath(code.co_filename)):
        return ({"name": getattr(code, "co_qualname", code.co_name), "file": os.path.abspath(code.co_filename),
                 "line": code.co_firstlineno}, code)
    # A module whose forward lives in torch (nn.Sequential ...) is compiled through a wrapper frame:
    # find the OptimizedModule on the stack and report its module's forward.
    try:
        from torch._dynamo.eval_frame import OptimizedModule

        f = sys._getframe(1)
        while f is not None:
            s = f.f_locals.get("self") if "self" in f.f_code.co_varnames else None
            if isinstance(s, OptimizedModule):
                mod = s._orig_mod
                fc = type(mod).forward.__code__
                return ({"name": f"{type(mod).__qualname__}.forward", "file": os.path.abspath(fc.co_filename),
                         "line": fc.co_firstlineno, "module": type(mod).__qualname__}, code)
            f = f.f_back
    except Exception:  # noqa: BLE001
        pass
    if code is not None:
        return ({"name": code.co_name, "file": os.path.abspath(code.co_filename), "line": code.co_firstlineno}, code)
    return ({"name": "<unknown>"}, None)


def _compile_id_and_reasons(code) -> tuple[str | None, list[str]]:
    """Dynamo's compile id ("frame/compile") and the guard failures that caused this recompile."""
    cid = None
    try:
        from torch._guards import CompileContext

        c = CompileContext.current_compile_id()
        cid = str(c) if c is not None else None
    except Exception:  # noqa: BLE001
        pass
    reasons: list[str] = []
    if code is not None:
        try:
            from torch._dynamo.utils import guard_failures

            allr = guard_failures.get(code, [])
            with _lock:
                start = _seen_reasons.get(code, 0)
                if start > len(allr):  # torch._dynamo.reset() cleared them
                    start = 0
                _seen_reasons[code] = len(allr)
            reasons = [str(r) for r in allr[start:]]
        except Exception:  # noqa: BLE001
            reasons = []
    return cid, reasons


def _describe_inputs(gm, example_inputs) -> list[dict]:
    import torch

    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    out = []
    for i, x in enumerate(example_inputs):
        d: dict[str, Any] = {"name": names[i] if i < len(names) else f"arg{i}"}
        if isinstance(x, torch.Tensor):
            d["shape"] = [s if isinstance(s, int) else str(s) for s in x.shape]
            d["dtype"] = str(x.dtype).replace("torch.", "")
            d["device"] = str(x.device)
            if isinstance(x, torch.nn.Parameter):
                d["parameter"] = True
        elif isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            d["symbol"] = str(x)
        else:
            d["value"] = repr(x)[:80]
        out.append(d)
    return out


def _dynamic_dims(gm, example_inputs) -> list[str]:
    import torch

    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    dims: list[str] = []
    for i, x in enumerate(example_inputs):
        name = names[i] if i < len(names) else f"arg{i}"
        if isinstance(x, torch.SymInt):
            dims.append(name if name == str(x) else f"{name}={x}")
        elif isinstance(x, torch.Tensor):
            for j, s in enumerate(x.shape):
                if isinstance(s, torch.SymInt):
                    dims.append(f"{name}.size({j})={s}")
    return dims
