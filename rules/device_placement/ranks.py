"""Ranks: whether an expression is the process's rank used as a device index (``local_rank``,
``args.gpu``, ``int(os.environ["LOCAL_RANK"])``, ``dist.get_rank()``).

Under torchrun TorchNeuron gives each process one NeuronCore, so NP101, NP103 and NP106 turn a
rank-indexed device into the plain ``neuron``; NP201 and the NP5xx rules (NP502, NP503) ask the same question.
"""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.device_placement.tables import RANK_CALLS, RANK_ENV_VARS, RANK_NAME_RE
from neuron_port.rules.helpers.names import dotted_name, last_segment
from neuron_port.rules.helpers.nodes import string_value


def is_rank_expression(node: cst.BaseExpression, loop_names: frozenset[str] | set[str] = frozenset()) -> bool:
    """True for a process's rank used as a device index: ``local_rank``, ``args.gpu``, ``self.rank``,
    ``int(os.environ["LOCAL_RANK"])``, ``os.environ.get("LOCAL_RANK", 0)``, ``dist.get_rank()``.

    A plain name bound by a ``for`` loop or comprehension (``for gpu in range(n)``) iterates over
    devices and is not a rank.
    """
    if isinstance(node, cst.Name):
        return node.value not in loop_names and bool(RANK_NAME_RE.match(node.value))
    if isinstance(node, cst.Attribute):
        return bool(RANK_NAME_RE.match(node.attr.value))
    if isinstance(node, cst.Call):
        func = node.func
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if isinstance(func, cst.Name) and func.value in ("int", "str") and len(node.args) == 1 and positional:
            return is_rank_expression(positional[0].value, loop_names)
        if last_segment(func) in RANK_CALLS:
            return True
        name = dotted_name(func) or ""
        if (name.endswith("environ.get") or name.endswith("getenv")) and positional:
            return string_value(positional[0].value) in RANK_ENV_VARS
        return False
    if isinstance(node, cst.Subscript):
        if not (dotted_name(node.value) or "").endswith("environ") or len(node.slice) != 1:
            return False
        index = node.slice[0].slice
        return isinstance(index, cst.Index) and string_value(index.value) in RANK_ENV_VARS
    return False
