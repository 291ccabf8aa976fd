"""The simulator under TorchNeuron's import name, in the processes `neuron-port check` runs.

transformers (``is_torch_neuron_available``), accelerate (``is_neuron_available``) and diffusers
(``is_torch_neuronx_available``) choose the ``neuron`` device only when ``importlib.util.find_spec
("torch_neuronx")`` finds a module (diffusers also asks ``importlib.metadata`` for its version), so without
this a Trainer, an ``Accelerator`` or a pipeline under `check` would train on the CPU, where on Trainium it
trains on ``neuron``. ``install()`` appends a finder to ``sys.meta_path`` that answers for the module
``torch_neuronx`` (the package beside this file: torch.neuron's simulated functions under TorchNeuron's
names) and for the distribution ``torch-neuronx``. A program that imports ``torch_neuronx`` before torch
(which works on Trainium) finds ``early/torch_neuronx``, on the PYTHONPATH `check` gives its command: it
imports torch, whose autoload installs the finder, and puts this package in its place.

Only the torch.backends autoload calls ``install()``, when NEURON_PORT_SIMULATE=1 (set by `check` for the
command it runs, inherited by its torchrun ranks and subprocesses) and the simulator is enabled: an
ordinary ``import torch`` never gets a ``torch_neuronx`` from us, nor does a process that calls
``neuron_backend.enable()`` itself. The finder is the last on ``sys.meta_path`` so a real install would
win; ``enable()`` refuses to run beside one, so it is never reached there.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import re
import sys
from pathlib import Path
from typing import Iterable, Optional

import torch

__all__ = ["install", "installed", "distribution_version", "MODULE", "DISTRIBUTION"]

MODULE = "torch_neuronx"
DISTRIBUTION = "torch-neuronx"
HERE = Path(__file__).resolve().parent


def distribution_version() -> str:
    """TorchNeuron's version for this torch: its family follows torch's minor (Neuron 2.33 ships
    torch-neuronx 2.13.3.0 for PyTorch 2.13 and 2.14.3.0 for 2.14); the local label says it is ours."""
    major, minor = torch.__version__.split(".")[:2]
    return f"{major}.{minor}.3.0+neuronport"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


class SimulatedDistribution(importlib.metadata.Distribution):
    """The ``torch-neuronx`` distribution as ``importlib.metadata`` reads it (name, version, top level)."""

    def read_text(self, filename: str) -> Optional[str]:
        if filename in ("METADATA", "PKG-INFO"):
            major_minor = ".".join(torch.__version__.split(".")[:2])
            return (
                "Metadata-Version: 2.1\n"
                f"Name: {DISTRIBUTION}\n"
                f"Version: {distribution_version()}\n"
                "Summary: neuron-port's simulated TorchNeuron (the neuron device of `neuron-port check`), "
                "not AWS's package\n"
                f"Requires-Dist: torch=={major_minor}.*\n"
            )
        if filename == "top_level.txt":
            return MODULE + "\n"
        return None

    def locate_file(self, path) -> Path:
        return HERE / path


class TorchNeuronxFinder:
    """A meta path finder for the one top-level module ``torch_neuronx`` and its distribution."""

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname != MODULE:  # submodules are found through the package's __path__
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [str(HERE)])

    def find_distributions(self, context=None) -> Iterable[importlib.metadata.Distribution]:
        name = getattr(context, "name", None)
        if name is not None and _normalized(name) != MODULE:
            return iter(())
        return iter((SimulatedDistribution(),))

    def invalidate_caches(self) -> None:
        pass


def installed() -> bool:
    return any(isinstance(finder, TorchNeuronxFinder) for finder in sys.meta_path)


def install() -> None:
    """Make ``torch_neuronx`` importable in this process (idempotent)."""
    if not installed():
        sys.meta_path.append(TorchNeuronxFinder())
