"""What the simulator needs (torch, a C++ compiler, ninja), for `neuron-port doctor`."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Requirement:
    name: str
    found: Optional[str]  # where it was found (or "found"); None when missing
    hint: str  # what to do when it is missing

    def line(self) -> str:
        return f"{self.name}: {self.found or 'missing: ' + self.hint}"


def requirements() -> list[Requirement]:
    found = [Requirement("torch", "found" if importlib.util.find_spec("torch") else None,
                         "pip install torch==2.13.0 (the `sim` extra)")]
    for tool, hint in (("g++", "install a C++ compiler (e.g. apt-get install g++)"), ("ninja", "pip install ninja")):
        # pip's ninja lives next to the interpreter of a venv that is not activated
        found.append(Requirement(tool, shutil.which(tool) or shutil.which(tool, path=os.path.dirname(sys.executable)),
                                 hint))
    return found


def real_trainium_notes() -> list[str]:
    if importlib.util.find_spec("torch_neuronx") is not None:
        return ["torch_neuronx: installed: this is a real Trainium setup; the simulator will not register"]
    return []
