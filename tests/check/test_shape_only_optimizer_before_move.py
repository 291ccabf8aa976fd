"""An optimizer built before `model.to("neuron")` in a shape-only run (sthalles/SimCLR builds its Adam on the CPU
model and its trainer moves the model; found by the real-project scoreboard's shape-only pass, bench/projects).
A real move sets each parameter's `.data`, so the optimizer's Parameter objects are the module's and its step
updates the moved weights. A fake cannot be set as a CPU parameter's `.data`, so PyTorch made new Parameters:
the optimizer kept the CPU ones (no gradient), its step did nothing (no state, no ops, no optimizer memory)
and the run reported a model that never trains. An LSTM's weak references to its parameters made the swap that
fixes it fail at the move (pytorch/examples' word_language_model, mnist_rnn). The real run is the reference: same printed line."""

from __future__ import annotations

import pytest

from conftest import run_script

pytestmark = pytest.mark.slow

SCRIPT = """
import torch, torch.nn as nn

class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.body, self.rnn = nn.Embedding(16, 8), nn.Linear(8, 8), nn.LSTM(8, 8)
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, x):
        return self.head(self.rnn(self.body(self.embed(x)))[0])

model = Tied()
held = list(model.parameters())
optimizer = torch.optim.Adam(model.parameters(), 1e-3)
model = model.to("neuron")
x = torch.randint(0, 16, (2, 4), device="neuron")
model(x).sum().backward()
optimizer.step()
print("moved", all(a is b for a, b in zip(held, model.parameters())), model.head.weight is model.embed.weight,
      all(a is b for a, b in zip(model.rnn._flat_weights, model.rnn.parameters())), len(optimizer.state), sorted({str(p.device) for p in optimizer.param_groups[0]["params"]}),
      all(p.grad is not None for p in optimizer.param_groups[0]["params"]))
"""


@pytest.mark.parametrize("shape_only", [False, True], ids=["real", "shape-only"])
def test_an_optimizer_built_before_the_move_steps_the_moved_parameters(tmp_path, sim_build, shape_only):
    stdout = run_script(tmp_path, SCRIPT, shape_only)
    assert "moved True True True 7 ['neuron:0'] True" in stdout
