"""``torch.save`` of device tensors in a shape-only run: a fake tensor has no values to write, so each one is
saved as a meta tensor of its shape, dtype and strides (no bytes: a checkpoint of any size is a small
placeholder file), and the site is recorded once as a placeholder (``op`` "torch.save", NP911): the file
holds no weights, and a real run cannot use it. ``torch.load`` gives each meta tensor it reads back as the
tensor the program saved: a fake on ``map_location`` when that is a ``neuron`` device or absent (the
placeholders were device tensors), fake CPU tensors for any other ``map_location`` (as from_pretrained's
placeholder weights, pretrained.py: no host memory, where CPU zeros of a 405B checkpoint would be 1.6 TB of
it), so ``load_state_dict`` (``assign=True`` included) and the optimizer's resume run as with a real
checkpoint.

``safetensors.torch.save_file`` / ``save`` (``save_model``, transformers' ``save_pretrained``) of device
tensors likewise: each fake is written as an empty tensor of its dtype, its shape kept in the header's
metadata (``neuron_port.placeholders``), so the file is a few kilobytes, not the model's size in zeros; the
site is a placeholder (NP911). ``safetensors.torch.load_file`` / ``load`` give those tensors back at their
shapes (fakes on a ``neuron`` device, fake CPU tensors on the CPU); real tensors in the same file load as usual.
A fake's storage has no address, so ``storage_ptr`` (which safetensors and transformers' ``save_pretrained``
use to find tensors that share memory) gives its storage's identity instead.
"""

from __future__ import annotations

import functools
import json
import struct
import threading

import torch

from . import pretrained, values
from ..after_import import after_import

PLACEHOLDER_FILE = "a placeholder file (shapes and dtypes, no values)"
SAFETENSORS_KEY = "neuron_port.placeholders"  # header metadata: {name: [dtype, shape]} of the fakes written empty
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
        else:  # a fake on the host, as from_pretrained's weights: no bytes (real zeros of a 16 GB checkpoint
            made = pretrained.host_fake(t)  # would be 16 GB of this machine's memory)
        return made.requires_grad_(t.requires_grad)

    def leaf(x):
        # a whole pickled module (`torch.save(model)`) holds its tensors where pytree does not look; _apply
        # swaps its parameters and buffers, and an RNN's _apply re-collects its _flat_weights
        return x._apply(restore) if isinstance(x, torch.nn.Module) else restore(x)
    return tree_map(leaf, obj)


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
    after_import("safetensors.torch", _patch_safetensors)


def _stand_ins(tensors: dict, metadata, op: str) -> tuple[dict, dict] | None:
    """The tensors to write (each fake an empty tensor of its dtype) and the metadata naming their shapes, or
    None when no tensor is fake (a real save)."""
    from torch._subclasses.fake_tensor import FakeTensor

    if not isinstance(tensors, dict) or not any(isinstance(t, FakeTensor) for t in tensors.values()):
        return None
    values.note("placeholder", op, value=PLACEHOLDER_FILE)
    shapes, written = {}, {}
    for name, t in tensors.items():
        if isinstance(t, FakeTensor):
            shapes[name] = [str(t.dtype).removeprefix("torch."), list(t.shape)]
            t = torch.empty(0, dtype=t.dtype, device="cpu")
        written[name] = t
    return written, {**(metadata or {}), SAFETENSORS_KEY: json.dumps(shapes)}


def _header_metadata(head: bytes) -> dict:
    """A safetensors file's ``__metadata__``: 8 bytes of header length (little-endian), then the JSON header."""
    (size,) = struct.unpack("<Q", head[:8])
    return json.loads(head[8:8 + size]).get("__metadata__") or {}


def _restored(loaded: dict, metadata: dict, device) -> dict:
    shapes = json.loads(metadata.get(SAFETENSORS_KEY) or "{}")
    if not shapes:
        return loaded
    if isinstance(device, int):
        device = torch.device("neuron", device)
    metas = {name: torch.empty(shape, dtype=getattr(torch, dtype), device="meta") for name, (dtype, shape) in
             shapes.items() if name in loaded}
    return {**loaded, **_restore(metas, torch.device(device))}


def _patch_safetensors(module) -> None:
    if getattr(module.save_file, "_neuron_port_placeholders", False):
        return
    save_file, save, load_file, load = module.save_file, module.save, module.load_file, module.load
    storage_ptr = module.storage_ptr

    @functools.wraps(storage_ptr)
    def fake_storage_ptr(tensor):
        # a fake's storage has no address (0 for all of them: every device tensor would look shared with
        # every other, to safetensors and to transformers' save_pretrained); its identity stands in for it
        from torch._subclasses.fake_tensor import FakeTensor

        return tensor.untyped_storage()._cdata if isinstance(tensor, FakeTensor) else storage_ptr(tensor)

    @functools.wraps(save_file)
    def placeholder_save_file(tensors, filename, metadata=None):
        stand_ins = _stand_ins(tensors, metadata, "safetensors.torch.save_file")
        if stand_ins is None:
            return save_file(tensors, filename, metadata=metadata)
        return save_file(stand_ins[0], filename, metadata=stand_ins[1])

    @functools.wraps(save)
    def placeholder_save(tensors, metadata=None):
        stand_ins = _stand_ins(tensors, metadata, "safetensors.torch.save")
        return save(tensors, metadata=metadata) if stand_ins is None else save(*stand_ins)

    @functools.wraps(load_file)
    def placeholder_load_file(filename, device="cpu", **kwargs):
        loaded = load_file(filename, device=device, **kwargs)
        with open(filename, "rb") as f:
            head = f.read(8)
            head += f.read(struct.unpack("<Q", head)[0])
        return _restored(loaded, _header_metadata(head), device)

    @functools.wraps(load)
    def placeholder_load(data):
        return _restored(load(data), _header_metadata(data), "cpu")

    placeholder_save_file._neuron_port_placeholders = True
    module.save_file, module.save = placeholder_save_file, placeholder_save
    module.load_file, module.load = placeholder_load_file, placeholder_load
    module.storage_ptr = fake_storage_ptr
