"""RNG of ``torch.neuron``: one default generator per device, seeded and saved like torch.cuda's.

A neuron generator's state is TorchNeuron's (and CUDA's) 16-byte Philox state: seed (uint64) in bytes
0-8, offset (int64) in bytes 8-16, which DTensor's OffsetBasedRNGTracker reads and sets. An op with a
generator argument (rand, randn, normal_, bernoulli_, randperm, ...) draws from a CPU generator derived
from (seed, offset) and advances the offset by its element count rounded up to 4 (csrc/runtime/
generator.cpp), so restoring a state reproduces the draws. Ops without one (native_dropout, SDPA's
dropout) run CPU kernels that draw from the CPU default generator, as TorchNeuron's do. The compile
backend's RNG-wrapper lowering saves and restores both (compile/rng_wrappers.py); torch.utils.checkpoint
saves and restores the device's state because ``torch.neuron._initialized`` is true (TorchNeuron's module
lacks it, but its random ops draw from the CPU generator, which checkpoint always restores).
"""

from __future__ import annotations

from typing import Any

import torch

from . import runtime
from .management import device_count, index

default_generators: tuple = ()  # filled by load_generators() when the device registers


def load_generators() -> tuple:
    """The default generator of every device (at least one), kept as ``default_generators``."""
    global default_generators
    default_generators = tuple(runtime.C.default_generator(i) for i in range(max(device_count(), 1)))
    return default_generators


def manual_seed(seed: int) -> None:
    default_generators[runtime.C.current_device()].manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for g in default_generators:
        g.manual_seed(int(seed))


def seed() -> None:
    default_generators[runtime.C.current_device()].seed()


def seed_all() -> None:
    s = default_generators[0].seed() if default_generators else 0
    for g in default_generators[1:]:
        g.manual_seed(s)


def initial_seed() -> int:
    return default_generators[runtime.C.current_device()].initial_seed()


def get_rng_state(device: Any = "neuron") -> torch.Tensor:
    return default_generators[index(device)].get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [g.get_state() for g in default_generators]


def set_rng_state(new_state: torch.Tensor, device: Any = "neuron") -> None:
    default_generators[index(device)].set_state(new_state.cpu() if new_state.device.type != "cpu" else new_state)


def set_rng_state_all(new_states) -> None:
    for g, s in zip(default_generators, new_states):
        g.set_state(s)
