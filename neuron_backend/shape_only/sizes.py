"""Data-dependent sizes in a shape-only run (values.py's docstring: "Size rules"): the size of a
``dynamic_output_shape`` op's output (its upper bound, or a site's ``--size-rule``), a router's ``topk`` of
scores nobody knows taken as a balanced choice, and a histogram of values nobody knows taken as an even split
(a router's tokens per expert). Split from values.py, whose helpers it uses."""

from __future__ import annotations

import json
import os

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_leaves, tree_map

from .. import events
from .values import MAX_KNOWN_ELEMENTS, MAX_ROUTED_ELEMENTS, SIZE_RULES_ENV, note, set_value, value_of

_aten = torch.ops.aten

# Histograms of values: their bins (a router's experts) from the values' range, not from the values
_HISTOGRAMS = {_aten.histc.default, _aten.histc.out, _aten.bincount.default}


def _bincount_length(func, args, kwargs) -> int:
    """``bincount``'s ``minlength``: the number of bins it is asked for (0: none)."""
    if func is not _aten.bincount.default:
        return 0
    length = args[2] if len(args) > 2 else kwargs.get("minlength", 0)
    return length if isinstance(length, int) else 0


def even_histogram(func, args, kwargs, out):
    """A histogram of values nobody knows (``histc``, ``bincount`` with ``minlength`` and no weights): the
    N values taken as spread evenly over its B bins, N // B each and the remainder one each to the first
    bins, so the counts are known and what they size (``cumsum`` of them as a grouped matmul's offsets,
    read on the host) follows. A router's expert counts: the total of the groups is exact, only the split
    is assumed, the balanced one load-balancing losses aim for; listed as a ``size_rule`` (``even_split``).
    """
    if func not in _HISTOGRAMS or not isinstance(out, FakeTensor) or out.dim() != 1:
        return None
    values = args[0] if args else kwargs.get("self")
    bins = out.numel()
    if func is _aten.bincount.default and (bins != _bincount_length(func, args, kwargs) or
                                           (args[1] if len(args) > 1 else kwargs.get("weights")) is not None):
        return None  # weighted counts are sums of unknown weights: only their number of bins is known
    if not isinstance(values, FakeTensor) or not 0 < bins <= MAX_KNOWN_ELEMENTS or out.dtype == torch.bool:
        return None
    _note_even_split(func, bins)
    n = values.numel()
    with _disable_current_modes():
        counts = torch.full((bins,), n // bins, dtype=torch.int64)
        counts[:n % bins] += 1
        return counts.to(out.dtype)


def balanced_choice(args, kwargs, out):
    """(indices, E) for ``topk`` of scores nobody knows (a router's choice of experts): its indices taken as a balanced
    assignment, row t's k choices over the dimension's E entries ``(t * k + j) mod E`` (distinct in a row,
    as topk's are), so each entry is chosen by the same number of (row, slot) pairs, the remainder one more
    each to the first entries: the even split of ``even_histogram``, here as the choices themselves. What
    the program builds from them is then computed (known values): a one-hot mask, ``nonzero`` / ``where``
    per expert in an eager experts loop, a ``scatter`` + ``sum`` + ``.tolist()`` of expert sizes, a sort and
    a histogram, so each expert's tokens follow the split exactly. The values output stays unknown; the
    indices are valid ones (``0 <= i < E``), so a beam search's token and beam ids index as in a real run.
    """
    _, indices = out if isinstance(out, (tuple, list)) and len(out) == 2 else (None, None)
    scores = args[0] if args else kwargs.get("self")
    if not isinstance(indices, FakeTensor) or value_of(indices) is not None or not isinstance(scores, FakeTensor):
        return None
    if value_of(scores) is not None or scores.dim() == 0 or not 0 < indices.numel() <= MAX_ROUTED_ELEMENTS:
        return None
    dim = (args[2] if len(args) > 2 else kwargs.get("dim", -1)) % scores.dim()
    entries, k = scores.shape[dim], indices.shape[dim]
    with _disable_current_modes():
        rows = torch.arange(indices.numel() // k, dtype=torch.int64)
        choice = (rows[:, None] * k + torch.arange(k, dtype=torch.int64)) % entries
        rest = [s for i, s in enumerate(indices.shape) if i != dim]
        return choice.reshape(*rest, k).movedim(-1, dim).contiguous().to(indices.dtype), entries


def note_even_split(func, args, kwargs, out) -> None:
    """After values.note_known: a histogram whose values it could not compute gets the even split's, a
    ``topk`` of unknown scores the balanced choice (its indices; they carry the larger limit of routed
    values, values.MAX_ROUTED_ELEMENTS)."""
    if func is _aten.topk.default:
        made = balanced_choice(args, kwargs, out)
        if made is not None:
            _note_even_split(func, made[1])
            set_value(out[1], made[0], routed=True)
    elif func in _HISTOGRAMS and isinstance(out, FakeTensor) and value_of(out) is None:
        even = even_histogram(func, args, kwargs, out)
        if even is not None:
            set_value(out, even)


def _note_even_split(func, bins: int) -> None:
    note("size_rule", func._schema.name, rule="even_split", shape=[bins], upper_bound=None)



def _size_rules() -> dict[str, int]:
    text = os.environ.get(SIZE_RULES_ENV, "").strip()
    if not text:
        return {}
    try:
        rules = json.loads(text)
    except ValueError:
        return {}
    return {str(k): int(v) for k, v in rules.items() if isinstance(v, int) and v >= 0}


def _rule_for(site: dict | None) -> int | None:
    if site is None:
        return None
    path, line = site["file"].replace("\\", "/"), site["line"]
    for where, size in _size_rules().items():
        file, _, at = where.rpartition(":")
        if at.isdigit() and int(at) == line and (path == file or path.endswith("/" + file.lstrip("./"))):
            return size
    return None


def _stand_in(x, fill: str):
    if not isinstance(x, FakeTensor):
        return x
    if value_of(x) is not None:  # known data: the size it gives is exact
        return value_of(x)
    n = x.numel()
    if fill == "zeros":
        return torch.zeros(x.shape, dtype=x.dtype)
    if x.dtype == torch.bool:
        return torch.ones(x.shape, dtype=torch.bool)
    return torch.arange(1, n + 1, dtype=torch.float64).reshape(x.shape).to(x.dtype)


def data_dependent_shape(func, args, kwargs):
    """Outputs of a ``dynamic_output_shape`` op at its upper bound (or the site's size rule), as fake
    device tensors; exact, and not listed, when the size follows from known values alone."""
    device = next(a.device for a in (*args, *kwargs.values()) if isinstance(a, FakeTensor))
    length = _bincount_length(func, args, kwargs)
    if length > 0 and value_of(args[0]) is None and _rule_for(events.user_site()) is None:
        # counts of values nobody knows into ``minlength`` bins (a router's experts): the values are taken
        # to lie in those bins, spread evenly (see _even_histogram), so the size is ``minlength``
        _note_even_split(func, length)
        with _disable_current_modes():
            made = func(*tree_map(lambda x: _stand_in(x, "zeros"), args),
                        **tree_map(lambda x: _stand_in(x, "zeros"), kwargs))
        return torch.empty(made.shape, dtype=made.dtype, device=device)
    with _disable_current_modes():
        upper = func(*tree_map(lambda x: _stand_in(x, "ones"), args),
                     **tree_map(lambda x: _stand_in(x, "ones"), kwargs))
        site = events.user_site()
        size = _rule_for(site)
        lower = None
        if size is not None or any(value_of(a) is not None for a in tree_leaves((args, kwargs))):
            lower = func(*tree_map(lambda x: _stand_in(x, "zeros"), args),
                         **tree_map(lambda x: _stand_in(x, "zeros"), kwargs))
    upper_flat, lower_flat = _tensors(upper), _tensors(lower) if lower is not None else None
    if lower_flat is not None and [t.shape for t in upper_flat] == [t.shape for t in lower_flat]:
        # the size does not depend on the values nobody knows (a known mask): exact, nothing to list
        made = iter([torch.empty(t.shape, dtype=t.dtype, device=device) for t in upper_flat])
        return tree_map(lambda x: next(made) if isinstance(x, torch.Tensor) else x, upper)
    shapes = []
    for i, t in enumerate(upper_flat):
        shape = list(t.shape)
        if size is not None and lower_flat is not None:
            shape = [size if lo != up else up for up, lo in zip(shape, lower_flat[i].shape)]
        shapes.append(shape)
    note("size_rule", func._schema.name, rule="site" if size is not None else "upper_bound",
          shape=shapes[0] if shapes else [], upper_bound=list(upper_flat[0].shape) if upper_flat else [])
    made = iter([torch.empty(s, dtype=t.dtype, device=device) for s, t in zip(shapes, upper_flat)])
    return tree_map(lambda x: next(made) if isinstance(x, torch.Tensor) else x, upper)


def _tensors(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for t in out if isinstance(t, torch.Tensor)] if isinstance(out, (tuple, list)) else []
