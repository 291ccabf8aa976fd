"""The ``torch.neuron`` module of the simulator (mirrors torch_neuronx's neuron.py / memory.py API).

Only imported when the simulator is enabled; ``register()`` renames PrivateUse1 to ``neuron``.
"""

from __future__ import annotations

import os
import sys
import time
import types
from typing import Any

import torch

from . import build

_C = None
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


def _idx(device: Any = None) -> int:
    if device is None:
        return _C.current_device()
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")
        return _C.current_device() if device.index is None else device.index
    raise TypeError(f"Invalid device: {device!r}")


# ---------------------------------------------------------------- device management
def is_available() -> bool:
    try:
        return device_count() > 0
    except Exception:  # noqa: BLE001 - mirrors torch_neuronx
        return False


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(device: Any) -> None:
    i = _idx(device)
    n = device_count()
    if not 0 <= i < n:
        _invalid_device(i, n)
    if i != 0 and not runtime_initialized():
        from . import events

        pre_init_set_device.append((i, events.user_site(sys._getframe(1))))
    _C.set_device(i)


def _invalid_device(i: int, n: int) -> None:
    """torch_neuronx.set_device's error; after init_process_group(backend="neuron") also an NP907 event."""
    message = f"Invalid device id: {i}. Valid range is 0 to {n - 1}"
    err = ValueError(message)
    dist = sys.modules.get(f"{__package__}.distributed")
    if dist is not None:
        dist.invalid_device_index(i, message, frame=sys._getframe(2))
        err._neuron_port_recorded = True  # the excepthook must not record it again
    raise err


# ---------------------------------------------------------------- runtime initialisation
# TorchNeuron starts the Neuron runtime lazily (torch_neuronx._lazy_init: nrt_init): with the first tensor on a
# neuron device, torch.neuron.init() or get_device_properties(); init_process_group(backend="neuron") starts it
# itself and asserts that it had not started before. set_device() and device_count() do not start it (April
# source: c10_neuron::set_device only checks and stores the index).
_runtime_initialized = False
# set_device(i != 0) calls made before the runtime started: (index, user site). init_process_group reports them.
pre_init_set_device: list[tuple[int, dict | None]] = []


def runtime_initialized() -> bool:
    """Whether the simulated Neuron runtime has started (see above): explicitly, or because memory was
    allocated on a neuron device."""
    if _runtime_initialized:
        return True
    if _C is None:
        return False
    if any(_C.memory_stats(i)["allocation.all.allocated"] > 0 for i in range(_C.device_count())):
        mark_runtime_initialized()
        return True
    return False


def mark_runtime_initialized() -> None:
    global _runtime_initialized
    _runtime_initialized = True


def set_process_device_count(n: int) -> None:
    """init_process_group(backend="neuron"): this process now sees ``n`` devices (one NeuronCore: 1) and the
    calling thread's current device is neuron:0 (a set_device(local_rank) before init no longer applies)."""
    _C.set_device_count(n)
    _C.set_device(0)


def is_initialized() -> bool:
    """Whether the Neuron runtime has started (torch_neuronx: is_neuron_runtime_initialized())."""
    return runtime_initialized()


def init() -> None:
    mark_runtime_initialized()


def _lazy_init() -> None:
    mark_runtime_initialized()


def _is_in_bad_fork() -> bool:
    return False


class device:
    """Context manager that changes the current neuron device (like torch.cuda.device)."""

    def __init__(self, device: Any):
        self.idx = -1 if device is None else _idx(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _C.current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev_idx != self.idx:
            _C.set_device(self.prev_idx)
        return False


class device_of(device):
    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "neuron" else -1)


def synchronize(device: Any = None) -> None:
    """Wait for all work on the device (the simulator runs synchronously, so this returns at once)."""
    torch.accelerator.synchronize(_idx(device))


def get_device_name(device: Any = None) -> str:
    return f"neuron:{_idx(device)}"


class _DeviceProperties(types.SimpleNamespace):
    def __repr__(self) -> str:
        return (f"_NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory // (1 << 20)}MB, "
                f"logical_nc_config={self.logical_nc_config})")


def get_device_properties(device: Any = None) -> _DeviceProperties:
    i = _idx(device)
    if not 0 <= i < device_count():
        raise ValueError(f"Invalid device id: {i}. Valid range is 0 to {device_count() - 1}")
    mark_runtime_initialized()  # torch_neuronx: "Initialize runtime if needed (required for HBM memory queries)"
    return _DeviceProperties(name=f"neuron:{i}", total_memory=HBM_PER_LOGICAL_CORE, logical_nc_config=2,
                             platform="trn2", simulated=True)


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float32, torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def _sleep(cycles: int) -> None:
    pass


# ---------------------------------------------------------------- RNG
def _gens():
    return tuple(_C.default_generator(i) for i in range(max(device_count(), 1)))


default_generators: tuple = ()


def manual_seed(seed: int) -> None:
    default_generators[_C.current_device()].manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for g in default_generators:
        g.manual_seed(int(seed))


def seed() -> None:
    default_generators[_C.current_device()].seed()


def seed_all() -> None:
    s = default_generators[0].seed() if default_generators else 0
    for g in default_generators[1:]:
        g.manual_seed(s)


def initial_seed() -> int:
    return default_generators[_C.current_device()].initial_seed()


def get_rng_state(device: Any = "neuron") -> torch.Tensor:
    return default_generators[_idx(device)].get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [g.get_state() for g in default_generators]


def set_rng_state(new_state: torch.Tensor, device: Any = "neuron") -> None:
    default_generators[_idx(device)].set_state(new_state.cpu() if new_state.device.type != "cpu" else new_state)


def set_rng_state_all(new_states) -> None:
    for g, s in zip(default_generators, new_states):
        g.set_state(s)


# ---------------------------------------------------------------- memory (counts bytes in the C++ allocator)
def memory_stats(device: Any = None) -> dict[str, int]:
    s = dict(_C.memory_stats(_idx(device)))
    s["active_bytes.all.current"] = s["allocated_bytes.all.current"]
    s["active_bytes.all.peak"] = s["allocated_bytes.all.peak"]
    s["num_alloc_retries"] = 0
    s["num_ooms"] = 0
    return dict(sorted(s.items()))


def memory_allocated(device: Any = None) -> int:
    return _C.memory_stats(_idx(device))["allocated_bytes.all.current"]


def max_memory_allocated(device: Any = None) -> int:
    return _C.memory_stats(_idx(device))["allocated_bytes.all.peak"]


def memory_reserved(device: Any = None) -> int:
    return _C.memory_stats(_idx(device))["reserved_bytes.all.current"]


def max_memory_reserved(device: Any = None) -> int:
    return _C.memory_stats(_idx(device))["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: Any = None) -> None:
    _C.reset_peak_memory_stats(_idx(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    pass


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    for i in range(device_count()):
        _C.empty_cache(i)


def mem_get_info(device: Any = None) -> tuple[int, int]:
    total = HBM_PER_LOGICAL_CORE
    return total - memory_reserved(device), total


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    s = memory_stats(device)
    mb = lambda b: f"{b / (1 << 20):10.2f} MiB"  # noqa: E731
    lines = [
        "=" * 60,
        f" neuron-port simulated memory summary, device neuron:{_idx(device)}",
        "=" * 60,
        f" Allocated memory (current) | {mb(s['allocated_bytes.all.current'])}",
        f" Allocated memory (peak)    | {mb(s['allocated_bytes.all.peak'])}",
        f" Reserved memory (current)  | {mb(s['reserved_bytes.all.current'])}",
        f" Reserved memory (peak)     | {mb(s['reserved_bytes.all.peak'])}",
        f" Allocations / frees        | {s['allocation.all.allocated']} / {s['allocation.all.freed']}",
        f" Device memory (HBM)        | {mb(HBM_PER_LOGICAL_CORE)}",
        "=" * 60,
    ]
    return "\n".join(lines) + "\n"


memory = types.SimpleNamespace()  # filled in register()


# ---------------------------------------------------------------- streams and events (no-ops, CUDA-like)
class Stream(torch.Stream):
    """A neuron stream. The simulator executes synchronously, so streams only keep CUDA-like semantics."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:
            return super().__new__(cls, **kwargs)
        with globals()["device"](device):
            return super().__new__(cls, device=torch.device("neuron", _C.current_device()), priority=priority)

    def wait_event(self, event) -> None:
        event.wait(self)

    def wait_stream(self, stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        if event is None:
            event = Event()
        event.record(self)
        return event


class Event:
    """A neuron event (CUDA-like). Records host time, so elapsed_time() measures wall time between
    two record() calls (the simulator executes ops synchronously)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self.blocking = blocking
        self.interprocess = interprocess
        self.device = torch.device("neuron", _C.current_device())
        self._t: float | None = None

    def record(self, stream=None) -> None:
        self._t = time.perf_counter()

    def wait(self, stream=None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end_event: "Event") -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._t is None or end_event._t is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._t - self._t) * 1000.0

    def __repr__(self) -> str:
        return f"<torch.neuron.Event {id(self):#x} on {self.device}>"


def _as_stream(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device: Any = None) -> Stream:
    return _as_stream(torch.accelerator.current_stream(_idx(device)))


def default_stream(device: Any = None) -> Stream:
    return Stream(stream_id=0, device_index=_idx(device), device_type=_NEURON_DEVICE_TYPE)


_NEURON_DEVICE_TYPE = 20  # c10::DeviceType::PrivateUse1


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    def __init__(self, stream):
        self.stream = stream
        self.prev = None

    def __enter__(self):
        if self.stream is not None:
            self.prev = torch.accelerator.current_stream(self.stream.device_index)
            torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None and self.prev is not None:
            torch.accelerator.set_stream(self.prev)
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)


# ---------------------------------------------------------------- torch_neuronx-style op tracking
def get_fallback_ops() -> list[str]:
    from . import events

    return sorted(op["op"] for op in events.op_table() if op["policy"] == "fallback")


def get_executed_ops() -> list[str]:
    from . import events

    return sorted(op["op"] for op in events.op_table())


def clear_op_tracking() -> None:
    _C.reset_stats()


_EXPORTS = [
    "is_available", "device_count", "current_device", "set_device", "is_initialized", "init", "_lazy_init",
    "_is_in_bad_fork", "device", "device_of", "synchronize", "get_device_name", "get_device_properties",
    "get_amp_supported_dtype", "is_bf16_supported", "_sleep", "manual_seed", "manual_seed_all", "seed",
    "seed_all", "initial_seed", "get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all",
    "memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "reset_peak_memory_stats", "reset_accumulated_memory_stats", "reset_max_memory_allocated", "empty_cache",
    "mem_get_info", "memory_summary", "Stream", "Event", "current_stream", "default_stream", "set_stream",
    "stream", "StreamContext", "get_fallback_ops", "get_executed_ops", "clear_op_tracking",
]


def register() -> types.ModuleType:
    """Load the C++ core and register the ``neuron`` device with torch. Idempotent."""
    global _C, default_generators
    if _C is not None:
        return torch.neuron
    _C = build.load_extension()
    _C.set_device_count(visible_core_count())
    torch.utils.rename_privateuse1_backend("neuron")
    mod = types.ModuleType("torch.neuron", "Simulated TorchNeuron device module (neuron-port).")
    g = globals()
    for name in _EXPORTS:
        setattr(mod, name, g[name])
    default_generators = _gens()
    mod.default_generators = default_generators
    mem = types.ModuleType("torch.neuron.memory")
    for name in ("memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
                 "max_memory_reserved", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
                 "empty_cache", "memory_summary", "mem_get_info"):
        setattr(mem, name, g[name])
    mod.memory = mem
    torch._register_device_module("neuron", mod)
    import sys

    sys.modules["torch.neuron.memory"] = mem
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
    return mod


_t0 = time.monotonic()
