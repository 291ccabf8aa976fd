"""Zero-copy CPU aliases of neuron tensors for the gloo collectives of backend.py, kept referenced while
gloo may still use them.

Gloo's worker thread drops its references to a collective's tensors when the work ends. When it holds the
last reference to a tensor that has a Python object, it takes the GIL to free that object; a thread that
takes the GIL while the interpreter finalises is ended by CPython (pthread_exit), whose forced unwind
through gloo's loop aborts the process: "terminate called without an active exception" (a rank that exits
right after an async collective; tests/simulator/distributed/test_exit.py). So the aliases of each
collective stay referenced here until its work completed, and at exit the list is kept for good.
"""

from __future__ import annotations

import atexit
import ctypes
import sys
import threading
from typing import Any

NEURON = "neuron"

# [work (None once let go), the CPU tensors it was given, id(alias) -> neuron tensor (None with the work),
#  whether the user waited on the work, the op's outputs as the user gave them (None with the work)]
_in_flight: list[list[Any]] = []
_lock = threading.Lock()


def cpu_alias(t):
    """A CPU tensor over the same host memory as the neuron tensor ``t`` (no copy), made by the C++ core:
    its storage holds the neuron storage from C++, with no Python object in it."""
    from ..device import runtime

    return runtime.C.cpu_alias(t)


def to_cpu(a):
    """An argument of a c10d op with its neuron tensors (also inside lists) replaced by CPU aliases."""
    import torch

    if isinstance(a, torch.Tensor):
        return cpu_alias(a) if a.device.type == NEURON else a
    if isinstance(a, list):
        return [to_cpu(x) for x in a]
    return a


def keep_until_done(work, args: list, originals: list | None = None, outputs=None) -> None:
    """Keep the CPU tensors of a c10d op's ``args`` referenced until gloo let go of them: its ``work`` (the
    op's boxed Work) is done and let go of (release_completed), and no C++ reference to them is left
    (``_use_count() == 1``: this list's Python objects only), so that dropping them here frees them in this
    thread. ``originals``: the op's arguments as the user gave them (the neuron tensors the aliases stand
    for, see ``device_future``); ``outputs``: the op's output argument as the user gave it (``work_future``)."""
    from torch._C._distributed_c10d import Work

    tensors = _tensors(args)
    users = dict(zip(map(id, tensors), _tensors(originals))) if originals is not None else {}
    release_completed()
    with _lock:
        _in_flight.append([Work.unbox(work), tensors, {k: v for k, v in users.items() if v.device.type == NEURON},
                           False, outputs])


def waited(work) -> None:
    """The user's ``work.wait()`` returned: the collective is done, whatever ``is_completed()`` says."""
    with _lock:
        for entry in _in_flight:
            if entry[0] is work:
                entry[3] = True


def release_completed() -> None:
    """Let go of the works that completed and that only this list holds, then of the CPU tensors that only
    this list holds (in the calling thread: a user's, never gloo's)."""
    if not _in_flight:
        return
    with _lock:
        for entry in _in_flight:
            # 2: the entry's slot and getrefcount's argument: no one else holds the Python work
            if entry[0] is not None and (entry[3] or entry[0].is_completed()) and sys.getrefcount(entry[0]) <= 2:
                entry[0] = entry[2] = entry[4] = None
        _in_flight[:] = [entry for entry in _in_flight if not _released(entry)]


def device_future(work, fut):
    """``work.get_future()`` with the user's neuron tensors as its value, as on a device backend (NCCL,
    TorchNeuron): gloo's future holds the CPU aliases, and a DDP comm hook that combines the value with a
    neuron tensor (error feedback, a scale kept on the device) would fail on mixed devices. A work that
    is not a neuron collective in flight keeps its own future."""
    with _lock:
        users = next((entry[2] for entry in _in_flight if entry[0] is work), None)
    if not users:
        return fut
    return fut.then(lambda done: _to_user(done.value(), users))


def work_future(work):
    """The future of a neuron collective whose gloo work has none (gloo's ``reduce_scatter`` and
    ``reduce_scatter_tensor``: "Work::getFuture not implemented."), as a device backend (NCCL, TorchNeuron)
    gives it: the work is waited for, and the future holds the op's output tensors (a list), on the device.
    None for a work that is not a neuron collective in flight (its own error stands)."""
    import torch

    with _lock:
        outputs = next((entry[4] for entry in _in_flight if entry[0] is work), None)
    if outputs is None:
        return None
    work.wait()
    fut = torch.futures.Future()
    fut.set_result(list(outputs) if isinstance(outputs, (list, tuple)) else [outputs])
    return fut


def _to_user(value, users: dict):
    if isinstance(value, (list, tuple)):
        return type(value)(_to_user(v, users) for v in value)
    return users.get(id(value), value)


def _tensors(args) -> list:
    import torch

    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, list):
            out.extend(_tensors(a))
    return out


def _released(entry: list[Any]) -> bool:
    return entry[0] is None and all(t._use_count() == 1 for t in entry[1])


@atexit.register
def _keep_in_flight_for_good() -> None:
    # One reference nothing releases: module teardown must not drop the last Python reference of an alias
    # gloo still holds. The process ends without freeing them.
    with _lock:
        if _in_flight:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(_in_flight))
