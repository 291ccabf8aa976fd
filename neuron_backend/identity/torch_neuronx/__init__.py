"""``torch_neuronx`` as the libraries that detect TorchNeuron see it, backed by neuron-port's simulator.

Found only inside `neuron-port check`'s processes (neuron_backend/identity/__init__.py). Every name here
is the simulated device's own function under TorchNeuron's top-level name (its torch_neuronx/__init__.py):
nothing is a stand-in that pretends to succeed. What the simulator does not model (NKI kernels, the
profiler, dynamo metrics) is absent, so a program that uses it fails here as it would on an older release.
"""

from __future__ import annotations

import sys

import torch

import neuron_backend

if not neuron_backend.is_enabled():  # reached only by importing this folder by hand
    raise ImportError("torch_neuronx here is neuron-port's simulated TorchNeuron: it exists only in the processes "
                      "`neuron-port check` runs (NEURON_PORT_SIMULATE=1)")

from neuron_backend.identity import distribution_version  # noqa: E402

__version__ = distribution_version()

# torch.neuron is the simulator's device module; TorchNeuron's is its torch_neuronx.neuron, and its memory
# functions are torch_neuronx.memory
neuron = torch.neuron
memory = torch.neuron.memory
sys.modules[__name__ + ".neuron"] = neuron
sys.modules[__name__ + ".memory"] = memory

# TorchNeuron's top-level API, each the simulator's own function
device_count = neuron.device_count
current_device = neuron.current_device
set_device = neuron.set_device
get_device_properties = neuron.get_device_properties
synchronize = neuron.synchronize
device = neuron.device
empty_cache = neuron.empty_cache
get_fallback_ops = neuron.get_fallback_ops
get_executed_ops = neuron.get_executed_ops
clear_op_tracking = neuron.clear_op_tracking
_lazy_init = neuron._lazy_init
is_neuron_runtime_initialized = neuron.is_initialized
Stream = neuron.Stream
Event = neuron.Event
StreamContext = neuron.StreamContext
stream = neuron.stream
current_stream = neuron.current_stream
default_stream = neuron.default_stream
set_stream = neuron.set_stream
memory_stats = memory.memory_stats
memory_allocated = memory.memory_allocated
max_memory_allocated = memory.max_memory_allocated
memory_reserved = memory.memory_reserved
max_memory_reserved = memory.max_memory_reserved
reset_peak_memory_stats = memory.reset_peak_memory_stats
reset_accumulated_memory_stats = memory.reset_accumulated_memory_stats
memory_summary = memory.memory_summary
