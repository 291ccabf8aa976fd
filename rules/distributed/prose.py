"""Strings that are prose, never configuration: docstrings and the arguments of print / log / getattr calls.

``SkipProse`` is the base of the NP5xx rules that read string literals (NP501, NP505, NP507).
"""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.helpers.names import dotted_name, last_segment
from neuron_port.rules.spec import PythonRule


class SkipProse(PythonRule):
    """Tracks strings that are docstrings or arguments of print/log calls (never configuration)."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._prose: set[cst.CSTNode] = set()

    def visit_Expr(self, node: cst.Expr) -> None:
        self._prose.add(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = last_segment(func)
        receiver = (dotted_name(func.value) or "").lower() if isinstance(func, cst.Attribute) else ""
        if name in ("print", "getattr", "hasattr") and isinstance(func, cst.Name) or "log" in receiver:
            for arg in node.args:
                self._prose.add(arg.value)
        self._on_call(node)

    def _on_call(self, node: cst.Call) -> None:
        pass
