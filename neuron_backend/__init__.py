"""neuron-port's simulated TorchNeuron ``neuron`` device.

The package is found by PyTorch's backend autoload (``torch.backends`` entry point ->
``_autoload``), exactly like real TorchNeuron, but it only switches the device on when
``NEURON_PORT_SIMULATE=1`` is set or ``enable()`` is called. An ordinary ``import torch`` is
unaffected. Importing this package is cheap: torch and the C++ core load only on ``enable()``.

Public API:
    enable() -> bool          register the simulated device (idempotent)
    is_enabled() -> bool
    stats() -> dict           every recorded datum (same content as the events file)
    events.record(kind, **f)  append an event with the user's source line (compile / distributed modules)
    events.flush()            write the events file now
    build.build(force=False)  prebuild the C++ core (``neuron-port doctor --build``)
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import warnings

__all__ = ["enable", "is_enabled", "stats", "SIMULATE_ENV"]

SIMULATE_ENV = "NEURON_PORT_SIMULATE"
_enabled = False
_refused: str | None = None


_IDENTITY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "identity")


def _real_torch_neuronx() -> bool:
    """A torch_neuronx that is not ours (identity/: the simulated one and the early import of `check`'s
    children, which is in sys.modules while it imports torch)."""
    try:
        spec = importlib.util.find_spec("torch_neuronx")
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    origin = os.path.abspath(spec.origin or "")
    if not origin.startswith(_IDENTITY + os.sep):
        return True
    path = [p for p in sys.path if not os.path.abspath(p or os.curdir).startswith(_IDENTITY + os.sep)]
    return importlib.machinery.PathFinder.find_spec("torch_neuronx", path) is not None


def _autoload() -> None:
    """``torch.backends`` entry point: enables the simulator only when NEURON_PORT_SIMULATE=1, and not
    in torchrun's launcher, which imports torch but runs no model (its workers enable it for themselves)."""
    if os.environ.get(SIMULATE_ENV, "").strip() != "1":
        return
    if _is_torchrun_launcher():  # no model runs here: only when and how each worker ends (NP909)
        from .distributed.launcher import install as watch_workers

        watch_workers()
        return
    from .build import BuildError

    try:
        if enable():
            # check's processes only: transformers, accelerate and diffusers choose `neuron` when they find
            # torch_neuronx, as on Trainium (identity/__init__.py)
            from .identity import install as install_torch_neuronx

            install_torch_neuronx()
    except BuildError as exc:
        # one line, not torch's "Failed to load the backend extension" traceback: the run cannot go on without
        # the device, so the process ends here (SystemExit passes torch's `except Exception`), non-zero
        line = str(exc) if "neuron-port doctor" in str(exc) else f"{exc} (`neuron-port doctor` checks the set-up)"
        print(line, file=sys.stderr, flush=True)
        raise SystemExit(LOAD_FAILED_EXIT) from None


LOAD_FAILED_EXIT = 3  # the simulated device could not be built or loaded (`check` reports the run as failed)


LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def _is_torchrun_launcher() -> bool:
    # sys.argv[0] is still "-m" while `python -m torch.distributed.run` imports torch: read the original argv
    argv = list(getattr(sys, "orig_argv", ())) or list(sys.argv)
    if any(os.path.basename(arg) == "torchrun" for arg in argv[:2]):
        return True
    return any(argv[i] == "-m" and argv[i + 1] in LAUNCHER_MODULES for i in range(len(argv) - 1))


def enable() -> bool:
    """Register the simulated ``neuron`` device with torch. Returns False if it refused to."""
    global _enabled, _refused
    if _enabled:
        return True
    if _real_torch_neuronx():
        _refused = (
            "the real torch_neuronx package is installed in this environment; the neuron-port simulator "
            "does not register a second `neuron` device. Run on Trainium, or use an environment without "
            "torch-neuronx to simulate."
        )
        warnings.warn("neuron-port: " + _refused, RuntimeWarning, stacklevel=2)
        return False
    import torch

    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", "neuron"):
        _refused = f"PrivateUse1 is already registered as {name!r} by another backend"
        warnings.warn("neuron-port: " + _refused, RuntimeWarning, stacklevel=2)
        return False

    from . import device, events, policy, unsupported
    from .device import runtime

    mod = device.register()
    c = runtime.C
    c.set_policy(policy.native_ops(), policy.no_neff_ops())
    c.route_through_fallback("aten", "_foreach_")
    c.route_through_fallback("aten", "*structured*")
    c.set_emulate_float64(os.environ.get("NEURON_PORT_FLOAT64", "keep").strip().lower() == "emulate")
    events.install(c)
    unsupported.install()
    if os.environ.get("NEURON_PORT_SIM_CORE_ONLY") != "1":  # measurement switch (bench_step.py --import)
        # torch.compile, the NEFF cache and distributed (imported in this order: distributed/cpu_aliases.py
        # registers its exit hook on import, after the events module's and before the NEFF cache's)
        from .compile import backend as compile_backend
        from . import distributed
        from .compile import neff_cache

        neff_cache.register()
        compile_backend.register()
        distributed.register()
    _enabled = True
    from . import shape_only

    if shape_only.requested():
        shape_only.start()
    return mod is not None


def is_enabled() -> bool:
    return _enabled


def stats() -> dict:
    """Everything recorded so far (ops, fallbacks, eager compiles, demotions, unsupported, events)."""
    from . import events

    return events.snapshot()


def __getattr__(name):  # lazy submodules and subpackages: neuron_backend.events, .build, .policy ...
    if name in ("events", "build", "policy", "device", "unsupported", "compile", "shape_only"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

