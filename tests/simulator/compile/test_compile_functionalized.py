"""torch.compile(backend="neuron") lowers the functional form that AOTAutograd's functionalization gives a
native in-place op (``x.uniform_()`` is ``aten::uniform`` in the graph, ``normal_`` is
``aten::normal_functional``, ``bernoulli_(p)`` is ``aten::bernoulli.p``): TorchNeuron's compile path
functionalizes in-place ops and legalises random ops itself (torchneuron.md section 3.1), so an op that
runs natively in eager does not fail the graph because functionalization renamed it. Found by the vision
sweep (bench/zoo/vision_sweep.py): every torchvision detection model failed to compile on
``aten::uniform`` (GeneralizedRCNNTransform.torch_choice: ``torch.empty(1).uniform_(...)``)."""

from __future__ import annotations

import pytest

from .conftest import run_script

pytestmark = pytest.mark.slow


def _functional_forms(name: str) -> list:
    """The aten overloads functionalization may turn in-place ``name`` (``op_``) into."""
    import torch

    stem = name[:-1]
    out = []
    for packet_name in (stem, f"{stem}_functional"):
        packet = getattr(torch.ops.aten, packet_name, None)
        if packet is None:
            continue
        out += [getattr(packet, o) for o in packet.overloads()
                if not getattr(packet, o)._schema.is_mutable and "out" not in o]
    return out


def test_every_native_in_place_op_lowers_in_its_functional_form():
    from neuron_backend import policy
    from neuron_backend.compile import lowering

    native = set(policy.native_ops())
    in_place = sorted(n for n in native if n.endswith("_") and not n.endswith("__") and "." not in n)
    assert {"uniform_", "bernoulli_", "normal_", "exponential_", "add_"} <= set(in_place)
    checked, bad = 0, []
    for name in in_place:
        for overload in _functional_forms(name):
            checked += 1
            if not lowering._lowers_directly(overload, native):
                bad.append(str(overload))
    assert checked > 40, checked
    assert not bad, bad


def test_a_functional_op_of_a_non_native_in_place_op_still_fails():
    import torch

    from neuron_backend import policy
    from neuron_backend.compile import lowering

    native = set(policy.native_ops())
    assert "cauchy_" not in native
    assert not lowering._lowers_directly(torch.ops.aten.cauchy.default, native)


SCRIPT = """\
import json, torch
def result(**kw): print("RESULT:" + json.dumps(kw), flush=True)

def noisy(x):  # NOISY
    u = torch.empty_like(x).uniform_(0.0, 1.0)
    b = torch.empty_like(x).bernoulli_(0.5)
    n = torch.empty_like(x).normal_()
    scale = int(torch.empty(1).uniform_(0.0, 3.0).item())  # a CPU tensor, as torchvision's detection transform does
    return x * u + b + n, scale

torch.manual_seed(3)
x = torch.randn(4, 5, device="neuron")
out, scale = torch.compile(noisy, backend="neuron")(x)
result(shape=list(out.shape), finite=bool(out.isfinite().all().item()), scale=scale)
"""


@pytest.fixture(scope="module")
def run(sim_build, tmp_path_factory):
    root = tmp_path_factory.mktemp("compile_functionalized")
    return run_script(SCRIPT, root, root / "neff-cache")


def test_in_place_random_ops_compile(run):
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    res = run.results()
    assert res["shape"] == [4, 5] and res["finite"] and 0 <= res["scale"] <= 3, res
    evs = [e for e in run.kind("compile") if e["event"] in ("compile", "recompile") and e["function"]["name"] == "noisy"]
    assert evs and all(e["status"] == "compiled" and not e.get("unsupported_ops") for e in evs), evs
