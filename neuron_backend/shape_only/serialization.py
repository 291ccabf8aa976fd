"""``torch.save`` of device tensors in a shape-only run: a fake tensor has no values to write, so each one is
saved as a meta tensor of its shape, dtype and strides (no bytes: a checkpoint of any size is a small
placeholder file), and the site is recorded once as a placeholder (``op`` "torch.save", NP911): the file
holds no weights. ``torch.load`` of such a file gives meta tensors, which ``load_state_dict`` copies into a
model's fake parameters as it would real ones; a real run cannot use the file.
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

    save._neuron_port_placeholders = True
    FakeTensor.__reduce_ex__ = __reduce_ex__
    torch.save = save
    torch.serialization.save = save
