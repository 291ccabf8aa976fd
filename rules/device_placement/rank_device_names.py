"""A ``set_device`` argument that holds a rank's device, for ``ranks.py``: ``device = f"cuda:{local_rank}"``
(or ``torch.device`` of one) just before ``set_device(device)`` in the same block makes the call
``set_device(local_rank)``, NP502's to remove. Renamed instead (NP201), NP101's fix made it
``torch.neuron.set_device("neuron")``, which NP502 then asked to drop: a fix creating a finding another asks
to undo (issue 34)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.names import dotted_name, walk


def is_rank_device(value: Optional[cst.BaseExpression], rank_templates: set) -> bool:
    """``value`` is one of ``rank_templates`` (``f"cuda:{rank}"`` ...), or ``torch.device`` of one."""
    if type(value) is cst.Call and dotted_name(value.func) == "torch.device" and len(value.args) == 1:
        value = value.args[0].value
    return value in rank_templates


def holds_rank_device(node: cst.BaseExpression, call: Optional[cst.Call], statements: dict,
                      rank_templates: set) -> bool:
    """``node`` (the argument of ``call``) is a name whose last assignment before ``call``, in the same block,
    is a rank's device. ``statements``: a call that is a whole statement -> (its line, the small statement,
    its block). Any other binding of the name on the way (a tuple target, ``+=``) is not followed: False."""
    name = dotted_name(node)
    owner, _, block = statements.get(call, (None, None, None))
    body = list(getattr(block, "body", ()))
    if name is None or owner not in body:
        return False
    for statement in reversed(body[:body.index(owner)]):
        for small in reversed(getattr(statement, "body", ())):
            if type(small) is cst.Assign and any(dotted_name(t.target) == name for t in small.targets):
                return is_rank_device(small.value, rank_templates)
            if type(small) in (cst.Assign, cst.AugAssign, cst.AnnAssign) and any(
                    dotted_name(n) == name for n in walk(small) if type(n) in (cst.Name, cst.Attribute)):
                return False
    return False
