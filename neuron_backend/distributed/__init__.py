"""``torch.distributed`` with ``backend="neuron"`` on the simulated device, by concern:

* ``backend.py``: the ``neuron`` c10d backend (gloo underneath), the PrivateUse1 c10d kernels and
  the Python API checks; ``register()``;
* ``cpu_aliases.py``: the zero-copy CPU aliases gloo runs on, kept until gloo let go of them;
* ``limits.py``: TorchNeuron's process-group limits (NP907 ``distributed`` events);
* ``accounting.py``: the collective counts (``distributed`` events with ``count`` and ``bytes``);
* ``setup.py``: one NeuronCore per process, the setup of the first ``neuron`` process group.

Each rank writes its own events file (``neuron-events-rank<RANK>-pid<PID>.jsonl``).
"""

from __future__ import annotations

from .accounting import collective_stats
from .backend import BACKEND_NAME, register

__all__ = ["register", "BACKEND_NAME", "collective_stats"]
