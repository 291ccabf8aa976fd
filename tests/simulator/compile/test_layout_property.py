"""torch.compile(backend="neuron") over input layouts: random chains of ops on strided inputs give the
CPU's outputs and gradients (issue 39).

A GroupNorm -> SiLU -> Conv2d chain on a channels_last view had gradients 130% off under the neuron
backend while eager and ``aot_eager`` were exact: the simulator's convolution returned channels_last
results where PyTorch's fake kernel for a PrivateUse1 convolution declares contiguous ones, so the
compiled backward skipped a ``.contiguous()`` and ``native_group_norm_backward`` read its gradient with
the wrong layout. layout_chains.py draws the chains (one process for all of them, seeded); on 858089d
the repro and 2 of the 48 chains fail, and its fixed chain (a mismatch of PyTorch's own CPU kernel,
which only the compiled graph's layout checks repair) fails without those checks. The layout checks
of the compiled graph (layout_check.py) are tested directly below: a result in other strides than
traced is moved into them, or, when it aliases its input, stops the run with a ``[neuron-port
simulator]`` error naming the op and the user's line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import RESULT, base_env

pytestmark = pytest.mark.slow
CHAINS = Path(__file__).with_name("layout_chains.py")
EXAMPLES = 48
TOLERANCE = 1e-4  # max|compiled - eager CPU| over the tensor's max (a gradient: at least 1% of the step's largest)


@pytest.fixture(scope="module")
def chains(sim_build, tmp_path_factory):
    root = tmp_path_factory.mktemp("layout_chains")
    proc = subprocess.run([sys.executable, str(CHAINS), "--examples", str(EXAMPLES), "--seed", "0"], cwd=root,
                          env=base_env(root / "events", root / "neff"), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [json.loads(line[len(RESULT):]) for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    assert lines and "repro" in lines[0], proc.stdout[-3000:] + proc.stderr[-3000:]
    return lines[0]["repro"], lines[1:]


def test_the_issue_repro_gives_the_cpu_gradient_on_every_path(chains):
    repro, _ = chains
    assert set(repro) == {"neuron None", "cpu aot_eager", "neuron neuron"}, repro
    assert all(v <= 1e-6 for v in repro.values()), repro


def test_random_chains_on_strided_inputs_match_eager_cpu_forward_and_backward(chains):
    _, examples = chains
    fixed = [e for e in examples if str(e["id"]).startswith("fixed-")]
    examples = [e for e in examples if e not in fixed]
    assert len(examples) == EXAMPLES and len(fixed) == 1
    # the draw covers what it claims: every layout, and channels_last views reaching a convolution
    assert {e["layout"] for e in examples} == {"contiguous", "channels_last", "transposed", "sliced", "expanded"}
    assert sum(1 for e in examples if e["layout"] == "channels_last" and "conv" in e["ops"][-1]) >= 3
    bad = [e for e in examples + fixed if e["error"] or not e["errors"]
           or any(v > TOLERANCE for v in e["errors"].values())]
    assert not bad, json.dumps([{k: e.get(k) for k in ("id", "layout", "ops", "errors", "error", "trace")}
                                for e in bad], indent=1)[:6000]
    assert all("d_input" in e["errors"] and len(e["errors"]) >= 2 for e in examples)


# ---------------------------------------------------------------- the compiled graph's layout checks
def _graph(fn, *args):
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn, tracing_mode="fake")(*args)


def test_a_result_in_other_strides_than_traced_is_moved_into_the_traced_ones():
    import torch

    from neuron_backend.compile.layout_check import add_layout_checks

    x = torch.randn(2, 3, 4, 5)
    g = _graph(lambda t: torch.relu(t) * 2, x)
    relu = next(n for n in g.graph.nodes if n.target is torch.ops.aten.relu.default)
    # what a kernel that returns channels_last results does: the graph was traced with contiguous ones
    relu.target = lambda t: torch.relu(t).contiguous(memory_format=torch.channels_last)
    relu.meta["val"] = torch.empty(2, 3, 4, 5, device="meta")
    assert add_layout_checks(g, "forward") >= 2
    out = g(x)
    assert torch.equal(out, torch.relu(x) * 2) and out.is_contiguous()


def test_an_aliasing_result_in_other_strides_stops_the_run_naming_the_op():
    import torch

    from neuron_backend.compile.layout_check import LayoutMismatchError, add_layout_checks

    x = torch.randn(4, 6)
    g = _graph(lambda t: t.t().sum(0), x)
    tnode = next(n for n in g.graph.nodes if n.target is torch.ops.aten.t.default)
    tnode.meta["val"] = torch.empty(6, 4, device="meta")  # traced as contiguous; the view cannot be
    tnode.meta["stack_trace"] = '  File "/home/user/train.py", line 12, in forward\n    y = x.t().sum(0)\n'
    add_layout_checks(g, "backward")
    with pytest.raises(LayoutMismatchError) as info:
        g(x)
    msg = str(info.value)
    assert msg.startswith("[neuron-port simulator] aten::t at /home/user/train.py:12 (backward graph)"), msg
    assert "(1, 6)" in msg and "(4, 1)" in msg, msg
