"""Zero-copy CPU aliases of neuron tensors for the gloo collectives of distributed.py, kept referenced while
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
import threading
from typing import Any

NEURON = "neuron"

_in_flight: list[tuple[Any, list]] = []  # (work, the CPU aliases it was given)
_lock = threading.Lock()


def cpu_alias(t):
    """A CPU tensor over the same host memory as the neuron tensor ``t`` (no copy), made by the C++ core:
    its storage holds the neuron storage from C++, with no Python object in it."""
    from . import device

    return device._C.cpu_alias(t)


def to_cpu(a):
    """An argument of a c10d op with its neuron tensors (also inside lists) replaced by CPU aliases."""
    import torch

    if isinstance(a, torch.Tensor):
        return cpu_alias(a) if a.device.type == NEURON else a
    if isinstance(a, list):
        return [to_cpu(x) for x in a]
    return a


def keep_until_done(work, aliases: list) -> None:
    """Keep ``aliases`` referenced until ``work`` (the c10d op's boxed Work) completed; dropping a completed
    one is safe while the interpreter runs (the worker may then free it, taking the GIL as any thread can)."""
    from torch._C._distributed_c10d import Work

    work = Work.unbox(work)
    with _lock:
        _in_flight[:] = [entry for entry in _in_flight if not entry[0].is_completed()]
        _in_flight.append((work, aliases))


@atexit.register
def _keep_in_flight_for_good() -> None:
    # One reference nothing releases: module teardown must not drop the last Python reference of an alias
    # gloo still holds. The process ends without freeing them.
    with _lock:
        if _in_flight:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(_in_flight))
