"""Every value of a compiled graph runs with the strides its trace gave it (issue 39).

AOTAutograd traces each graph with fake tensors and decides from their strides what the graph needs:
a ``.contiguous()`` the trace found unnecessary is not in the graph, and a CPU kernel that assumes two
inputs share a layout (``native_group_norm_backward`` reads its gradient with the input's memory
format) then reads wrong numbers if a kernel returned other strides than its fake kernel declared.
The simulator's own kernels return the declared strides (convolution.cpp, rnn.cpp, sdpa.cpp;
bench/zoo/stride_audit.py checks every op against its fake kernel). Some of PyTorch's CPU kernels,
which the simulator runs for every other op, do not (``native_layer_norm_backward`` on a permuted
input returns contiguous strides, its fake kernel the input's): harmless on the CPU, where GroupNorm's
backward formula copies its gradient into the input's memory format, wrong on a PrivateUse1 device,
where the formula's ``grad.contiguous()`` is elided when the trace says it is contiguous. So every
value is checked, once built into the graph when it is compiled:

* after every op whose traced value is a tensor, a check compares the runtime strides with the traced
  ones (dimensions of size 1 ignored); equal strides cost one tuple comparison;
* a result in its own storage with other strides is copied into the traced layout: the values are
  right, only their layout differs, and on Trainium the compiler places every intermediate itself;
* a result that shares storage with an input of its op (a view, an in-place op) or a graph input
  cannot be moved without breaking the aliasing the graph relies on: the run stops with a
  ``[neuron-port simulator]`` error naming the op and the user's line, never a wrong number.
"""

from __future__ import annotations

import operator

PREFIX = "[neuron-port simulator] "


class LayoutMismatchError(RuntimeError):
    """A compiled graph's value has other strides than the trace declared and cannot be restrided."""


def _expected(val) -> tuple | None:
    """The traced strides of a tensor value (ints only: the compile path has static shapes)."""
    import torch

    if not isinstance(val, torch.Tensor) or val.layout != torch.strided:
        return None
    try:
        shape, stride = tuple(int(s) for s in val.shape), tuple(int(s) for s in val.stride())
    except (TypeError, RuntimeError):  # a symbolic size: nothing static to compare with
        return None
    if val.numel() <= 1:
        return None
    return shape, stride


def _differs(t, shape: tuple, stride: tuple) -> bool:
    return any(n > 1 and a != b for n, a, b in zip(shape, t.stride(), stride))


def _shares_storage(t, inputs) -> bool:
    ptr = t.untyped_storage().data_ptr()
    return any(getattr(i, "untyped_storage", None) is not None and i.untyped_storage().data_ptr() == ptr
               for i in inputs)


def _describe(node, kind: str) -> str:
    from .lowering import op_name, user_line

    target = node.target
    if target is operator.getitem and node.args and hasattr(node.args[0], "target"):
        name = f"{op_name(node.args[0].target) or node.args[0].target}[{node.args[1]}]"
        file, line = user_line(node.args[0])
    else:
        name = op_name(target) if node.op == "call_function" else f"input {node.name}"
        file, line = user_line(node)
    where = f" at {file}:{line}" if file else ""
    return f"aten::{name}{where} ({kind} graph)"


def restride(value, shape, stride, inputs, what: str):
    """``value`` in the traced layout: itself when its strides match, a copy when it owns its storage,
    else a LayoutMismatchError (see the module docstring)."""
    import torch

    if value.stride() == stride or not _differs(value, shape, stride):
        return value
    if inputs is None or _shares_storage(value, inputs):
        raise LayoutMismatchError(
            f"{PREFIX}{what} returned strides {tuple(value.stride())} where the compiled graph was traced with "
            f"{stride} (shape {shape}), and the result aliases its input, so the simulator cannot restride it: "
            "its numbers would be read with the wrong layout. Make the input contiguous before the compiled "
            "region (x.contiguous()) and report this op to neuron-port.")
    out = torch.empty_strided(shape, stride, dtype=value.dtype, device=value.device)
    return out.copy_(value)


def add_layout_checks(g, kind: str) -> int:
    """Insert the checks into graph module ``g`` (``kind``: forward, backward, inference); returns how many."""
    import torch

    graph = g.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    added = 0
    for node in list(graph.nodes):
        if node.op not in ("call_function", "placeholder"):
            continue
        exp = _expected(node.meta.get("val"))
        if exp is None:
            continue
        if node.op == "placeholder":
            # a graph input is checked, never copied: the graph may write into it (input mutations)
            anchor, sources = placeholders[-1], None
        else:
            anchor = node
            base = node.args[0] if node.target is operator.getitem else node
            sources = [a for a in base.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
        what = _describe(node, kind)
        with graph.inserting_after(anchor):
            checked = graph.call_function(restride, (node, exp[0], exp[1], sources, what))
        checked.meta = dict(node.meta)
        node.replace_all_uses_with(checked, delete_user_cb=lambda user, c=checked: user is not c)
        added += 1
    graph.lint()
    g.recompile()
    return added
