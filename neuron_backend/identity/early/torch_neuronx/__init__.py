"""``import torch_neuronx`` before ``import torch``, in the processes `neuron-port check` runs.

On Trainium ``import torch_neuronx`` works first (the package imports torch itself). Under `check` the
simulated ``torch_neuronx`` is found by a finder that the torch.backends autoload installs, so before torch
is imported nothing answers for it. `check` appends this folder's parent to the child's PYTHONPATH (after
the user's own entries; neuron_port/check/runner.py): this package imports torch (the autoload enables the
simulator when NEURON_PORT_SIMULATE=1), then puts the simulated package (neuron_backend/identity/
torch_neuronx) in its place. Where the simulator did not enable (a real torch-neuronx installed: the
simulator refuses to run beside it), the real package is loaded instead; with neither, the import fails
as it would without `check`.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

import torch  # noqa: F401  (the torch.backends autoload: neuron_backend._autoload)

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _spec():
    try:
        import neuron_backend
        from neuron_backend.identity import TorchNeuronxFinder
    except ImportError:
        neuron_backend = None
    if neuron_backend is not None and neuron_backend.is_enabled():
        return TorchNeuronxFinder().find_spec(__name__)
    # not simulated here: the real package, if any (this folder left out)
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    return importlib.machinery.PathFinder.find_spec(__name__, path)


_spec_found = _spec()
if _spec_found is None:
    raise ModuleNotFoundError(f"No module named {__name__!r}", name=__name__)
_module = importlib.util.module_from_spec(_spec_found)
sys.modules[__name__] = _module  # the import statement returns what sys.modules holds at the end
_spec_found.loader.exec_module(_module)
