"""torch.compile(backend="neuron") lowers a write through a view: functionalization turns ``x[:, 1:3] = y``
into ``aten::slice_scatter``, ``x.diagonal().add_(1)`` into ``aten::diagonal_scatter`` and a gradient
written into a view of a fresh buffer into ``aten::as_strided_scatter`` (the backward of an adaptive
average pool to 1 x 1 and a flatten, as in torchvision's ConvNeXt). These are the functionalization
copies that TorchNeuron's compile path functionalizes and lowers (torchneuron.md 3.1, "functionalize
copy_/inplace"), the inverse of a view that lowers without a kernel. Found by the vision sweep: every
torchvision ConvNeXt failed to compile its backward on ``aten::as_strided_scatter``."""

from __future__ import annotations

import pytest

from .conftest import run_script

pytestmark = pytest.mark.slow


def test_the_scatter_inverse_of_every_structural_view_lowers():
    import torch

    from neuron_backend import policy
    from neuron_backend.compile import lowering

    native = set(policy.native_ops())
    inverses = [getattr(torch.ops.aten, f"{v}_scatter") for v in sorted(lowering.STRUCTURAL_OPS)
                if hasattr(torch.ops.aten, f"{v}_scatter")]
    assert {p.__name__ for p in inverses} >= {"slice_scatter", "select_scatter", "as_strided_scatter"}
    bad = [str(p) for p in inverses if not lowering._lowers_directly(p.default, native)]
    assert not bad, bad


SCRIPT = """\
import json, torch
import torch.nn as nn
def result(**kw): print("RESULT:" + json.dumps(kw), flush=True)

def write_views(x, y):  # WRITES
    x = x.clone()
    x[:, 1:3] = y
    x.diagonal().add_(1.0)
    x[0].mul_(2.0)
    return x

class Head(nn.Module):  # HEAD: ConvNeXt's classifier end
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(6, 3)
    def forward(self, x):
        return self.fc(torch.flatten(self.pool(x), 1))

torch.manual_seed(0)
x, y = torch.randn(4, 4), torch.randn(4, 2)
want = write_views(x, y)
got = torch.compile(write_views, backend="neuron")(x.to("neuron"), y.to("neuron"))
out = {"writes": (got.cpu() - want).abs().max().item()}

cpu = Head()
dev = Head().to("neuron")
dev.load_state_dict(cpu.state_dict())
inp = torch.randn(2, 6, 2, 2)
cpu(inp).square().sum().backward()
torch.compile(dev, backend="neuron")(inp.to("neuron")).square().sum().backward()
out["head_grads"] = max((p.grad.cpu() - q.grad).abs().max().item() for p, q in zip(dev.parameters(), cpu.parameters()))
result(**out)
"""


@pytest.fixture(scope="module")
def run(sim_build, tmp_path_factory):
    root = tmp_path_factory.mktemp("compile_view_writes")
    return run_script(SCRIPT, root, root / "neff-cache")


def test_writes_through_views_compile_and_give_the_cpu_numbers(run):
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    res = run.results()
    assert res["writes"] <= 1e-6 and res["head_grads"] <= 1e-5, res
    evs = [e for e in run.kind("compile") if e["event"] in ("compile", "recompile")]
    names = {e["function"]["name"] for e in evs}
    assert {"write_views", "Head.forward"} <= names, names
    for e in evs:
        assert e["status"] == "compiled" and not e.get("unsupported_ops"), e
    head, = [e for e in evs if e["function"]["name"] == "Head.forward"]
    assert {g["graph"] for g in head["graphs"]} >= {"forward", "backward"}, head["graphs"]
