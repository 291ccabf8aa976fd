"""The ``torch.neuron`` module of the simulator (mirrors torch_neuronx's neuron.py / memory.py API).

Only imported when the simulator is enabled; ``register()`` loads the C++ core, renames PrivateUse1
to ``neuron`` and builds ``torch.neuron`` (and ``torch.neuron.memory``) from the modules here:

* ``runtime.py``: the loaded C++ core, the visible NeuronCores, whether the Neuron runtime started;
* ``management.py``: device count and index, ``set_device``, the ``device`` context manager,
  properties, torch_neuronx's op tracking;
* ``rng.py``: the default generators; ``memory.py``: memory statistics;
* ``streams.py``: streams and events (no-ops, CUDA-like).
"""

from __future__ import annotations

import sys
import types

import torch

from .. import build
from . import management, memory, rng, runtime, streams

# The C++ core once register() loaded it: the same module as runtime.C (scripts and tests read it here).
_C = None

# torch.neuron's functions and classes, by the module that defines them
_EXPORTS = {
    management: [
        "is_available", "device_count", "current_device", "set_device", "is_initialized", "init", "_lazy_init",
        "_is_in_bad_fork", "device", "device_of", "synchronize", "get_device_name", "get_device_properties",
        "get_amp_supported_dtype", "is_bf16_supported", "_sleep"],
    rng: ["manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
          "get_rng_state_all", "set_rng_state", "set_rng_state_all"],
    memory: ["memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
             "reset_peak_memory_stats", "reset_accumulated_memory_stats", "reset_max_memory_allocated",
             "empty_cache", "mem_get_info", "memory_summary"],
    streams: ["Stream", "Event", "current_stream", "default_stream", "set_stream", "stream", "StreamContext"],
}
_OP_TRACKING = ["get_fallback_ops", "get_executed_ops", "clear_op_tracking"]  # torch_neuronx-style, management.py
# torch.neuron.memory
_MEMORY_EXPORTS = ["memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
                   "max_memory_reserved", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
                   "empty_cache", "memory_summary", "mem_get_info"]


def register() -> types.ModuleType:
    """Load the C++ core and register the ``neuron`` device with torch. Idempotent."""
    global _C
    if _C is not None:
        return torch.neuron
    _C = runtime.C = build.load_extension()
    _C.set_device_count(runtime.visible_core_count())
    torch.utils.rename_privateuse1_backend("neuron")
    mod = types.ModuleType("torch.neuron", "Simulated TorchNeuron device module (neuron-port).")
    for source, names in _EXPORTS.items():
        for name in names:
            setattr(mod, name, getattr(source, name))
    for name in _OP_TRACKING:
        setattr(mod, name, getattr(management, name))
    mod.default_generators = rng.load_generators()
    mod._initialized = True  # torch.utils.checkpoint saves a device's RNG state only when this is true (rng.py)
    mem = types.ModuleType("torch.neuron.memory")
    for name in _MEMORY_EXPORTS:
        setattr(mem, name, getattr(memory, name))
    mod.memory = mem
    torch._register_device_module("neuron", mod)
    sys.modules["torch.neuron.memory"] = mem
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
    return mod
