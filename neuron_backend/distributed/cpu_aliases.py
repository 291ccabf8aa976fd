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
import threading
from typing import Any

NEURON = "neuron"

_in_flight: list[tuple[Any, list]] = []  # (work, the CPU tensors it was given)
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


def keep_until_done(work, args: list) -> None:
    """Keep the CPU tensors of a c10d op's ``args`` referenced until gloo let go of them: its ``work`` (the
    op's boxed Work) completed and no C++ reference to them is left (``_use_count() == 1``: this list's
    Python objects only), so that dropping them here frees them in this thread."""
    from torch._C._distributed_c10d import Work

    tensors = _tensors(args)
    with _lock:
        _in_flight[:] = [entry for entry in _in_flight if not _released(entry)]
        _in_flight.append((Work.unbox(work), tensors))


def _tensors(args) -> list:
    import torch

    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, list):
            out.extend(_tensors(a))
    return out


def _released(entry: tuple[Any, list]) -> bool:
    work, tensors = entry
    return work.is_completed() and all(t._use_count() == 1 for t in tensors)


@atexit.register
def _keep_in_flight_for_good() -> None:
    # One reference nothing releases: module teardown must not drop the last Python reference of an alias
    # gloo still holds. The process ends without freeing them.
    with _lock:
        if _in_flight:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(_in_flight))
