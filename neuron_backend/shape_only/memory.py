"""Device memory of a shape-only run, from fake storages: a storage is allocated when a device call
first returns a tensor on it, and freed when the last of those tensors dies (the callback of a weak
reference per tensor object; autograd's saved tensors keep theirs alive as in a real run). The bytes go through
the C++ core's memory statistics (``mem_on_alloc`` / ``mem_on_free``: the same Neuron size classes
and peak as the allocator's), so ``torch.neuron.max_memory_allocated()`` and the events file's
``peak_allocated_bytes`` mean the same in both modes. A storage resized in place (``UntypedStorage.resize_``,
which does not dispatch) is counted at its new size.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager

from torch._subclasses.fake_tensor import FakeTensor

from ..device import runtime

_live: dict[int, list] = {}  # storage id -> [device, bytes, tensors alive]
_refs: dict[int, object] = {}  # id of a weak reference -> (the reference, its storage id): kept alive
_paused = 0  # > 0 while tensors that a real run never allocates on the device are made (paused())


def _release(key: int) -> None:
    entry = _live.get(key)
    if entry is None:
        return
    entry[2] -= 1
    if entry[2] <= 0:
        del _live[key]
        runtime.C.mem_on_free(entry[0], entry[1])


def _track_one(t: FakeTensor) -> None:
    if t.__dict__.get("_np_tracked") or t.fake_device.type != "neuron":
        return
    storage = t.untyped_storage()
    key = storage._cdata
    entry = _live.get(key)
    if entry is None:
        nbytes = storage.nbytes()
        dev = t.fake_device.index or 0
        entry = _live[key] = [dev, nbytes, 0]
        runtime.C.mem_on_alloc(dev, nbytes)
    entry[2] += 1
    t.__dict__["_np_tracked"] = True
    ref = weakref.ref(t, _dead)  # cheaper than weakref.finalize, which also registers for exit
    _refs[id(ref)] = (ref, key)


def _dead(ref) -> None:
    held = _refs.pop(id(ref), None)
    if held is not None:
        _release(held[1])


def step_aside(t) -> int | None:
    """Drop this module's weak reference to ``t`` without freeing its storage (``torch.utils.swap_tensors``
    refuses a tensor with one): the storage id it held, for ``follow``."""
    for ref in weakref.getweakrefs(t):
        held = _refs.pop(id(ref), None)
        if held is not None:
            return held[1]
    return None


def follow(t, key: int | None) -> None:
    """``t`` now holds the storage ``key`` (counted already): its death frees it."""
    if key is not None:
        ref = weakref.ref(t, _dead)
        _refs[id(ref)] = (ref, key)


def install() -> None:
    """``UntypedStorage.resize_`` does not dispatch (FSDP2 frees unsharded parameters with ``resize_(0)`` and
    allocates them again with ``resize_(n)``): a tracked storage's bytes follow it."""
    import torch

    original = torch.UntypedStorage.resize_
    if getattr(original, "_neuron_port_tracked", False):
        return

    def resize_(self, size):
        entry = _live.get(self._cdata)
        result = original(self, size)
        if entry is not None and size != entry[1]:
            runtime.C.mem_on_free(entry[0], entry[1])
            runtime.C.mem_on_alloc(entry[0], size)
            entry[1] = size
        return result

    resize_._neuron_port_tracked = True
    torch.UntypedStorage.resize_ = resize_


@contextmanager
def paused():
    """No device memory for the tensors made inside: a library's own fakes (DTensor's metadata
    propagation on the global shapes), which a real run makes as fake tensors and never allocates."""
    global _paused
    _paused += 1
    try:
        yield
    finally:
        _paused -= 1


def track(out) -> None:
    if _paused:
        return
    if isinstance(out, FakeTensor):
        _track_one(out)
    elif isinstance(out, (tuple, list)):
        for t in out:
            if isinstance(t, FakeTensor):
                _track_one(t)
