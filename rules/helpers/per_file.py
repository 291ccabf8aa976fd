"""One analysis object per file and pass, shared by the rules that ask for it.

A per-file analysis (rank devices, capability checks, CUDA-only guards) is built the first time a rule's
``leave_Module`` asks for it and reused by every other rule of the same pass; a new pass (the engine
runs on the module the previous pass's fixes produced) gets a new module node and so a new analysis.

The analyses are kept in the file context itself (``context.shared``), so they go when the context goes.
(They were kept in a WeakKeyDictionary keyed by the context, but most analyses hold their context, so no
key ever died: every tree a process had analysed stayed in memory, a worker's whole run long.)
"""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

import libcst as cst

from neuron_port.rules.helpers.names import walk_all

Analysis = TypeVar("Analysis")

# the key of ``FileContext.shared`` under which the analyses of a file and pass are kept
ANALYSES = "per-file analyses"


class PerFileAnalysis(Generic[Analysis]):
    """``analysis(context, module)``: ``build(context, module)`` once per file context and module node.
    The analysis must keep the node it was built from as ``.module``."""

    def __init__(self, build: Callable[[Any, cst.Module], Analysis]) -> None:
        self._build = build

    def __call__(self, context: Any, module: cst.Module) -> Analysis:
        cache = context.shared.setdefault(ANALYSES, {})
        found = cache.get(self)
        if found is None or found.module is not module:  # type: ignore[attr-defined]
            found = self._build(context, module)
            cache[self] = found
        return found


class ModuleWalk:
    """Every node of a module in ``walk`` order, made once per file and pass for the analyses that read
    the whole module (CUDA-only guards, kept ``torch.cuda`` calls)."""

    def __init__(self, context: Any, module: cst.Module) -> None:
        self.module = module
        self.nodes = walk_all(module)


# The walk of a module, once per file and pass.
module_walk = PerFileAnalysis(ModuleWalk)
