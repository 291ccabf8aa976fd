"""Where PyTorch tells a fake tensor from a real one and would take another path than a real run.

Foreach paths: ``torch.optim`` and ``torch.nn.utils.clip_grad_norm_`` (``torch.utils._foreach_utils``)
take their multi-tensor (foreach) implementation only for tensors whose type is exactly ``Tensor`` or
``Parameter``; fake parameters are ``FakeTensor``s, so a shape-only run would take the single-tensor
loops (other ops, other signatures). FakeTensor is added to both lists.

``tolist()``: FakeTensor reads element by element; a real tensor copies to the host once.

transformers: ``is_tracing(tensor)`` counts any FakeTensor as a trace (``is_fake_tensor``), so a model
would take its tracing paths (an explicit causal mask where an all-ones padding mask lets a real run
pass ``is_causal=True`` to SDPA: another op signature and a batch x seq x seq mask in device memory).
The shape-only run's own fakes stand for real device tensors: for them it answers as for a real tensor
(a value it then reads is known or a placeholder, as any host read); a trace's fakes (torch.compile's,
torch.export's: their own fake modes) still count.

DDP: its C++ reducer cannot run on fake tensors (it crashes); constructing one raises a clear error.

Tied parameters: ``module.to("neuron")`` converts each module's own parameters: a real CPU parameter whose converted
tensor is fake cannot have its ``.data`` set (different tensor types) and ``_apply`` does not swap it, so
PyTorch makes a new ``Parameter`` per module, and a weight shared by two modules (an embedding tied to the output
layer) would become two: twice its bytes, its gradient and its optimizer state. After the outermost
``_apply``, every (module, name) that held one parameter (or buffer) before holds one after, and the
conversion runs once per tensor (a real run converts a shared weight once: the second module finds
it on the device already). And the Parameter objects stay the module's, as ``.data =`` keeps them in a real
run: each new fake is swapped into the CPU parameter it replaces, so an optimizer built before the move steps
the moved weights (``_moved_in_place``).

Converting a moved module again: ``Module._apply`` swaps every fake parameter with its converted tensor
(``torch.utils.swap_tensors``) where a real run sets ``.data``; the swap refuses a tensor with a weak
reference, and fakes have two (memory.py's and the fake converter's memo). A conversion that changed
nothing (a second ``.to("neuron:0")``: accelerate and the HF Trainer do that; a shared module reached
twice) keeps the tensor, as ``.data =`` would; a real one (``.half()`` after the move) swaps with both
references stepped aside (the memo entry, a cache of the tensor's old content, is dropped).

Host random draws: the simulator's SDPA kernel draws its dropout seed from the host's default generator
(csrc/aten/sdpa.cpp, ``draw_seed``: one 64-bit draw per forward with ``dropout_p > 0``), so a real run's
CPU random stream moves there; a fake's meta kernel draws nothing. A later host draw would then differ
and a model's control flow with it (LayerDrop's ``torch.rand([]) < layerdrop`` skipped another layer: one
SDPA call more or less). Likewise ``native_dropout``: no device kernel, the simulator runs the CPU's, whose
mask is a ``bernoulli_`` on the host's default generator. ``host_draws`` owes the same draws, and
host_stream.py makes them only when something reads the stream (a 67M-element mask's draws cost ~0.5 CPU-s).
"""

from __future__ import annotations

import functools
import threading
import warnings
import weakref

import torch

from . import host_stream

_depth = threading.local()
_SDPA = torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default
_DROPOUT = torch.ops.aten.native_dropout.default


def host_draws(func, args, kwargs, out) -> None:
    """The host's default generator owes the draws the simulator's kernel for this device call makes (see the
    module docstring), after the fake call: SDPA's dropout seed (``random64()`` once: ``random_()`` of an
    int64 draws it); ``native_dropout``'s mask (the CPU kernel's ``bernoulli_`` of the input's elements), unless
    the input's values were known and the op ran on the CPU already (values.py: its result is known).
    host_stream.py makes them when the stream is next read."""
    if func is _SDPA:
        p = args[4] if len(args) > 4 else kwargs.get("dropout_p", 0.0)
        if p > 0.0:
            host_stream.owe(host_stream.RANDOM64, torch.int64, 0.0, 1)
    elif func is _DROPOUT:
        from . import values

        x, p = args[0], args[1]
        train = args[2] if len(args) > 2 else kwargs.get("train")
        if train is False or x.numel() == 0 or values.value_of(out[0]) is not None:
            return
        count = x.numel() if host_stream.bernoulli_per_element() else 1
        host_stream.owe(host_stream.BERNOULLI, x.dtype, 1 - p, count)


def _slots(root: torch.nn.Module) -> list[tuple[dict, str, int]]:
    out = []
    for module in root.modules():
        for table in (module._parameters, module._buffers):
            for key, value in table.items():
                if value is not None:
                    out.append((table, key, id(value)))
    return out


def _once_per_tensor(fn):
    done: dict[int, tuple] = {}

    def convert(t):
        hit = done.get(id(t))
        if hit is None:
            hit = done[id(t)] = (t, fn(t))  # keeps t alive: its id is not reused during the call
        return hit[1]
    return convert


def install(fake_mode=None) -> None:
    host_stream.install()
    _keep_tied_parameters()
    _swap_fake_parameters()
    # PyTorch's own Tensor.__deepcopy__ reads data_ptr() of every subclass tensor: on fakes it warns the user
    # about a call the program never made (a real run's tensors are not fakes)
    warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor", category=UserWarning)
    _tolist_through_the_host()
    _format_through_the_host()
    _refuse_ddp()
    from ..after_import import after_import

    after_import("torch.distributed.fsdp._fully_shard._fsdp_init", _fsdp_moves_host_tensors)
    if fake_mode is not None:
        after_import("transformers.utils.import_utils", functools.partial(_device_fakes_are_not_a_trace, fake_mode))
    _dtensor_metadata_uncounted()
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.optim import optimizer
    from torch.utils import _foreach_utils

    for supported in (optimizer._foreach_supported_types, _foreach_utils._foreach_supported_types):
        if FakeTensor not in supported:
            supported.append(FakeTensor)


def _same_view(t1, t2) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return (isinstance(t1, FakeTensor) and isinstance(t2, FakeTensor) and t1.fake_device == t2.fake_device
            and t1.dtype == t2.dtype and t1.shape == t2.shape and t1.stride() == t2.stride()
            and t1.storage_offset() == t2.storage_offset()
            and t1.untyped_storage()._cdata == t2.untyped_storage()._cdata)


def _drop_memo_entries(t, fake_mode) -> None:
    """The fake converter's memo entry of ``t`` (a fake, or a real CPU tensor it made a fake of) and its
    describer's id for it (a weak reference too: a fresh id is given if it is described again)."""
    if fake_mode is None:
        return
    memo = fake_mode.fake_tensor_converter.tensor_memo
    described = fake_mode.fake_tensor_converter.meta_converter.describer.lookup_tensor.data
    for ref in weakref.getweakrefs(t):
        key = getattr(ref, "key", None)
        if key is not None and memo.data.get(key) is ref:
            del memo.data[key]
        elif ref in described:
            del described[ref]


def _swap_fake_parameters() -> None:
    import torch.utils

    from . import memory

    original = torch.utils.swap_tensors
    if getattr(original, "_neuron_port_swaps", False):
        return

    def swap_tensors(t1, t2):
        if _same_view(t1, t2):
            return
        from torch._subclasses.fake_tensor import FakeTensor

        fake_mode = next((t.fake_mode for t in (t1, t2) if isinstance(t, FakeTensor)), None)
        for t in (t1, t2):
            _drop_memo_entries(t, fake_mode)
        keys = (memory.step_aside(t1), memory.step_aside(t2))
        swapped = False
        try:
            original(t1, t2)
            swapped = True
        finally:  # each storage stays counted, and is freed with the object that holds it now
            memory.follow(t2 if swapped else t1, keys[0])
            memory.follow(t1 if swapped else t2, keys[1])

    swap_tensors._neuron_port_swaps = True
    torch.utils.swap_tensors = swap_tensors


def _dtensor_metadata_uncounted() -> None:
    """DTensor learns an op's output metadata by running it on fakes of the global shapes: in a real run
    those are fake tensors, which reach no device kernel; here every tensor is fake, so the call would be
    counted as a device call (FSDP2's optimizer step on the unsharded parameters, besides the real one on
    the shards), and its global-shape fakes would be device memory (the foreach optimizer step's arguments
    at once: a peak of several unsharded models). Run it with the accounting and the memory paused."""
    try:
        from torch.distributed.tensor._sharding_prop import ShardingPropagator
    except ImportError:  # pragma: no cover - a PyTorch without DTensor
        return
    original = ShardingPropagator._propagate_tensor_meta_non_cached
    if getattr(original, "_neuron_port_uncounted", False):
        return
    from ..device import runtime
    from . import memory

    def propagate(self, *args, **kwargs):
        was_on = runtime.C.accounting_enabled()
        runtime.C.set_accounting(False)
        try:
            with memory.paused():
                return original(self, *args, **kwargs)
        finally:
            runtime.C.set_accounting(was_on)

    propagate._neuron_port_uncounted = True
    ShardingPropagator._propagate_tensor_meta_non_cached = propagate


DDP_MESSAGE = ("[neuron-port simulator] DistributedDataParallel cannot run in a shape-only run: its C++ "
               "reducer needs real gradients and crashes on fake tensors. Shard with FSDP (fully_shard) for a "
               "shape-only run, or run DDP in a real run (neuron-port check --nproc N).")


def _device_fakes_are_not_a_trace(fake_mode, import_utils) -> None:
    original = getattr(import_utils, "is_fake_tensor", None)
    if original is None or getattr(original, "_neuron_port", False):
        return  # another transformers (nothing to answer), or patched already

    @functools.wraps(original)
    def is_fake_tensor(x) -> bool:
        if getattr(x, "fake_mode", None) is fake_mode:
            return False  # the shape-only run's stand-in for a real device tensor (module docstring)
        return original(x)

    is_fake_tensor._neuron_port = True
    import_utils.is_fake_tensor = is_fake_tensor


def _refuse_ddp() -> None:
    """DDP's C++ reducer segfaults on fake tensors (PyTorch 2.13, in its gradient callback): a clear error at
    the user's line instead."""
    from torch.nn.parallel import DistributedDataParallel

    original = DistributedDataParallel.__init__
    if getattr(original, "_neuron_port_refused", False):
        return

    def __init__(self, *args, **kwargs):
        raise RuntimeError(DDP_MESSAGE)

    __init__._neuron_port_refused = True
    DistributedDataParallel.__init__ = __init__


def _fsdp_moves_host_tensors(fsdp_init) -> None:
    """``fully_shard`` moves a module's CPU parameters to the device with ``tensor.data = tensor.to(device)``;
    a host tensor (a model built or loaded on the CPU: real, or ``from_pretrained``'s fake CPU weights) and
    its fake on the device are different tensor types there, and ``set_data`` refuses them. Swap the moved
    tensor in instead, as FSDP itself does for a tensor subclass: the module, its optimizer-to-be and every
    other holder see the device tensor, as after a real move."""
    original = fsdp_init._move_states_to_device
    if getattr(original, "_neuron_port_swaps", False):
        return
    from torch.distributed.tensor import DTensor

    def _move_states_to_device(params, buffers, device):
        params, buffers = list(params), list(buffers)
        for t in (*params, *buffers):
            if t.device == device or t.device.type == "meta" or isinstance(t, DTensor):
                continue
            with torch.no_grad():
                moved = t.to(device)
            if not torch._has_compatible_shallow_copy_type(t, moved):
                if isinstance(t, torch.nn.Parameter):
                    moved = torch.nn.Parameter(moved, requires_grad=t.requires_grad)
                torch.utils.swap_tensors(t, moved)
        return original(params, buffers, device)  # the rest (and the checks) as FSDP does

    _move_states_to_device._neuron_port_swaps = True
    fsdp_init._move_states_to_device = _move_states_to_device


def _tolist_through_the_host() -> None:
    """``FakeTensor.tolist()`` reads each element (``.item()`` per element); a real ``tolist()`` copies the
    tensor to the host once. Copy once here too (the copy is a placeholder: values.py)."""
    from torch._subclasses.fake_tensor import FakeTensor

    def tolist(self):
        return self.cpu().tolist()

    FakeTensor.tolist = tolist


def _format_through_the_host() -> None:
    """``f"expert_{idx}"`` of a 0-d device tensor reads its value on the host (``Tensor.__format__``: ``.item()``
    for a plain ``Tensor``; a subclass such as FakeTensor gets its repr, so NLLB-MoE looked up
    ``expert_FakeTensor(...)``). The same read here: a known value, else a placeholder (values.py)."""
    from torch._subclasses.fake_tensor import FakeTensor

    def __format__(self, format_spec):
        if self.dim() == 0 and not self.is_meta:
            return self.detach().item().__format__(format_spec)
        return object.__format__(self, format_spec)

    FakeTensor.__format__ = __format__


def _moved_in_place(root: torch.nn.Module, before: list, held: dict) -> None:
    """A real move sets each parameter's ``.data``: the Parameter object stays the module's, so an optimizer
    built before ``model.to("neuron")`` (SimCLR's) steps the moved weights. Here a CPU parameter got a new
    fake Parameter; swap the fake into the old object (as the FSDP move above does) and put it back in its
    slots, tied ones included. An RNN holds weak references to its new parameters, which the swap refuses:
    dropped first, and made again from the parameters after (as its own ``_apply`` does). A tensor someone
    else holds a weak reference to keeps the new object, as before."""
    from torch._subclasses.fake_tensor import FakeTensor

    rnns = [m for m in root.modules() if isinstance(m, torch.nn.RNNBase)]
    for m in rnns:
        m._flat_weight_refs = []
    swapped: set[int] = set()
    for table, key, old_id in before:
        old = held.get(old_id)
        if old is None or key not in table:
            continue
        if old_id not in swapped:
            new = table[key]
            if new is old or isinstance(old, FakeTensor) or not isinstance(new, FakeTensor):
                continue
            try:
                torch.utils.swap_tensors(old, new)
            except RuntimeError:  # another weak reference: checked before anything is swapped
                continue
            swapped.add(old_id)
        table[key] = old
    for m in rnns:
        m._init_flat_weights()


def _keep_tied_parameters() -> None:
    original = torch.nn.Module._apply
    if getattr(original, "_neuron_port_tied", False):
        return

    def _apply(self, fn, recurse=True):
        depth = getattr(_depth, "n", 0)
        before = _slots(self) if depth == 0 else None
        if before is not None:
            fn = _once_per_tensor(fn)
            held = {id(p): p for m in self.modules() for p in m._parameters.values() if p is not None}
        _depth.n = depth + 1
        try:
            result = original(self, fn, recurse)
        finally:
            _depth.n = depth
        if before is not None:
            first: dict[int, object] = {}
            for table, key, old in before:
                if key not in table:
                    continue
                if old in first:
                    table[key] = first[old]
                else:
                    first[old] = table[key]
            _moved_in_place(self, before, held)
        return result

    _apply._neuron_port_tied = True
    torch.nn.Module._apply = _apply
