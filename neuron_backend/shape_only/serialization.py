"""``torch.save`` of device tensors in a shape-only run: a fake tensor has no values to write, so each one is
saved as a meta tensor of its shape, dtype and strides (no bytes: a checkpoint of any size is a small
placeholder file), and the site is recorded once as a placeholder (``op`` "torch.save", NP911): the file
holds no weights, and a real run cannot use it. ``torch.load`` gives each meta tensor it reads back as the
tensor the program saved: a fake on ``map_location`` when that is a ``neuron`` device or absent (the
placeholders were device tensors), zeros on the CPU for any other ``map_location``, so ``load_state_dict``
(``assign=True`` included) and the optimizer's resume run as with a real checkpoint.
"""

from __future__ import annotations

import functools
import threading

import torch

from . import values

PLACEHOLDER_FILE = "a placeholder file (shapes and dtypes, no values)"
_saving = threading.local()


def _as_meta(t) -> tuple:
    """The pickle reduction of a meta tensor like ``t`` (the one PyTorch uses for meta tensors)."""
    return (torch._utils._rebuild_meta_tensor_no_storage, (t.dtype, tuple(t.size()), tuple(t.stride()),
                                                             t.requires_grad))


def _target(map_location) -> torch.device:
    if map_location is None:
        return torch.device("neuron")
    if isinstance(map_location, (str, torch.device)):
        return torch.device(map_location)
    return torch.device("cpu")  # a dict or a function: almost always "load on the CPU"


def _restore(obj, device: torch.device):
    from torch.utils._pytree import tree_map

    if device.type == "meta":  # asked for meta tensors (transformers' loading on meta): they are
        return obj

    def restore(t):
        if not isinstance(t, torch.Tensor) or not t.is_meta:
            return t
        if device.type == "neuron":
            made = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device)
        else:
            made = torch.zeros(t.size(), dtype=t.dtype, device=device)
        return made.requires_grad_(t.requires_grad)
    return tree_map(restore, obj)


def install() -> None:
    from torch._subclasses.fake_tensor import FakeTensor

    if getattr(torch.save, "_neuron_port_placeholders", False):
        return
    original_save, original_reduce = torch.save, FakeTensor.__reduce_ex__

    def __reduce_ex__(self, proto):
        if not getattr(_saving, "on", False):
            return original_reduce(self, proto)  # copy.copy and other pickling keep PyTorch's own path
        values.note("placeholder", "torch.save", value=PLACEHOLDER_FILE)
        return _as_meta(self)

    @functools.wraps(original_save)
    def save(*args, **kwargs):
        was = getattr(_saving, "on", False)
        _saving.on = True
        try:
            return original_save(*args, **kwargs)
        finally:
            _saving.on = was

    original_load = torch.load

    @functools.wraps(original_load)
    def load(f, map_location=None, *args, **kwargs):
        return _restore(original_load(f, map_location, *args, **kwargs), _target(map_location))

    save._neuron_port_placeholders = True
    FakeTensor.__reduce_ex__ = __reduce_ex__
    torch.save = torch.serialization.save = save
    torch.load = torch.serialization.load = load
