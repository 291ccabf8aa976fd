"""NP2xx beyond the per-rule examples, with every rule enabled (as `neuron-port rewrite` runs them): the
torch.cuda tables (NP201 / NP202)."""

from __future__ import annotations

import pytest

from rule_runs import findings_of as codes, rewrite_twice as run


# -- torch.cuda tables (NP201 / NP202) -------------------------------------------------------------

def test_reset_max_memory_allocated_becomes_reset_peak_memory_stats():
    code, _ = run("import torch\ntorch.cuda.reset_max_memory_allocated()\n")
    assert code == "import torch\ntorch.neuron.reset_peak_memory_stats()\n"
    code, _ = run("import torch\ntorch.cuda.reset_max_memory_allocated()\n", target="accelerator")
    assert code == "import torch\ntorch.accelerator.reset_peak_memory_stats()\n"


@pytest.mark.parametrize("line, needle", [
    ("snap = torch.cuda.memory._snapshot()", "memory snapshots"),
    ("from torch.cuda.memory import _record_memory_history\n_record_memory_history(max_entries=100)", "history"),
    ("states = torch.cuda.random.get_rng_state_all()", "get_rng_state(i)"),
    ("torch.cuda.set_rng_state_all(states)", "set_rng_state(state, i)"),
    ("try:\n    step()\nexcept torch.cuda.OutOfMemoryError:\n    pass", "torch.OutOfMemoryError"),
    ("free, total = torch.cuda.mem_get_info()", "total_memory"),  # the entries before stay
    ("torch.cuda.ipc_collect()", "CUDA IPC"),
])
def test_torch_cuda_idioms_without_a_neuron_name_are_reported(line, needle):
    _, findings = run("import torch\n" + line + "\n")
    assert any(needle in f.message for f in codes(findings, "NP202"))
