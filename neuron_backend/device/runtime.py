"""The simulated Neuron runtime of this process: the loaded C++ core, the NeuronCores the process sees
(``NEURON_RT_VISIBLE_CORES`` / ``NEURON_RT_NUM_CORES``) and whether the runtime has started.

Imports no torch: ``visible_core_count()`` is read before the core loads.
"""

from __future__ import annotations

import os

C = None  # the C++ core (build.load_extension()), set by device.register()
GiB = 1 << 30
# trn2: four 24 GB HBM banks shared by 8 physical cores; at LNC=2 one logical core owns one bank.
HBM_PER_LOGICAL_CORE = 24 * GiB


def visible_cores(env: dict[str, str] | None = None) -> list[int] | None:
    """The cores ``NEURON_RT_VISIBLE_CORES`` names ("0-3", "2", "0,1", "0-1,4"), or None when it is unset."""
    env = os.environ if env is None else env
    vis = env.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if not vis:
        return None
    cores: set[int] = set()
    for part in vis.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cores.update(range(int(lo), int(hi) + 1))
        else:
            cores.add(int(part))
    return sorted(cores)


def visible_core_count(env: dict[str, str] | None = None) -> int:
    """Logical NeuronCores visible to this process (trn2 chip at LNC=2: 4).

    ``NEURON_RT_VISIBLE_CORES`` ("0-3", "2", "0,1", "0-1,4") wins over ``NEURON_RT_NUM_CORES``.
    """
    env = os.environ if env is None else env
    cores = visible_cores(env)
    if cores is not None:
        return len(cores)
    num = env.get("NEURON_RT_NUM_CORES", "").strip()
    if num:
        return int(num)
    return 4


# ---------------------------------------------------------------- runtime initialisation
# TorchNeuron starts the Neuron runtime lazily (torch_neuronx._lazy_init: nrt_init): with the first tensor on a
# neuron device, torch.neuron.init() or get_device_properties(); init_process_group(backend="neuron") starts it
# itself and asserts that it had not started before. set_device() and device_count() do not start it (April
# source: c10_neuron::set_device only checks and stores the index).
_runtime_initialized = False
# set_device(i) calls made before the runtime started: (index, user site). init_process_group reports those whose
# index is not the process's device (LOCAL_RANK).
pre_init_set_device: list[tuple[int, dict | None]] = []


def runtime_initialized() -> bool:
    """Whether the simulated Neuron runtime has started (see above): explicitly, or because memory was
    allocated on a neuron device."""
    if _runtime_initialized:
        return True
    if C is None:
        return False
    if any(C.memory_stats(i)["allocation.all.allocated"] > 0 for i in range(C.device_count())):
        mark_runtime_initialized()
        return True
    return False


def mark_runtime_initialized() -> None:
    global _runtime_initialized
    _runtime_initialized = True


def set_process_devices(count: int, current: int) -> None:
    """init_process_group(backend="neuron"), as TorchNeuron's April source does it (c10_neuron::device_count()
    returns local_world_size, set_local_device_start_index(local_rank) makes neuron:<local_rank> the current
    device): this process counts ``count`` devices and the calling thread's current device is ``current``."""
    C.set_device_count(count)
    C.set_device(current)
    C.set_process_core(current)  # memory on another core's index fails, as TorchNeuron's allocator does
