"""Shape-only runs: the user's program runs with every ``neuron`` tensor fake (PyTorch's
``FakeTensorMode``: shapes, dtypes and devices, no storage, no compute), and a dispatch mode on top
accounts each call through the C++ core's own accounting (the same op table, policy, signatures,
sites, records and events file as a real run; EVENTS.md), so everything downstream is shared.

Switched on by ``NEURON_PORT_SHAPE_ONLY=1`` (``neuron-port check --shape-only`` sets it) when the
simulator is enabled. By concern:

* ``mode.py``: the dispatch mode: which calls are device calls, how each reaches the accounting
  (as the dispatcher would route it on a real neuron tensor), CPU calls run for real;
* ``values.py``: what a program reads from the device (``.item()``, ``bool()``, copies to the CPU:
  placeholders) and data-dependent output shapes (``nonzero``, boolean masks, ``unique``: size rules),
  each site recorded;
* ``memory.py``: device memory from fake storages (allocation when a storage first appears, free when
  its last tensor dies), counted by the C++ core's memory statistics.
"""

from __future__ import annotations

import os

ENV = "NEURON_PORT_SHAPE_ONLY"
_active = False


def requested() -> bool:
    return os.environ.get(ENV, "").strip() == "1"


def is_active() -> bool:
    return _active


def start() -> None:
    """Enter the fake mode and the recording mode for the rest of the process (idempotent)."""
    global _active
    if _active:
        return
    from ..events import state
    from .mode import enter

    enter()
    state.mode = "shape_only"
    _active = True
