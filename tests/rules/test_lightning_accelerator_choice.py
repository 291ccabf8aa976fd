"""A Lightning accelerator chosen by a device test (held-out scoreboard project lightly-simclr-lightning,
session 39): `accelerator = "gpu" if torch.cuda.is_available() else "cpu"` passed to `Trainer(accelerator=...)`.
Lightning has no neuron accelerator, so the value the test chooses cannot be ported; flipping the test
alone made the program ask Lightning for a GPU on Trainium ("No supported gpu backend found!") where the
original ran on the CPU. The test and the accelerator it chooses are one decision: kept, and reported
(NP608) at the Trainer's argument."""

from __future__ import annotations

import json
import textwrap

from tests.conftest import run_cli, simulator_env
from neuron_port.api import rewrite_source

SCRIPT = textwrap.dedent("""
    import torch
    import lightning as L

    class Regressor(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_index):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    accelerator = "gpu" if torch.cuda.is_available() else "cpu"
    trainer = L.Trainer(max_epochs=1, devices=1, accelerator=accelerator, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Regressor(), torch.utils.data.DataLoader(data, batch_size=8))
    print("trained on", trainer.strategy.root_device.type)
""").lstrip("\n")


def test_the_choice_is_kept_and_reported():
    code, findings = rewrite_source(SCRIPT, "train.py")
    assert code == SCRIPT  # the test is not flipped while the "gpu" it chooses stays
    lines = {f.line: f.code for f in findings if not f.fix.applied}
    assert lines.get(18) == "NP608", findings
    assert any(f.line == 17 and f.code == "NP201" and "kept" in f.message for f in findings), findings


def test_a_device_string_choice_for_lightning_is_kept_too():
    # "cuda" is a Lightning accelerator name as well; "neuron" is not one
    script = SCRIPT.replace('"gpu" if', '"cuda" if')
    code, findings = rewrite_source(script, "train.py")
    assert code == script
    assert any(f.code == "NP608" and f.line == 18 for f in findings), findings


def test_a_gpu_choice_out_of_the_trainers_sight_is_kept():
    # a notebook's cells are rewritten one by one: the choice in one cell, the Trainer in the next
    cells = [SCRIPT.split("accelerator = ")[0], 'accelerator = "gpu" if torch.cuda.is_available() else "cpu"\n',
             SCRIPT[SCRIPT.index("trainer = "):]]
    notebook = json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                      "source": cell.splitlines(keepends=True)} for cell in cells],
                           "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    code, findings = rewrite_source(notebook, "simclr.ipynb")
    assert "torch.cuda.is_available()" in code and "torch.neuron" not in code
    assert any(f.code == "NP608" for f in findings), findings
    # a Trainer's keywords filled here and passed to another module
    script = 'import torch\nkwargs = {}\nkwargs["accelerator"] = "gpu" if torch.cuda.is_available() else "cpu"\n'
    assert rewrite_source(script, "cli.py")[0] == script


def test_a_device_count_beside_a_kept_accelerator_is_kept():
    # lightly's benchmarks: the NeuronCore count beside the CPU accelerator would start a process per core
    script = SCRIPT.replace('accelerator = "gpu"', 'devices = torch.cuda.device_count() if torch.cuda.is_available() else 1\n'
                            'accelerator = "gpu"').replace("devices=1, ", "devices=devices, ")
    code, findings = rewrite_source(script, "train.py")
    assert code == script
    assert any(f.line == 17 and "device_count" in f.message and "kept" in f.message for f in findings), findings


def test_a_device_choice_that_is_not_an_accelerator_is_still_ported():
    script = SCRIPT.replace('accelerator=accelerator, ', '').replace(
        'accelerator = "gpu" if', 'device = "cuda" if')
    code, _ = rewrite_source(script, "train.py")
    assert 'device = "neuron" if torch.neuron.is_available() else "cpu"' in code


def test_the_kept_program_runs_as_without_cuda(tmp_path, sim_build):
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(SCRIPT)
    rewritten = run_cli("rewrite", ".", cwd=tmp_path)
    assert rewritten.returncode in (0, 1), rewritten.stderr
    checked = run_cli("check", ".", "--exit-zero", "--", "python", "train.py", cwd=tmp_path, env=simulator_env())
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert "trained on cpu" in checked.stdout, checked.stdout[-3000:]
    assert "No supported gpu backend" not in checked.stdout + checked.stderr
