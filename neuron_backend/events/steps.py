"""The step clock and the module stack of the simulated neuron device (EVENTS.md, "Steps and modules").

Every new signature the C++ core reports is stamped (by ``hooks.site_callback``) with the module
running it and with two counters: ``optimizer_step`` (completed ``step()`` calls of the optimizer that
stepped most; a global optimizer step post-hook) and ``forward`` (forward calls started of the outermost
module called most; a global module forward pre-hook). Outermost means that no other module's forward
runs in the thread. Readers derive steps from them. Cost: one Python call per optimizer step and two per
module call (the pre-hook and the forward hook), nothing per op; under torch.compile tracing the hooks
do nothing (a compiled graph runs no hooks of the modules inside it).

Phases (EVENTS.md, "Phases"): a phase is a run of outermost module calls made in one mode (grad enabled, ``module.training``) (a training
loop's calls with grad, an evaluation or generation under ``torch.no_grad()``); it changes when an
outermost call runs in another mode. Each first sighting carries its phase and the phase's own call
count (``phase_forward``); a phase in which a signature was first seen is described by ``phase`` events
(its start when its first new signature appears, its end when it ends), so they stay as few as the
sightings. DataLoader batches are noted (``loaders.py``): a phase whose calls took them has ``loader``.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from . import phase_calls

optimizer_step = 0
forward = 0
# Called with (optimizer_step, forward) when either moves (the crash-proof records' copy: durable.set_clock).
clock_sink: Any = None
# neuron_backend.events.record, set by hooks.install(): how phases and DataLoader facts become events.
record_sink: Any = None
_optimizer_counts: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
_root_counts: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
# Outermost modules that ran a neuron op (a new signature inside them): only they drive ``forward``, so
# CPU-side modules called per sample (torchvision transforms are nn.Modules) do not make steps.
_device_roots: "weakref.WeakSet[Any]" = weakref.WeakSet()
# Module paths: named once from ``named_modules()`` of the first outermost module that contains them
# ("blocks.3.attn"; the outermost module itself by its class name). A name never changes once given.
_module_names: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
# .stack: names of the modules whose forward runs in this thread, innermost last; .root: the outermost one
_tls = threading.local()
_main_ident = threading.main_thread().ident
_is_compiling = None  # torch.compiler.is_compiling, set by install()
_grad_enabled = None  # torch.is_grad_enabled, set by install()
_hook_handles: list = []

# The phase now (main thread): its number (0: before any outermost call), its grad mode, the calls of its
# outermost device modules, whether DataLoader batches fed them, the clock when it began, and whether a
# new signature was first seen in it (its start is then recorded, and its end will be).
phase = 0
phase_forward = 0
_phase_mode: "tuple[bool, bool] | None" = None  # (grad enabled, module.training) of its outermost calls
_phase_counts: dict[int, int] = {}  # id(outermost module) -> its calls in this phase (cleared with the phase)
_phase_loader = False
_phase_start = (0, 0)
_phase_module: "str | None" = None
_phase_sighted = False
# the calls after the phase's first at which a new signature was first seen: two or more make a phase without
# optimizer steps or DataLoader batches a generation (its inputs keep changing as it decodes: phase_calls.kind)
_phase_later: set[int] = set()
batch_pending = False  # a DataLoader batch was drawn since the last outermost call (loaders.py sets it)


def _module_stack() -> list[str]:
    stack = getattr(_tls, "stack", None)
    if stack is None:
        stack = _tls.stack = []
    return stack


def current_module() -> str | None:
    """The path of the innermost module whose forward runs in this thread (None outside modules).

    Called for each new signature: the outermost module running it now drives the forward clock."""
    global forward
    stack = getattr(_tls, "stack", None)
    if not stack:
        return None
    root = getattr(_tls, "root", None)
    if root is not None and threading.get_ident() == _main_ident and root not in _device_roots:
        _device_roots.add(root)
        n = _root_counts.get(root, 0)
        if n > forward:
            forward = n
            _clock_moved()
        _count_phase_call(root, 0)
    return stack[-1]


def _count_phase_call(root, add: int) -> None:
    global phase_forward
    n = _phase_counts.get(id(root), 0) + add
    if add:
        _phase_counts[id(root)] = n
    if n > phase_forward and root in _device_roots:
        phase_forward = n


def _phase_fields(event: str) -> dict:
    o, f = _phase_start if event == "start" else (optimizer_step, forward)
    grad, training = _phase_mode if _phase_mode is not None else (None, None)
    return {"event": event, "phase": phase, "grad": grad, "training": training, "loader": _phase_loader,
            "module": _phase_module,
            "optimizer_step": o, "forward": f, "calls": phase_forward}


def _record_phase(event: str) -> None:
    if record_sink is not None:  # the package's record(): a journal line now, the snapshot's events later
        record_sink("phase", **_phase_fields(event))


def phase_sighting() -> tuple[int, int]:
    """A new signature is first seen now: (phase, phase_forward); the phase's start is recorded once."""
    global _phase_sighted
    if phase_forward > 1:
        _phase_later.add(phase_forward)
    if not _phase_sighted:
        _phase_sighted = True
        try:
            _record_phase("start")
        except Exception:  # noqa: BLE001 - never break an op because of accounting
            pass
    return phase, phase_forward


def _root_call(module, name: str) -> None:
    """An outermost call in the main thread: a new phase when its grad mode or the module's training flag
    differs from the phase's (``model.eval()`` and ``torch.no_grad()`` both mark an evaluation or a generation)."""
    global phase, phase_forward, _phase_mode, _phase_loader, _phase_start, _phase_module, _phase_sighted
    global batch_pending
    mode = (bool(_grad_enabled()) if _grad_enabled is not None else True, bool(getattr(module, "training", True)))
    if mode != _phase_mode:
        if _phase_sighted:
            _record_phase("end")
        # the phase's outermost calls of any module (a compiled model's calls add no device root: no eager
        # signature is seen in them)
        phase_calls.phase_ended(phase, _phase_loader, _phase_start[0], optimizer_step,
                                max(_phase_counts.values(), default=0), len(_phase_later) >= 2)
        phase += 1
        phase_forward = 0
        _phase_mode, _phase_loader, _phase_module, _phase_sighted = mode, batch_pending, name, False
        _phase_counts.clear()
        _phase_later.clear()
        _phase_start = (optimizer_step, forward)
    elif batch_pending:
        _phase_loader = True
    batch_pending = False
    _count_phase_call(module, 1)


def _name_modules(root) -> str:
    name = type(root).__name__
    try:
        for path, module in root.named_modules():
            if module not in _module_names:
                _module_names[module] = path or name
    except Exception:  # noqa: BLE001 - a module whose named_modules() fails still runs
        pass
    return _module_names.get(root, name)


def _forward_pre_hook(module, args) -> None:
    global forward
    # Under torch.compile Dynamo traces this hook: is_compiling() is then true and nothing is recorded
    # (a compiled graph runs no hooks of the modules inside it).
    if _is_compiling is not None and _is_compiling():
        return
    try:
        stack = _module_stack()
        name = _module_names.get(module)
        if not stack:
            if name is None:
                name = _name_modules(module)
            _tls.root = module
            if threading.get_ident() == _main_ident:
                n = _root_counts.get(module, 0) + 1
                _root_counts[module] = n
                if n > forward and module in _device_roots:
                    forward = n
                    _clock_moved()
                _root_call(module, name)
        elif name is None:  # not a registered submodule of the outermost module
            name = _module_names[module] = f"{stack[-1]}.{type(module).__name__}"
        stack.append(name)
    except Exception:  # noqa: BLE001 - never break the user's forward because of accounting
        pass


def _forward_hook(module, args, output) -> None:
    if _is_compiling is not None and _is_compiling():
        return
    stack = getattr(_tls, "stack", None)
    if stack:
        stack.pop()


def _optimizer_step_hook(optimizer, args, kwargs) -> None:
    global optimizer_step
    try:
        n = _optimizer_counts.get(optimizer, 0) + 1
        _optimizer_counts[optimizer] = n
        if n > optimizer_step:
            optimizer_step = n
            _clock_moved()
    except Exception:  # noqa: BLE001
        pass


def _clock_moved() -> None:
    if clock_sink is not None:
        clock_sink(optimizer_step, forward)


def outside_calls(raw) -> dict:
    """Per signature (sequence number) and op (name), its calls outside the training steps by kind
    (phase_calls.py)."""
    return phase_calls.outside_calls(raw, phase, _phase_loader, _phase_start[0], optimizer_step,
                                     len(_phase_later) >= 2)


def totals() -> dict:
    """The step clock now: completed optimizer steps and outermost forward calls (the most of any one
    outermost module that ran neuron ops)."""
    return {"optimizer_steps": optimizer_step, "forwards": forward}


def install() -> None:
    """Register the global optimizer step hook and module forward hooks (once)."""
    global _is_compiling, _grad_enabled
    if _hook_handles:
        return
    import torch
    import torch.nn.modules.module as nn_module
    import torch.optim.optimizer as optim

    _is_compiling = torch.compiler.is_compiling
    _grad_enabled = torch.is_grad_enabled
    _skip_in_dynamo(_forward_pre_hook, _forward_hook, _optimizer_step_hook)
    _hook_handles.append(nn_module.register_module_forward_pre_hook(_forward_pre_hook))
    _hook_handles.append(nn_module.register_module_forward_hook(_forward_hook, always_call=True))
    _hook_handles.append(optim.register_optimizer_step_post_hook(_optimizer_step_hook))
    _hide_from_compile_warning(nn_module)


def _skip_in_dynamo(*functions) -> None:
    """Dynamo must not capture these hooks as frames of their own (a compiled module's hooks run inside
    its frame-evaluation context): that would shift the compile ids of the user's frames. Traced inline,
    they do nothing (is_compiling()). Uses the C entry point, so torch._dynamo is not imported here."""
    try:
        from torch._C._dynamo import eval_frame

        skip = eval_frame._FrameAction.SKIP
        strategy = eval_frame._FrameExecStrategy(skip, skip)  # and whatever they call (WeakKeyDictionary.get)
        for function in functions:
            eval_frame.set_code_exec_strategy(function.__code__, strategy)
    except Exception:  # noqa: BLE001 - another torch version: compile ids may shift, nothing else
        pass


def _hide_from_compile_warning(nn_module) -> None:
    """``torch.compile(module)`` warns on every call while any global module hook exists (its check is
    ``torch.nn.modules.module._has_any_global_hook``); the simulator's hooks are not the user's, so the
    check ignores them (and still sees any hook the user registers). A user's ``-W error`` would
    otherwise turn the warning into an exception that Trainium would not raise."""
    ours = {h.id for h in _hook_handles}
    names = ("_global_backward_pre_hooks", "_global_backward_hooks", "_global_forward_pre_hooks",
             "_global_forward_hooks", "_global_forward_hooks_always_called", "_global_forward_hooks_with_kwargs")
    if not hasattr(nn_module, "_has_any_global_hook") or not all(hasattr(nn_module, n) for n in names):
        return

    def _has_any_global_hook() -> bool:
        return any(key not in ours for name in names for key in getattr(nn_module, name))

    nn_module._has_any_global_hook = _has_any_global_hook
