"""Two paths where a shape-only run could part from a real one, found by the zoo's shape-only sweep (bench/zoo,
issue 36 item 5), run as a user's script (NEURON_PORT_SIMULATE=1, with and without NEURON_PORT_SHAPE_ONLY=1):

- a view whose base then changes in place: autograd regenerates the view's backward. PyTorch records a view
  replay for a Python-dispatch tensor (FakeTensor) and none for a real one, so a real run's backward is
  ``as_strided_backward`` (a zero-filled flat buffer of the base's storage) where a shape-only run's is the
  view's own (``slice_backward``: a zero-fill of the view's input shape). A real run with PyTorch's view replay
  forced records exactly what the shape-only run records, and bench/zoo/shape_only_compare.py merges the two
  zero-fills (docs/shape-only.md, "Other subclass paths in autograd formulas");
- the host's random stream: the simulator's SDPA kernel draws its dropout seed from the host generator, so a
  later host draw (LayerDrop's ``torch.rand([]) < p``) and the layers it skips follow it; a shape-only run
  draws the same (seamless_m4t ran one attention layer more than the real run).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO, simulator_env

sys.path.insert(0, str(REPO / "bench" / "zoo"))
import shape_only_compare  # noqa: E402

SCRIPT = """
import json
import torch
import torch.nn as nn
import torch.nn.functional as F
import neuron_backend


def signatures():
    out = {}
    for e in neuron_backend.stats()["eager_compiles"]:
        if e.get("kind") == "eager_compile":
            sigs = out.setdefault(e["op"], {})
            sig = json.dumps(e["signature"])
            sigs[sig] = sigs.get(sig, 0) + e["calls"]
    return out


def since(before):
    out = {}
    for op, sigs in signatures().items():
        new = {s: c - before.get(op, {}).get(s, 0) for s, c in sigs.items()}
        new = {s: c for s, c in new.items() if c}
        if new:
            out[op] = new
    return out


torch.manual_seed(0)
lin = nn.Linear(8, 8).to("neuron")
x = torch.randn(4, 8).to("neuron")
steps = {}
for replay in (True, False):
    lin.zero_grad(set_to_none=True)
    before = signatures()
    with torch.autograd._force_original_view_tracking(replay):
        h = lin(x)
        v = h[:, :4]  # a view of h
        h.mul_(2)     # h changes in place: v's backward is regenerated
        (v.sum() + h.sum()).backward()
    steps["replayed" if replay else "plain"] = since(before)

before = signatures()
q = torch.randn(2, 4, 8, 16).to("neuron")
torch.manual_seed(1)
draws = []
for layer in range(8):
    draw = torch.rand([]).item()  # LayerDrop: a host draw decides whether the layer runs
    draws.append(round(draw, 6))
    if draw >= 0.6:
        q = F.dropout(F.scaled_dot_product_attention(q, q, q, dropout_p=0.1), 0.1)  # values nobody knows
steps["layers"] = since(before)
print("RESULT", json.dumps({"steps": steps, "draws": draws}))
"""


def run(tmp_path, shape_only: bool) -> dict:
    path = tmp_path / "paths.py"
    path.write_text(SCRIPT)
    env = simulator_env(NEURON_PORT_SIMULATE="1", NEURON_PORT_SHAPE_ONLY="1" if shape_only else "0")
    proc = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("RESULT ", 1)[1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, sim_build):
    tmp = tmp_path_factory.mktemp("paths")
    return {"real": run(tmp, False), "fake": run(tmp, True)}


@pytest.mark.slow
def test_a_view_whose_base_changed_in_place(runs):
    real, fake = runs["real"]["steps"], runs["fake"]["steps"]
    assert real["plain"]["aten::zero_"] == {'["f32[32]"]': 1}  # as_strided_backward: h's storage
    assert fake["plain"]["aten::zero_"] == {'["f32[4,8]"]': 1}  # slice_backward: v's input, h
    # PyTorch's own switch puts a real run on the subclass path: then both runs record the same
    assert fake["replayed"] == fake["plain"]
    assert real["replayed"] == fake["plain"]
    # the comparison's merge of the two paths, on the real run itself
    a, b = {"eager_signatures": real["plain"]}, {"eager_signatures": fake["plain"]}
    assert list(shape_only_compare.differences(shape_only_compare.findings(a), shape_only_compare.findings(b))
                ["eager_compiles"]) == ["aten::zero_"]
    assert shape_only_compare.subclass_differences(a, b) == {}


@pytest.mark.slow
def test_the_host_random_stream_follows_the_real_run(runs):
    real, fake = runs["real"], runs["fake"]
    sdpa = "aten::_scaled_dot_product_fused_attention_overrideable"
    assert 0 < sum(real["steps"]["layers"][sdpa].values()) < 8  # some layers dropped, some run
    assert fake["draws"] == real["draws"]
    assert fake["steps"]["layers"] == real["steps"]["layers"]


@pytest.mark.parametrize("real, fake, equal", [
    # as_strided_backward's flat buffer for the view replay's zero-fills of the views' inputs (no larger)
    ({'["f32[32]"]': 1, '["f32[2,3]"]': 1}, {'["f32[4,8]"]': 2, '["f32[2,3]"]': 1}, True),
    ({'["f32[32]"]': 2}, {}, True),  # a replayed view() backward zero-fills nothing
    ({'["f32[32]"]': 1}, {'["f32[4,9]"]': 1}, False),  # larger than any storage buffer
    ({'["f32[2,3]"]': 1}, {'["f32[2,3]"]': 2}, False),  # an extra zero-fill with no flat buffer to explain it
    ({}, {'["f32[32]"]': 1}, False),  # a flat zero-fill only the shape-only run makes
])
def test_the_comparison_merges_only_the_view_paths_zero_fills(real, fake, equal):
    a = {"eager_signatures": {"aten::zero_": real}} if real else {"eager_signatures": {}}
    b = {"eager_signatures": {"aten::zero_": fake}} if fake else {"eager_signatures": {}}
    assert (shape_only_compare.subclass_differences(a, b) == {}) is equal
