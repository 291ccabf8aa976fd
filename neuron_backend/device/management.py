"""Device management of ``torch.neuron`` (mirrors torch_neuronx's neuron.py): device count and index,
``set_device``, the runtime's start (``init``, ``is_initialized``), the ``device`` context manager,
device properties, and torch_neuronx's op tracking (``get_fallback_ops`` ...)."""

from __future__ import annotations

import sys
import types
from typing import Any

import torch

from . import runtime
from .runtime import HBM_PER_LOGICAL_CORE, mark_runtime_initialized, runtime_initialized

# The module of distributed/ that records an NP907 event for a device index of another process. Looked up
# in sys.modules, not imported: it is loaded once enable() registered the distributed backend.
DISTRIBUTED_SETUP_MODULE = __name__.rsplit(".", 2)[0] + ".distributed.setup"


def index(device: Any = None) -> int:
    """The device index of ``device`` (None: the current device; an int, "neuron:1", a torch.device)."""
    if device is None:
        return runtime.C.current_device()
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")
        return runtime.C.current_device() if device.index is None else device.index
    raise TypeError(f"Invalid device: {device!r}")


def is_available() -> bool:
    try:
        return device_count() > 0
    except Exception:  # noqa: BLE001 - mirrors torch_neuronx
        return False


def device_count() -> int:
    return runtime.C.device_count()


def current_device() -> int:
    return runtime.C.current_device()


def set_device(device: Any) -> None:
    i = index(device)
    n = device_count()
    if not 0 <= i < n:
        _invalid_device(i, n)
    dist = sys.modules.get(DISTRIBUTED_SETUP_MODULE)
    own = dist.process_device() if dist is not None else None
    if own is not None and i != own:  # c10_neuron::set_device: only the process's own core
        message = f"Device index {i} is out of range. Valid range is {own} to {own} for this process"
        dist.invalid_device_index(i, message, frame=sys._getframe(1))
        raise ValueError(message)
    if not runtime_initialized():
        from .. import events

        runtime.pre_init_set_device.append((i, events.user_site(sys._getframe(1))))
    runtime.C.set_device(i)


def _invalid_device(i: int, n: int) -> None:
    """torch_neuronx.set_device's error; after init_process_group(backend="neuron") also an NP907 event."""
    message = f"Invalid device id: {i}. Valid range is 0 to {n - 1}"
    err = ValueError(message)
    dist = sys.modules.get(DISTRIBUTED_SETUP_MODULE)
    if dist is not None:
        dist.invalid_device_index(i, message, frame=sys._getframe(2))
        err._neuron_port_recorded = True  # the excepthook must not record it again
    raise err


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
        self.idx = -1 if device is None else index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = runtime.C.current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev_idx != self.idx:
            runtime.C.set_device(self.prev_idx)
        return False


class device_of(device):
    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "neuron" else -1)


def synchronize(device: Any = None) -> None:
    """Wait for all work on the device (the simulator runs synchronously, so this returns at once)."""
    torch.accelerator.synchronize(index(device))


def get_device_name(device: Any = None) -> str:
    return f"neuron:{index(device)}"


class _DeviceProperties(types.SimpleNamespace):
    def __repr__(self) -> str:
        return (f"_NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory // (1 << 20)}MB, "
                f"logical_nc_config={self.logical_nc_config})")


def get_device_properties(device: Any = None) -> _DeviceProperties:
    i = index(device)
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


# ---------------------------------------------------------------- torch_neuronx-style op tracking
def get_fallback_ops() -> list[str]:
    from .. import events

    return sorted(op["op"] for op in events.op_table() if op["policy"] == "fallback")


def get_executed_ops() -> list[str]:
    from .. import events

    return sorted(op["op"] for op in events.op_table())


def clear_op_tracking() -> None:
    runtime.C.reset_stats()
