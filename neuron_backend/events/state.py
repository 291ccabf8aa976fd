"""The state of this process's events, shared by the modules of the events package: when the process
started and how it ended, the C++ core, and what Python records besides the core's counters (the
``record()`` events and the unsupported features).

One re-entrant lock guards all of it, as it did when the package was one module: a snapshot being
written holds it while it reads every table, so a new site, event or unsupported feature waits for
the write instead of changing a table under it.
"""

from __future__ import annotations

import os
import threading
import time

lock = threading.RLock()
started = time.time()
status = "running"  # then "exited", "exception" or "sigterm" (writer.flush(status) sets it)
exception: dict | None = None  # the uncaught exception that ended the process (hooks.py)
install_pid = os.getpid()  # the process that installed the hooks: a forked child writes no events file
mode = "real"  # "shape_only" once neuron_backend/shape_only/ runs the process's tensors fake
C = None  # the C++ core, connected by hooks.install()
recorded: list[dict] = []  # compile / distributed / other events from record()
unsupported: dict[tuple, dict] = {}  # (feature, op, site id) -> event
unsupported_slots: dict[tuple, int] = {}  # its count's slot in the records' counters file
