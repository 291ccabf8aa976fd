"""One analysis object per file and pass, shared by the rules that ask for it.

A per-file analysis (rank devices, capability checks, CUDA-only guards) is built the first time a rule's
``leave_Module`` asks for it and reused by every other rule of the same pass; a new pass (the engine
runs on the module the previous pass's fixes produced) gets a new module node and so a new analysis.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Generic, TypeVar

import libcst as cst

from neuron_port.rules.helpers.names import walk

Analysis = TypeVar("Analysis")


class PerFileAnalysis(Generic[Analysis]):
    """``analysis(context, module)``: ``build(context, module)`` once per file context and module node.
    The analysis must keep the node it was built from as ``.module``."""

    def __init__(self, build: Callable[[Any, cst.Module], Analysis]) -> None:
        self._build = build
        self._cache: "weakref.WeakKeyDictionary[object, Analysis]" = weakref.WeakKeyDictionary()

    def __call__(self, context: Any, module: cst.Module) -> Analysis:
        found = self._cache.get(context)
        if found is None or found.module is not module:  # type: ignore[attr-defined]
            found = self._build(context, module)
            self._cache[context] = found
        return found


class ModuleWalk:
    """Every node of a module in ``walk`` order, made once per file and pass for the analyses that read
    the whole module (CUDA-only guards, kept ``torch.cuda`` calls)."""

    def __init__(self, context: Any, module: cst.Module) -> None:
        self.module = module
        self.nodes = list(walk(module))


# The walk of a module, once per file and pass.
module_walk = PerFileAnalysis(ModuleWalk)
