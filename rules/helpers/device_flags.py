"""Device flags: names and fields that hold the truth of device tests (``cuda = torch.cuda.is_available()``,
``True if torch.cuda.is_available() else False``, ``self.is_cuda = device.type == "cuda" and ...``), so that
decision groups (``decision_groups.py``) make a flag one decision with every test it holds and every read of it.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.nodes import string_value

# A GPU named in an accelerator vocabulary (Lightning's `accelerator="gpu"`): a device test chooses it as it
# chooses "cuda", but no rule can rename it (Lightning has no neuron accelerator), so a test choosing it is
# flipped only with it: decision_groups.py follows it as a device value, for a kept value to hold it.
GPU_ACCELERATOR_NAMES = frozenset({"gpu"})


def is_flag_value(value: cst.BaseExpression, polarity) -> bool:
    """A value that is the truth of device tests: a test, its same truth, ``not`` of one, or an ``and`` / ``or``
    with one among its terms (what a flag holds; a ternary choosing ``"cuda"`` or ``"cpu"`` is a device value,
    followed as one by ``_device_values``)."""
    from neuron_port.rules.no_port.cuda_only_guards import same_truth

    value = same_truth(value)
    kind = type(value)
    if kind is cst.UnaryOperation and type(value.operator) is cst.Not:
        return is_flag_value(value.expression, polarity)
    if kind is cst.BooleanOperation:
        return is_flag_value(value.left, polarity) or is_flag_value(value.right, polarity)
    return polarity(value) is not None


def flag_polarity(value: cst.BaseExpression, polarity) -> Optional[bool]:
    """What a flag assigned ``value`` says when read as a test: True where it is true only on CUDA (a test,
    the same truth of one, an ``and`` with such a term), False where it is false only on CUDA (``not`` of
    that, an ``or`` with a negated term), None for anything else (still one decision with its tests)."""
    from neuron_port.rules.no_port.cuda_only_guards import same_truth

    value = same_truth(value)
    kind = type(value)
    if kind is cst.UnaryOperation and type(value.operator) is cst.Not:
        inner = flag_polarity(value.expression, polarity)
        return None if inner is None else not inner
    if kind is cst.BooleanOperation:
        when = type(value.operator) is cst.And
        terms = [value.left, value.right]
        return when if any(flag_polarity(t, polarity) is when for t in terms) else None
    return polarity(value)


def enumerates_devices(test: cst.Comparison) -> bool:
    """``device_type in ["cuda", "mps", "cpu"]``: a test that accepts other devices too. Kept while the value
    it tests is ported, it refuses ``"neuron"`` where it accepted ``"cpu"``, so it is one decision with the
    value. (Kept, ``device.type == "cuda"`` takes on Trainium the branch a host without CUDA takes, as the
    original program does there: a test about a CUDA feature stays one, ``device.type != "cuda"`` before an
    FP8 warning.)"""
    target = test.comparisons[0]
    collection = target.comparator
    return (type(target.operator) in (cst.In, cst.NotIn) and type(collection) in (cst.List, cst.Tuple, cst.Set)
            and any(type(e) is cst.Element and string_value(e.value) not in (None, "cuda")
                    for e in collection.elements))


def assigned_targets(nodes) -> set:
    """The ``Name`` / ``Attribute`` nodes that are assignment targets (not reads)."""
    return {t.target for n in nodes if type(n) is cst.Assign for t in n.targets
            if type(t.target) is cst.Name or type(t.target) is cst.Attribute}
