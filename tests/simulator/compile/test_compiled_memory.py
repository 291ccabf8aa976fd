"""A compiled graph's device memory is what the compiled program uses (issue 36 item 4): its inputs, held for
the whole run, and its outputs (the result, what AOTAutograd saves for the backward, the gradients), not
each intermediate of the graph, which on Trainium lives in the NEFF's scratchpad, outside the allocator's
statistics. Eager ops still count every tensor they make. The same in a real and a shape-only run."""

from __future__ import annotations

import pytest

from .conftest import run_script

pytestmark = pytest.mark.slow  # a compile per run: about 15 s each on 2 busy cores

SCRIPT = r"""
import json, torch

def result(**kw): print("RESULT:" + json.dumps(kw), flush=True)
n = 1 << 18  # 1 MiB of float32 per tensor
x = torch.randn(n, device="neuron", requires_grad=True)
w = torch.randn(n, device="neuron", requires_grad=True)

def f(x, w):
    return ((x * w).exp() * 3).sin().sum()

def measured(fn):
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    out = fn()
    return out, torch.neuron.max_memory_allocated() - base, torch.neuron.memory_allocated() - base

g = torch.compile(f, backend="neuron")
with torch.no_grad():
    g(x, w)
    _, eager_peak, _ = measured(lambda: f(x, w))
    _, compiled_peak, _ = measured(lambda: g(x, w))
g(x, w).backward()  # compile the training graphs
x.grad = w.grad = None
loss, forward_peak, saved = measured(lambda: g(x, w))
_, backward_peak, _ = measured(lambda: loss.backward())
result(eager=eager_peak, compiled=compiled_peak, forward_peak=forward_peak, saved=saved,
       backward_peak=backward_peak, grads=x.grad.nbytes + w.grad.nbytes)
"""


@pytest.mark.parametrize("shape_only", ["0", "1"])
def test_a_compiled_graph_counts_its_inputs_and_outputs_not_its_intermediates(tmp_path, sim_build, shape_only):
    run = run_script(SCRIPT, tmp_path / "run", tmp_path / "neff", env={"NEURON_PORT_SHAPE_ONLY": shape_only})
    r = run.results()
    mib = 1 << 20
    assert r["eager"] == 2 * mib  # eager: x * w and its exp alive at once
    assert r["compiled"] == 4  # compiled: the float32 result; the four MiB intermediates are the NEFF's own
    # training: the forward's peak is what it leaves for the backward (AOTAutograd's saved tensors) and the loss
    assert r["forward_peak"] == r["saved"] and mib <= r["saved"] <= 2 * mib + 64
    # the backward holds its inputs (the saved tensors) to its end and returns the two gradients
    assert r["backward_peak"] <= r["grads"] + 64 and r["grads"] == 2 * mib
