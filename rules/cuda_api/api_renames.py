"""The renames NP201 (``api_calls.py``) makes: a ``torch.cuda.<api>`` reference to its ``torch.neuron``
spelling (keeping the user's name for torch) or, with ``--target accelerator``, its ``torch.accelerator``
one, as ``tables.TORCH_CUDA_API`` says."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.cuda_api.tables import TORCH_CUDA_API
from neuron_port.rules.helpers.names import dotted_name
from neuron_port.rules.helpers.nodes import expr, replace_attr_chain_head
from neuron_port.rules.no_port.cuda_only_guards import unsafe_flip_note
from neuron_port.rules.spec import PythonRule


def neuron_spelling(context, node: cst.BaseExpression, key: str):
    """(the neuron spelling of the reference, imports) on the neuron target."""
    mapping = TORCH_CUDA_API[key]
    head = dotted_name(node)
    if head is not None and head.split(".")[0] in context.torch_names and mapping.neuron == key:
        # keep the user's spelling of torch: th.cuda.x -> th.neuron.x
        replacement = replace_attr_chain_head(node, "cuda", "neuron")
        if replacement is not None:
            return replacement, ()
    torch_name, imports = context.torch_module_name()
    return expr(f"{torch_name}.neuron.{mapping.neuron}"), imports


def rename(rule: PythonRule, node: cst.BaseExpression, key: str, unsafe: Optional[str] = None) -> None:
    """Report the reference with its rename for the target (``rule`` is NP201), or, on the accelerator
    target, without a fix where ``torch.accelerator`` has no spelling for it; ``unsafe``: the code not
    known to run on Trainium whose running the renamed test would change (the fix is then unsafe)."""
    safety = "safe" if unsafe is None else "unsafe"
    note = "" if unsafe is None else unsafe_flip_note(unsafe)
    mapping = TORCH_CUDA_API[key]
    if rule.context.target == "accelerator":
        if mapping.accelerator is None:
            rule.report(
                node,
                f"`torch.cuda.{key}` has no torch.accelerator equivalent; it is `torch.neuron.{mapping.neuron}` "
                "on Trainium: guard it by device type",
                effort="low",
            )
            return
        torch_name, imports = rule.context.torch_module_name()
        new = mapping.accelerator.replace("torch.", f"{torch_name}.", 1)
        rule.report(node, rule.MESSAGE.format(api=key, new=mapping.accelerator) + note,
                    replacement=expr(new), imports=imports, safety=safety)
        return
    new_name = f"torch.neuron.{mapping.neuron}"
    message = rule.MESSAGE.format(api=key, new=new_name) + (f" ({mapping.note})" if mapping.note else "") + note
    replacement, imports = neuron_spelling(rule.context, node, key)
    rule.report(node, message, replacement=replacement, imports=imports, safety=safety)
