"""Whether the text a ``.startswith("cuda")`` / ``.endswith(...)`` test reads is this process's device.

A device string is renamed only where it names the device of this process. A record field looked up by
a key says what it holds: ``cfg["device"]``, ``os.environ.get("ACCELERATOR")`` name a device (kept a
device test); ``str(node["value"])`` patching the constants of a CUDA-traced TorchScript archive, or
``entry["name"]`` of a checkpoint index, is data whose device is someone else's: renaming its ``"cuda"``
would make the test match nothing. The keys are judged by what names a device (an allow list).
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.names import last_segment
from neuron_port.rules.helpers.nodes import string_value

_DEVICE_WORD = re.compile(r"(^|_)(device|devices|dev|accelerator|backend|platform|place|placement|map_location)"
                          r"(_|$)|(^|_)(device|dev)_?(type|kind|name|str|string|id)(_|$)|^type$", re.IGNORECASE)
_WRAPPERS = ("str", "repr", "format")
_STRING_METHODS = ("lower", "upper", "strip", "casefold")


def _named(node: cst.BaseExpression) -> Optional[str]:
    """The name a value is known by: its last segment, or the string key it is looked up by."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        return last_segment(node)
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        index = node.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            return string_value(index.value)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get" \
            and node.args and isinstance(node.args[0].value, cst.SimpleString):
        return string_value(node.args[0].value)  # os.environ.get("DEVICE", ...), cfg.get("device")
    return None


def names_a_device(node: cst.BaseExpression) -> bool:
    """False when the receiver of a prefix test is a field of a record looked up by a key that names no
    device (``str(node["value"])``, ``entry.get("name")``): the string describes data (a serialized
    archive's constants, a checkpoint's keys), not this process. Every other receiver (a device, a name,
    an attribute) stays a device test, as before."""
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _WRAPPERS \
                and len(node.args) == 1:
            node = node.args[0].value  # str(x.device)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value in _STRING_METHODS:
            node = node.func.value  # args.device.lower()
        else:
            break
    if not (isinstance(node, cst.Subscript) or (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                                                and node.func.attr.value == "get")):
        return True
    key = _named(node)
    return key is None or bool(_DEVICE_WORD.search(key))


def is_backend_map_entry(element: cst.DictElement) -> bool:
    """``"cuda": "nccl"`` of a device-type -> process-group backend map: NP501 rewrites the key with the
    value (``"neuron": "neuron"``), so it is not a device string of its own."""
    return (isinstance(element.key, cst.SimpleString) and string_value(element.key) == "cuda"
            and isinstance(element.value, cst.SimpleString) and (string_value(element.value) or "").lower() == "nccl")
