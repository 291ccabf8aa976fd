"""The recording dispatch mode of a shape-only run.

Two modes sit on PyTorch's dispatch-mode stack for the whole process: a ``FakeTensorMode`` (below),
which computes every device call's outputs as fake tensors, and ``RecordingMode`` (above), which sees
each ATen call first and decides:

* a call with no ``neuron`` tensor or device runs for real, on the CPU, with both modes out of the
  way (data loading, tokenizers, CPU-side metrics stay real);
* a device call is accounted where a real run would account it. Fake tensors never reach the C++
  PrivateUse1 kernels, so the route is read from the dispatcher's own tables, per op, once: an op with
  a kernel registered for PrivateUse1 runs that kernel in a real run (the explicit memory and view
  kernels are counted without signatures; a kernel composed of ATen calls, the core's
  COMPOSITE_KERNELS, runs here too, so its inner calls are counted; every other one is the fallback or
  calls it); an op
  without one but with a CompositeExplicitAutograd(NonFunctional) kernel runs that composite, which
  calls other ops (we run it too, under this mode, so its inner calls are accounted as they would be:
  ``aten::index_put_`` -> ``aten::_index_put_impl_``); a view only makes tensor metadata and reaches
  no kernel that counts (nor does a composite that makes its result itself, found on its first call);
  any other op reaches the boxed fallback. A ``c10d`` collective is counted as the simulator's c10d
  kernels count it and moves nothing (collectives.py); another library's op with a kernel for the
  device (FSDP2's ``fsdp::split_with_sizes_copy``) runs that kernel under this mode, so the ATen calls
  it makes are accounted as in a real run.

The accounting is the C++ core's (``account_fake_call``): the same op table, signature hash and
description, site capture and records as a real call, so a signature prints the same in both runs.
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import (DataDependentOutputException, DynamicOutputShapeException, FakeTensor,
                                           FakeTensorDeviceMismatchError, FakeTensorMode)
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from ..device import runtime
from . import collectives, compat, host_stream, memory, metas, pretrained, serialization, sizes, values

_ACCOUNT, _EXPLICIT, _EXPLICIT_ACCOUNTED, _FACTORY, _COMPOSITE, _METADATA, _COLLECTIVE, _PASS = range(8)
_FACTORIES = ("aten::empty.memory_format", "aten::empty_strided")
_CONVOLUTIONS = ("aten::convolution_overrideable", "aten::convolution_backward_overrideable")
_K = torch._C.DispatchKey
_PLAIN_DISPATCH = torch.Tensor.__torch_dispatch__


def _route(func) -> tuple[int, object]:
    schema = func._schema
    name = schema.name if not schema.overload_name else f"{schema.name}.{schema.overload_name}"
    if schema.name.startswith("c10d::"):
        from ..distributed.backend import C10D_OPS

        base = schema.name[len("c10d::"):]
        return (_COLLECTIVE, base) if base in C10D_OPS else (_PASS, None)
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    if not schema.name.startswith("aten::"):
        if schema.name.startswith("prim::"):  # the interpreter's own: no device kernel
            return _PASS, None
        if has(name, "PrivateUse1"):
            # another library's op with a kernel for the device (FSDP2's fsdp::split_with_sizes_copy,
            # chunk_cat): a real run calls it, and its ATen calls are counted; run it here, under this mode
            return _COMPOSITE, _K.PrivateUse1
        # otherwise as an ATen op (libraries.py): a composite kernel runs, any other op (torchvision::nms,
        # a custom_op with a CPU kernel) reaches the simulator's boxed fallback and is counted there
    if has(name, "PrivateUse1"):
        if name in runtime.C.UNCOUNTED_KERNELS or schema.name in runtime.C.UNCOUNTED_KERNELS:
            return _PASS, None
        if name in _FACTORIES:
            return _FACTORY, None
        if name in runtime.C.COMPOSITE_KERNELS or schema.name in runtime.C.COMPOSITE_KERNELS:
            # the simulator's kernel only calls ATen ops on the device tensors (the fused RNN cells): run it
            # here, under this mode, so its inner calls are counted as in a real run, not this one
            return _COMPOSITE, _K.PrivateUse1
        if schema.name in runtime.C.EXPLICIT_OPS or name in runtime.C.EXPLICIT_OPS:
            return (_EXPLICIT_ACCOUNTED if schema.name in _CONVOLUTIONS else _EXPLICIT), (
                name if name in runtime.C.EXPLICIT_OPS else schema.name)
        return _ACCOUNT, None
    # CompositeImplicitAutograd: an op that decomposes above autograd, reached here only from inside a
    # kernel this mode runs (FSDP2's calls ``narrow``): a real run decomposes it too
    for key in ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd", "CompositeImplicitAutograd"):
        if has(name, key):
            if func.is_view:
                return _METADATA, None
            return _COMPOSITE, getattr(_K, key)
    return _ACCOUNT, None


_TENSOR_ARGS: dict = {}  # op -> (position, name) of its arguments of type Tensor


def _wrapped_numbers(func, args, kwargs):
    """A composite kernel run here passes a number as a 0-dim "wrapped number" tensor (``remainder.Scalar``
    calls ``remainder.Tensor(self, wrapped_scalar_tensor(other))``), and the Python dispatch hands it to
    this mode as a plain number, which the op's own schema then refuses: the fake call gets a 0-dim tensor
    (a wrapped number and a 0-dim tensor promote alike against a tensor with dimensions); the accounting
    keeps the number, as a real run's core sees a wrapped number (no int64 tensor, the number in the
    signature)."""
    slots = _TENSOR_ARGS.get(func)
    if slots is None:
        slots = _TENSOR_ARGS[func] = tuple((i, a.name) for i, a in enumerate(func._schema.arguments)
                                           if isinstance(a.type, torch.TensorType))
    fixed = None
    for i, name in slots:
        in_args = i < len(args)
        value = args[i] if in_args else kwargs.get(name)
        if isinstance(value, (bool, int, float, complex)):
            if fixed is None:
                fixed = (list(args), dict(kwargs))
            with _disable_current_modes():
                tensor = torch.tensor(value)
            if in_args:
                fixed[0][i] = tensor
            else:
                fixed[1][name] = tensor
    return (args, kwargs) if fixed is None else (tuple(fixed[0]), fixed[1])


_MIXED: dict = {}  # op -> whether the simulator's fallback takes a host tensor beside device tensors


def _fake_call(func, args, kwargs):
    """The fake call; where FakeTensorMode refuses a host tensor beside device tensors, again with each host
    tensor of one or more dimensions (an index built with ``torch.arange``) made a fake on the call's device,
    for an op whose real path takes host tensors (the C++ core's MIXED_DEVICE_OPS: ``index``,
    ``_index_put_impl_``, copies). FakeTensorMode takes mixed devices for only some of them (``index_put``'s
    backward calls ``_index_put_impl_`` with the forward's index, which it refuses); where it takes them (a
    copy from a host tensor) its result stays its own. Any other op's refusal stands, as the real fallback
    refuses. The accounting keeps the host tensor, as a real call's signature does."""
    try:
        return func(*args, **kwargs)
    except FakeTensorDeviceMismatchError:
        mixed = _MIXED.get(func)
        if mixed is None:
            mixed = _MIXED[func] = func._schema.name.split("::", 1)[-1] in runtime.C.MIXED_DEVICE_OPS
        if not mixed:
            raise
    args, kwargs = _host_tensors_on_device(args, kwargs)
    return func(*args, **kwargs)


def _host_tensors_on_device(args, kwargs):
    """The arguments with each host tensor of 1+ dimensions a fake of its metadata on the call's device."""
    device = None
    for a in (*args, *kwargs.values()):
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, FakeTensor) and t.fake_device.type == "neuron":
                device = t.fake_device
                break
        if device is not None:
            break
    if device is None:
        return args, kwargs

    def on_device(t):
        host = isinstance(t, torch.Tensor) and t.dim() > 0 and (
            t.fake_device.type == "cpu" if isinstance(t, FakeTensor) else t.device.type == "cpu")
        if not host:
            return t
        # under the fake mode only (this mode is off inside its own dispatch): a fake of the same metadata
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device)

    def fix(a):
        if isinstance(a, (list, tuple)):
            return type(a)(fix(e) for e in a)
        return on_device(a)

    return tuple(fix(a) for a in args), {k: fix(v) for k, v in kwargs.items()}


_DEVICE, _REAL, _OTHER, _HOST = range(4)
# `.item()` decomposes to `_local_scalar_dense`; a composite kernel run here (`_grouped_mm`'s loop over its
# groups, reading `offs` on the host) calls `aten::item` itself, before that decomposition
_SCALAR_READS = (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default)


def _kind_of_call(args, kwargs) -> int:
    """_DEVICE: a fake tensor on the device or the neuron device is involved; _HOST: fakes on the host
    only (weights ``from_pretrained`` did not read: pretrained.py); _OTHER: a meta tensor (FakeTensorMode's
    own meta computations, which must reach it); _REAL: plain CPU work."""
    kind = _REAL
    for a in (*args, *kwargs.values()):
        if isinstance(a, FakeTensor):
            if a.fake_device.type == "neuron":
                return _DEVICE
            kind = _HOST
        elif isinstance(a, torch.Tensor):
            if a.is_meta and kind == _REAL:
                kind = _OTHER
        elif isinstance(a, (list, tuple)):
            for e in a:
                if isinstance(e, FakeTensor):
                    if e.fake_device.type == "neuron":
                        return _DEVICE
                    kind = _HOST
                elif isinstance(e, torch.Tensor) and e.is_meta and kind == _REAL:
                    kind = _OTHER
    device = kwargs.get("device")
    if device is not None:
        device_type = torch.device(device).type
        if device_type == "neuron":
            return _DEVICE
        if device_type == "meta":  # torch.load under a fake mode rebuilds tensors on meta storages
            return _OTHER
    return kind


def _all_fake(out) -> bool:
    if isinstance(out, torch.Tensor):
        return isinstance(out, FakeTensor)
    if isinstance(out, (tuple, list)):
        return all(isinstance(t, FakeTensor) for t in out if isinstance(t, torch.Tensor))
    return True


def _complex(out) -> bool:
    if isinstance(out, torch.Tensor):
        return out.is_complex()
    return isinstance(out, (tuple, list)) and any(isinstance(t, torch.Tensor) and t.is_complex() for t in out)


class RecordingMode(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self._routes: dict = {}
        self._account = runtime.C.account_fake_call
        self._count_explicit = runtime.C.count_explicit
        self._account_factory = runtime.C.account_fake_factory
        self._account_complex = runtime.C.account_fake_complex_result
        self._accounting_enabled = runtime.C.accounting_enabled
        self._set_accounting = runtime.C.set_accounting

    @classmethod
    def is_infra_mode(cls) -> bool:
        # torch.compile refuses to trace under a user dispatch mode; this one only records.
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(not issubclass(t, FakeTensor) and t.__torch_dispatch__ is not _PLAIN_DISPATCH for t in types):
            # another tensor subclass (DTensor: FSDP2's sharded parameters) unwraps to its local tensors
            # first and calls the op again on them, as in a real run: count that call, not this one. A
            # subclass without a dispatch of its own (a CPU ``nn.Parameter`` under ``.data`` or ``deepcopy``)
            # is a plain tensor to the dispatcher, and so here: nothing else would take the call.
            return NotImplemented
        kwargs = kwargs or {}
        call = _kind_of_call(args, kwargs)
        if call == _REAL:
            host_stream.before_host_call(func)  # a host draw: the host stream's owed draws first
            with _disable_current_modes():
                return func(*args, **kwargs)
        if call == _OTHER:
            return func(*args, **kwargs)
        if call == _HOST:  # host work on fakes: no device call, no device memory; a read is a placeholder
            if func in _SCALAR_READS:  # `.item()`, `int(t)`: as a device read (torch.load's CPU fakes, HF weights)
                return values.special(func, args, kwargs)()
            try:
                out = func(*args, **kwargs)
            except DynamicOutputShapeException:
                return sizes.data_dependent_shape(func, args, kwargs)
            except DataDependentOutputException as error:
                return values.data_dependent_value(func, args, kwargs, error)
            # known values go on through host work too: `_grouped_mm`'s kernel copies its offsets to the
            # host, then reads each with `offs_cpu[i].item()`
            values.note_known(func, args, kwargs, out)
            sizes.note_even_split(func, args, kwargs, out)
            return out
        route = self._routes.get(func)
        if route is None:
            route = self._routes[func] = _route(func)
        kind, extra = route
        schema = func._schema
        if kind == _COLLECTIVE:
            return collectives.run(extra, func, args)
        if kind == _COMPOSITE:
            with self:
                out = func._op_dk(extra, *args, **kwargs)
            if _all_fake(out):
                return out
            # The composite made a tensor itself, not through the dispatcher (``_unsafe_view``: a plain
            # view of the fake's meta storage): its inner calls are counted; FakeTensorMode makes the result.
            self._routes[func] = (_METADATA, None)
        signature = 0
        if kind in (_ACCOUNT, _EXPLICIT_ACCOUNTED):
            signature = self._account(schema.name, schema.overload_name, tuple(args), kwargs)
        if kind in (_EXPLICIT, _EXPLICIT_ACCOUNTED):
            self._count_explicit(extra)
        elif kind == _FACTORY:
            self._account_factory(schema.name, schema.overload_name, tuple(args), kwargs)
        special = values.special(func, args, kwargs)
        if special is not None:
            return special()
        # FakeTensorMode may run a real kernel to learn a result's metadata (an op without a meta
        # kernel): on the device that is the simulator's kernel, whose accounting must not count it.
        was_on = self._accounting_enabled()
        self._set_accounting(False)
        run_args, run_kwargs = _wrapped_numbers(func, args, kwargs)
        try:
            out = _fake_call(func, run_args, run_kwargs)
        except DynamicOutputShapeException:
            out = sizes.data_dependent_shape(func, args, kwargs)
        except DataDependentOutputException as error:
            return values.data_dependent_value(func, args, kwargs, error)
        finally:
            self._set_accounting(was_on)
        out = metas.cpu_layout(func, args, kwargs, out)
        if kind == _ACCOUNT and signature and _complex(out):
            # the fallback decides a complex result's policy once per signature (a view for
            # view_as_complex, the CPU for fft): the same decision for the fake result
            self._account_complex(schema.name, schema.overload_name, signature)
        memory.track(out)
        values.note_known(func, args, kwargs, out, (run_args, run_kwargs))
        sizes.note_even_split(func, args, kwargs, out)
        compat.host_draws(func, args, kwargs, out)  # a real kernel's draws from the host generator
        return out


class _FakeMode(FakeTensorMode):
    # Never run a real kernel on the device: FakeTensorMode otherwise computes a call with no fake input
    # for real when the device is available (constant propagation of `cpu_tensor.to("neuron")`).
    @property
    def avoid_device_init(self) -> bool:
        return True


def enter() -> None:
    """Push both modes for the rest of the process (the main thread; autograd's threads inherit them)."""
    fake = _FakeMode(allow_non_fake_inputs=True)
    fake.__enter__()
    RecordingMode().__enter__()
    compat.install(fake)
    memory.install()
    metas.register()
    serialization.install()
    pretrained.install(fake)
