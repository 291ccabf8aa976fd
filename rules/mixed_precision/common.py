"""Shared by the NP3xx modules: the qualified names of autocast and GradScaler, reading an autocast
call's device type and dtype, porting ``torch.cuda.amp.autocast(...)`` to ``torch.autocast(...)``, and
the device type (and fix safety) the ported code gets on each target.

The call-editing helpers it uses (``rules/helpers/calls.py``) keep the layout of multi-line calls:
separators and trailing commas are copied from the call being edited.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.calls import arg_named, has_star_args, insert_arg, keyword_arg, quote_of
from neuron_port.rules.helpers.nodes import expr, replace_string, string_value

Imports = tuple[tuple[str, Optional[str], Optional[str]], ...]

# -- names -----------------------------------------------------------------------------------------
AUTOCAST_CUDA = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
AUTOCAST_GENERIC = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
# positional parameters of torch.cuda.amp.autocast, in order (torch.autocast orders them differently)
CUDA_AUTOCAST_PARAMS = ("enabled", "dtype", "cache_enabled")

GRAD_SCALER_CUDA = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
GRAD_SCALER_GENERIC = frozenset({"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler", "torch.GradScaler"})


# -- the device type of the ported code ------------------------------------------------------------
def device_type_expr(
    context, quote: str = '"', like: Optional[cst.SimpleString] = None
) -> tuple[cst.BaseExpression, Imports]:
    """The device type the ported code names: ``"neuron"``, or on the accelerator target the type of
    the current accelerator (``torch.accelerator.current_accelerator().type``, ``"cuda"`` on a GPU
    host and ``"neuron"`` on Trainium)."""
    if context.target == "accelerator":
        torch_name, imports = context.torch_module_name()
        return expr(f"{torch_name}.accelerator.current_accelerator().type"), imports
    if like is not None:
        return replace_string(like, "neuron"), ()
    return cst.SimpleString(f"{quote}neuron{quote}"), ()


ACCELERATOR_CAVEAT = " (unsafe: None on CPU-only hosts)"


def target_safety(context) -> str:
    """Safe on the neuron target; unsafe on the accelerator target, where the device type becomes
    ``torch.accelerator.current_accelerator().type``: that raises on a CPU-only host, where the
    original ``"cuda"`` region or scaler merely disabled itself with a warning (NP101 rules the same)."""
    return "unsafe" if context.target == "accelerator" else "safe"


def is_cuda_literal(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.SimpleString) and string_value(node) == "cuda"


# -- autocast calls --------------------------------------------------------------------------------
def port_cuda_autocast(call: cst.Call, context) -> Optional[tuple[cst.Call, Imports]]:
    """``torch.cuda.amp.autocast(a, b)`` -> ``torch.autocast(device_type=..., enabled=a, dtype=b)``."""
    if has_star_args(call):
        return None
    args = []
    position = 0
    for arg in call.args:
        if arg.keyword is None:
            if position >= len(CUDA_AUTOCAST_PARAMS):
                return None
            arg = arg.with_changes(
                keyword=cst.Name(CUDA_AUTOCAST_PARAMS[position]),
                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                      whitespace_after=cst.SimpleWhitespace("")),
            )
            position += 1
        args.append(arg)
    torch_name, imports = context.torch_module_name()
    device, more = device_type_expr(context, quote_of(call))
    new = call.with_changes(func=expr(f"{torch_name}.autocast"), args=args)
    new = insert_arg(new, 0, keyword_arg("device_type", device))
    return new, tuple(dict.fromkeys(imports + more))


def autocast_device(call: cst.Call) -> Optional[cst.Arg]:
    return arg_named(call, "device_type", 0)


def autocast_dtype(call: cst.Call) -> Optional[cst.Arg]:
    # torch.cuda.amp.autocast(enabled, dtype, ...) and torch.autocast(device_type, dtype, ...) both
    # take the dtype second
    return arg_named(call, "dtype", 1)
