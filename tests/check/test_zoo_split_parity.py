"""The zoo comparison's rule for a router's split (bench/zoo/moe_parity.py, shape_only_compare.split_equal): a
shape-only run takes tokens per expert as an even split, a real run's is random, so the expert matmuls' sizes
differ; the architecture counts as equal only when the split is all that differs (same calls, same FLOPs,
same signatures with their sizes erased) and the shape-only run noted the assumption."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench" / "zoo"))
import shape_only_compare  # noqa: E402


def sig(*args):
    return json.dumps(list(args))


def sim(mms: dict, even_splits=True, extra=None):
    eager = {"aten::mm.out": mms, "aten::softmax": {sig("f32[10,4]", "-1", "False"): 2}}
    eager.update(extra or {})
    return {"eager_signatures": eager, "fallback_ops": {}, "unsupported": [], "float64_calls": {},
            "even_splits": [{"op": "aten::histc", "shape": [2]}] if even_splits else []}


REAL = sim({sig("f32[8,16]", "f32[16,32]nc", "f32[8,32]"): 1, sig("f32[2,16]", "f32[16,32]nc", "f32[2,32]"): 1},
           even_splits=False)
EVEN = {sig("f32[5,16]", "f32[16,32]nc", "f32[5,32]"): 2}


@pytest.mark.parametrize("fake,equal", [
    (sim(EVEN), True),  # the split alone: 10 rows either way
    (sim(EVEN, even_splits=False), False),  # no assumption noted: a difference is a difference
    (sim({sig("f32[5,16]", "f32[16,32]", "f32[5,32]"): 2}), False),  # a layout lost: not the split's
    (sim({sig("f32[6,16]", "f32[16,32]nc", "f32[6,32]"): 2}), False),  # 12 rows: other work
    (sim({sig("f32[5,16]", "f32[16,32]nc", "f32[5,32]"): 1, sig("f32[5,16]", "f32[16,32]nc", "f32[5,32]") + " ": 0}),
     False),  # one call fewer
    (sim(EVEN, extra={"aten::softmax": {sig("f32[10,4]", "-1", "False"): 3}}), False),  # another op differs
])
def test_split_equal(fake, equal):
    rest = shape_only_compare.subclass_differences(REAL, fake)
    assert rest, "the sizes differ"
    assert shape_only_compare.split_equal(REAL, fake, rest) is equal


def test_compare_counts_it():
    def doc(s):
        return {"machine": {}, "architectures": [{"id": "causal:moe", "class": "MoeForCausalLM", "cpu_ok": True,
                                                  "sim_ok": True, "raw": {"sim": {**s, "shape_only_active": True}}}]}
    out = shape_only_compare.compare(doc(REAL), doc(sim(EVEN)))
    assert (out["equal"], out["equal_modulo_subclass_paths"], out["equal_modulo_split"]) == (0, 0, 1)
    assert "equal up to the assumed even split" in shape_only_compare.markdown(out)


def test_a_one_token_expert_layout_is_its_sizes():
    """An expert that got one token in the real run: its slice, transposed for the weight's gradient, is
    ``[16, 1]`` and PyTorch calls it contiguous; the even split's ``[16, 5]`` is not. Same work, same
    calls: the layout flag of a degenerate tensor is the split's, not a difference. A layout lost on a
    tensor of full sizes still is one."""
    real = sim({sig("f32[16,9]nc", "f32[9,32]", "f32[16,32]"): 1, sig("f32[16,1]", "f32[1,32]", "f32[16,32]"): 1},
               even_splits=False)
    fake = sim({sig("f32[16,5]nc", "f32[5,32]", "f32[16,32]"): 2})
    assert shape_only_compare.split_equal(real, fake, shape_only_compare.subclass_differences(real, fake))
    lost = sim({sig("f32[16,5]", "f32[5,32]", "f32[16,32]"): 2})
    assert not shape_only_compare.split_equal(real, lost, shape_only_compare.subclass_differences(real, lost))
