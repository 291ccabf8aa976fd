"""Meta kernels for the simulator's own PrivateUse1 ops that PyTorch gives none: without one,
FakeTensorMode learns an output's shape by running the real kernel on zero-filled device tensors (at
the model's full size, with real allocations). ``convolution_overrideable`` and its backward are
``convolution`` and ``convolution_backward`` with the bias sizes implied by the weight; registered
for shape-only runs only. Their results are contiguous, whatever the input's layout, as the simulator's
kernels return them (csrc/aten/convolution.cpp: the layout PyTorch's fake kernel declares for a PrivateUse1
convolution); ``aten.convolution`` on meta tensors would give a channels_last input a channels_last result.
"""

from __future__ import annotations

import re

import torch

from . import host_stream

_library = None


def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return torch.ops.aten.convolution.default(input, weight, bias, stride, padding, dilation, transposed,
                                              output_padding, groups).contiguous()


def _convolution_backward(grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups,
                          output_mask):
    bias_sizes = [weight.shape[1] * groups if transposed else weight.shape[0]]
    grads = torch.ops.aten.convolution_backward.default(grad_output, input, weight, bias_sizes, stride, padding,
                                                        dilation, transposed, output_padding, groups, output_mask)
    return tuple(g if g is None else g.contiguous() for g in grads)


def register() -> None:
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("aten", "IMPL")
    _library.impl("convolution_overrideable", _convolution, "Meta")
    _library.impl("convolution_backward_overrideable", _convolution_backward, "Meta")


# ---------------------------------------------------------------- layouts of CPU kernels' results
# A real call that reaches the simulator's fallback gets the strides its CPU kernel gives it: an
# elementwise kernel (TensorIterator) lays its result out like its inputs, a normalization's backward
# returns a contiguous gradient (layer norm) or one in its input's memory format (batch norm). PyTorch's
# fake kernels for several of these ops are Python decompositions that lay the result out otherwise
# (softplus_backward is a `where` led by the contiguous input, native_dropout_backward a contiguous
# product, native_layer_norm_backward follows the gradient), and the next op's signature then differs
# from the real run's. So for a call with a result of the rank of one of its tensor inputs, the CPU
# kernel itself is asked, once per op and input layout: it runs on tiny zero "twins" of the arguments
# (every dimension size of the call, and every integer of a `*shape` argument equal to one, mapped to
# its own small size; each twin in its argument's memory order), and the twin result's dimension order
# is the real result's. A CPU kernel lays a result out by its inputs' memory formats, not their sizes,
# so the order carries over to a result of another shape (a strided pooling's) as long as the twin
# result has the same rank and the same dimensions of size one. Size arguments (SymInt: group norm's
# `N`, `C`, `HxW`) are mapped like the dimensions they are, or are products of. A call the twins do
# not fit keeps the fake kernel's strides, as does an op without a CPU kernel (the simulator's own:
# SDPA's overrideable ops) and an op told its result's shape or layout (a `memory_format` argument, a
# `size` argument the schema types as sizes, SymInt[]: `new_empty`'s `size`, `upsample`'s `output_size`,
# `empty_strided`'s with its `stride`; a pooling's `kernel_size` and `stride`, int[], are its window's),
# and a convolution (SymInt[] `stride`: the CPU kernel's layout follows the sizes; the simulator's
# convolutions return contiguous results anyway, see above).
# A twin that draws random numbers leaves the CPU generator as it found it.
_PLAIN: dict = {}
_ORDERS: dict = {}


def _plain_op(func) -> bool:
    known = _PLAIN.get(func)
    if known is None:
        schema = func._schema
        # told its result's size: a `size` argument of sizes (SymInt[]: `new_empty`'s `size`, `upsample`'s
        # `output_size`, `empty_strided`'s with its `stride`), not a window's (int[]: `avg_pool2d`'s
        # `kernel_size`, whose `stride` is the window's step)
        # and a convolution (a SymInt[] `stride`): its CPU kernel picks a backend, and with it the layout,
        # by the sizes (a depthwise 1-d convolution's result is channels-last), so twins mispredict it
        told = re.search(r"\bSymInt\[\d*\]\?? (\w*size|stride)", str(schema)) is not None
        known = _PLAIN[func] = (
            not schema.is_mutable and bool(schema.returns) and not told
            and all(r.alias_info is None for r in schema.returns)
            and not any(a.name == "memory_format" for a in schema.arguments))
    return known


def _memory_order(t) -> tuple:
    """Dimensions from outermost to innermost in memory. A size-1 dimension holds no elements but its stride is
    read (``cat`` lays out its result by ``suggest_memory_format``, which tells a (B, 1, H, W) of strides
    (HW, HW, W, 1) from one of (HW, 1, W, 1)): it goes where its stride puts it, after a dimension of the same
    stride, so dense strides in this order give it the stride it had."""
    return tuple(sorted(range(t.dim()), key=lambda d: (-t.stride(d), t.shape[d] == 1, d)))


def _twin(t, small):
    """Zeros of the mapped sizes in ``t``'s memory order (a broadcast dimension stays broadcast)."""
    sizes = [small.get(n, n) for n in t.shape]
    dense = [d for d in range(t.dim()) if t.stride(d) != 0 or t.shape[d] == 1]
    order = [d for d in _memory_order(t) if d in dense] + [d for d in range(t.dim()) if d not in dense]
    base = torch.zeros([sizes[d] if d in dense else 1 for d in order], dtype=t.dtype)
    return base.permute([order.index(d) for d in range(t.dim())]).expand(sizes)


_SIZE_SCALARS: dict = {}


def _size_scalars(func) -> frozenset:
    """Names of the op's SymInt arguments (the schema's own mark of a size; Python's types say only int)."""
    names = _SIZE_SCALARS.get(func)
    if names is None:
        names = _SIZE_SCALARS[func] = frozenset(re.findall(r"\bSymInt\?? (\w+)", str(func._schema)))
    return names


def _twin_size(n: int, small: dict, flat: list) -> int:
    """A size argument's twin (the schema's SymInt: group norm's ``N``, ``C``, ``HxW``): a dimension's small size,
    or the product of a run of a tensor's dimensions mapped so; any other number stays (the twin call then
    fails or makes a result of another rank, and the fake kernel's strides stay)."""
    if n in small:
        return small[n]
    for t in flat:
        for i in range(t.dim()):
            product, mapped = t.shape[i], small.get(t.shape[i], t.shape[i])
            for j in range(i + 1, t.dim()):
                product, mapped = product * t.shape[j], mapped * small.get(t.shape[j], t.shape[j])
                if product == n:
                    return mapped
    return n


def _twin_arg(a, name, small: dict, shape_args: set, scalars: dict):
    """An argument's twin. Not a closure in ``cpu_orders``: a nested function that calls itself (for a list) is a
    reference cycle, and with the call's tensors in its closure it kept them (a step's activations) alive, and
    counted as device memory, until the cycle collector ran; a real run frees them at once."""
    if isinstance(a, torch.Tensor):
        return _twin(a, small)
    if name in scalars and isinstance(a, int):
        return scalars[name]
    if isinstance(a, (list, tuple)):
        if name in shape_args:
            return [small.get(n, n) if isinstance(n, int) else n for n in a]
        return [_twin_arg(x, None, small, shape_args, scalars) for x in a]
    return a


def _dense_strides(shape, order) -> list:
    strides, step = [0] * len(shape), 1
    for d in reversed(order):
        strides[d] = step
        step *= max(shape[d], 1)
    return strides


def cpu_orders(func, args, kwargs, outs):
    """Per result in ``outs``: its dimensions' memory order as the CPU kernel lays it out, or None."""
    if not _plain_op(func):
        return None
    flat = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            flat.extend(t for t in a if isinstance(t, torch.Tensor))
    ranks = {t.dim() for t in flat}
    if not any(isinstance(o, torch.Tensor) and o.dim() >= 2 and o.dim() in ranks for o in outs):
        return None
    sizes = sorted({n for t in (*flat, *(o for o in outs if isinstance(o, torch.Tensor))) for n in t.shape if n > 1})
    small = {n: i + 2 for i, n in enumerate(sizes)}
    schema_args = func._schema.arguments
    names = [a.name for a in schema_args]
    shape_args = {a.name for a in schema_args if "shape" in a.name}
    size_scalars = _size_scalars(func)
    named = (*zip(names, args), *kwargs.items())
    scalars = {name: _twin_size(value, small, flat) for name, value in named
               if name in size_scalars and isinstance(value, int)}
    shape_values = tuple(tuple(small.get(n, n) if isinstance(n, int) else n for n in value)
                         for name, value in named
                         if name in shape_args and isinstance(value, (list, tuple))) + tuple(scalars.items())
    key = (func, tuple((t.dtype, tuple(small.get(n, n) for n in t.shape), tuple(s == 0 for s in t.stride()),
                        _memory_order(t)) for t in flat),
           tuple(tuple(small.get(n, n) for n in o.shape) if isinstance(o, torch.Tensor) else None for o in outs),
           shape_values)
    orders = _ORDERS.get(key, False)
    if orders is False:
        from torch.utils._python_dispatch import _disable_current_modes

        orders = None
        with _disable_current_modes(), host_stream.kept():
            try:
                result = func(*(_twin_arg(a, names[i] if i < len(names) else None, small, shape_args, scalars)
                                for i, a in enumerate(args)),
                              **{k: _twin_arg(v, k, small, shape_args, scalars) for k, v in kwargs.items()})
                results = list(result) if isinstance(result, (tuple, list)) else [result]
                if len(results) == len(outs):
                    orders = tuple(
                        _memory_order(r) if isinstance(r, torch.Tensor) and isinstance(o, torch.Tensor)
                        and r.dim() == o.dim() and all((a > 1) == (b > 1) for a, b in zip(r.shape, o.shape))
                        else None
                        for r, o in zip(results, outs))
            except Exception:  # noqa: BLE001 - twins the op refuses: the fake kernel's strides stay
                orders = None
        _ORDERS[key] = orders
    return orders


def cpu_layout(func, args, kwargs, out):
    """``out``, with every result the CPU kernel lays out otherwise replaced by a fake in its strides."""
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    orders = cpu_orders(func, args, kwargs, outs)
    if orders is None:
        return out
    fixed = []
    for o, order in zip(outs, orders):
        if isinstance(o, torch.Tensor) and order is not None and o.dim() >= 2:
            strides = _dense_strides(o.shape, order)
            if list(o.stride()) != strides:  # a size-1 dimension's stride too (see _memory_order)
                o = torch.empty_strided(o.shape, strides, dtype=o.dtype, device=o.device)
        fixed.append(o)
    if not isinstance(out, (tuple, list)):
        return fixed[0]
    return type(out)(fixed) if isinstance(out, list) else tuple(fixed)
