"""The comparison rule of a data-dependent split, for ``shape_only_compare.py`` (issue 36 item 5).

A shape-only run takes a histogram of values it did not compute (a mixture-of-experts router's tokens per
expert: ``torch.histc``, ``torch.bincount(minlength=)``) as an even split and lists it as a ``shape_only``
``size_rule`` event with ``rule: "even_split"`` (neuron_backend/shape_only/values.py). A real run's split
is its router's, random at a zoo model's random weights, so the signatures of what the split sizes (the
grouped matmul's one ``mm`` per expert) cannot be equal: ``f32[5,16]`` x4 against ``f32[7,16]``,
``f32[3,16]``, ... What must be equal is the work: per op, the total calls and the total FLOPs (matmuls) or
elements (any other op) over its signatures. ``split_parity`` judges an op that way; an architecture whose
every differing op passes it is equal up to the assumed split (``equal_modulo_split``).

    from moe_parity import even_splits, split_parity
    if even_splits(shape_only_events):
        verdict = split_parity(real_eager_signatures, fake_eager_signatures)

Both arguments are ``{op: {signature_json: calls}}``, the sweep's ``eager_signatures``. The events are the
shape-only run's ``shape_only`` events (``neuron_backend.stats()["events"]``); the worker records those
of an even split as ``even_splits``.
"""

from __future__ import annotations

import json
import re

# ops whose work is a matrix product of their first two tensor arguments: (M x K) @ (K x N), batched or not
MATMULS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm", "aten::matmul")
_TENSOR = re.compile(r"^[a-z]+\d*\[([\d,]*)\]")


def even_splits(events) -> list[dict]:
    """The shape-only run's assumed even splits: its ``shape_only`` ``size_rule`` events of that rule."""
    return [e for e in events or () if e.get("kind", "shape_only") == "shape_only" and e.get("event") == "size_rule"
            and e.get("rule") == "even_split"]


def _shapes(signature: str) -> list[list[int]]:
    """The tensor shapes of a signature (``'["f32[5,16]", "f32[16,32]nc", "1"]'``), in order; a list
    argument's tensors (``"[i64[20]]"``) are not work of the op and are left out."""
    try:
        args = json.loads(signature)
    except ValueError:
        return []
    out = []
    for arg in args if isinstance(args, list) else ():
        m = _TENSOR.match(arg) if isinstance(arg, str) else None
        if m:
            out.append([int(d) for d in m.group(1).split(",") if d])
    return out


def work(op: str, signature: str) -> int:
    """One call's work: FLOPs of a matmul (2 M K N, times the batch), else the elements of its tensors."""
    shapes = _shapes(signature)
    base = op.split(".")[0]
    if base in MATMULS:
        mats = shapes[1:3] if base in ("aten::addmm", "aten::baddbmm", "aten::addbmm") else shapes[:2]
        if len(mats) == 2 and len(mats[0]) >= 2 and len(mats[1]) >= 2:
            batch = 1
            for d in mats[0][:-2]:
                batch *= d
            return 2 * batch * mats[0][-2] * mats[0][-1] * mats[1][-1]
    total = 0
    for shape in shapes:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def totals(signatures: dict, op: str) -> tuple[int, int]:
    """(calls, work) of one op over its signatures."""
    calls = sum(signatures.values())
    return calls, sum(c * work(op, s) for s, c in signatures.items())


_SIZES = re.compile(r"\[[\d,]*\]")


def kinds(signatures: dict) -> dict:
    """The signatures with their sizes erased (``f32[5,16]nc`` -> ``f32[*]nc``), calls summed: what a split
    cannot change (the dtypes, the layouts, the non-tensor arguments, the number of calls of each), so a
    layout or dtype difference in an MoE model is not excused as the split's."""
    out: dict = {}
    for sig, calls in signatures.items():
        key = _SIZES.sub("[*]", sig)
        out[key] = out.get(key, 0) + calls
    return out


def _degenerate(signature: str) -> bool:
    """A tensor of the signature has a dimension of size 0 or 1: its layout flag follows from its sizes
    (PyTorch calls ``[64, 1]`` contiguous whatever its strides: an expert's one-token slice, transposed)."""
    return any(any(d <= 1 for d in shape) for shape in _shapes(signature))


def kinds_equal(real: dict, fake: dict) -> bool:
    """``kinds`` equal, where a signature with a degenerate tensor (``_degenerate``: its layout flag is its
    sizes', and a split decides the sizes) may stand for either layout of the same dtypes and arguments:
    per pattern without layout flags, equal totals, and each side's surplus of a layout covered by the
    other side's degenerate calls."""
    def split(signatures):
        strict: dict = {}
        loose: dict = {}
        for sig, calls in signatures.items():
            kind = _SIZES.sub("[*]", sig)
            pattern = kind.replace("]nc", "]")
            if _degenerate(sig):
                loose[pattern] = loose.get(pattern, 0) + calls
            else:
                strict.setdefault(pattern, {})
                strict[pattern][kind] = strict[pattern].get(kind, 0) + calls
        return strict, loose

    (rs, rl), (fs, fl) = split(real), split(fake)
    for pattern in set(rs) | set(rl) | set(fs) | set(fl):
        r, f = rs.get(pattern, {}), fs.get(pattern, {})
        if sum(r.values()) + rl.get(pattern, 0) != sum(f.values()) + fl.get(pattern, 0):
            return False
        short_r = sum(max(0, f.get(k, 0) - r.get(k, 0)) for k in set(r) | set(f))
        short_f = sum(max(0, r.get(k, 0) - f.get(k, 0)) for k in set(r) | set(f))
        if short_r > rl.get(pattern, 0) or short_f > fl.get(pattern, 0):
            return False
    return True


def split_parity(real: dict, fake: dict) -> dict:
    """Per op whose signatures differ, the real and shape-only (calls, work) and whether they match;
    ``equal_modulo_split``: every such op matches: equal total calls and work, and equal signatures once sizes
    are erased (``kinds_equal``). ``real``/``fake``: ``{op: {signature: calls}}``."""
    ops = {}
    for op in sorted(set(real) | set(fake)):
        r, f = real.get(op) or {}, fake.get(op) or {}
        if r == f:
            continue
        (rc, rw), (fc, fw) = totals(r, op), totals(f, op)
        ops[op] = {"real": [rc, rw], "shape_only": [fc, fw], "calls_equal": rc == fc, "work_equal": rw == fw,
                   "kinds_equal": kinds_equal(r, f)}
    return {"equal_modulo_split": all(v["calls_equal"] and v["work_equal"] and v["kinds_equal"] for v in ops.values()),
            "ops": ops}
