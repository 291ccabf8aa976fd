"""A run that never reached the device is a finding (issue 35, items 2 and 3), through the real CLI: NP913, an
error at the line that chose the CPU (a Lightning call, named; a device choice with a fix pending; the model's
line), and not for a run whose records were lost (NP912) or that failed (NP909)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

# (as NP913's and NP912's examples; written out here so that the test also runs against older checkouts)
CPU_WITHOUT_CUDA = """import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Linear(4, 2).to(device)
print(model(torch.randn(8, 4, device=device)).sum().item())
"""
FOLDER_REMOVED = """import os
import shutil
import torch

x = torch.ones(4, device='neuron') * 2
shutil.rmtree(os.environ['NEURON_PORT_EVENTS_DIR'])
"""

FABRIC = """\
import torch
from lightning.fabric import Fabric

fabric = Fabric(devices=1)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)
loss = model(torch.randn(8, 4, device=fabric.device)).sum()
fabric.backward(loss)
optimizer.step()
print("trained on", fabric.device)
"""
CPU_MODEL = """\
import torch

# a model nobody moved
net = torch.nn.Linear(4, 2)
x = torch.randn(8, 4)
model = net
print(model(x).sum().item())
"""


def run(cli, tmp_path: Path, script: str, *args: str) -> tuple[dict, int]:
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    (folder / "train.py").write_text(script)
    result = cli("check", str(folder), "--output-format", "json", "--timeout", "180", *args,
                 "--", "python", "train.py")
    assert result.stdout, result.stderr
    return json.loads(result.stdout), result.returncode


def codes(doc: dict, code: str) -> list[dict]:
    return [f for f in doc["findings"] if f["code"] == code]


def test_a_lightning_fabric_on_the_cpu_is_named_at_its_call(tmp_path, cli, sim_build):
    pytest.importorskip("lightning")
    doc, code = run(cli, tmp_path, FABRIC)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    static = codes(doc, "NP610")
    assert [(f["path"], f["line"], f["source"]) for f in static] == [("train.py", 4, "static")], static
    runtime = codes(doc, "NP913")
    assert [(f["path"], f["line"], f["severity"]) for f in runtime] == [("train.py", 4, "error")], runtime
    assert "Lightning (imported by the run) chose the CPU" in runtime[0]["message"], runtime
    assert "custom Accelerator" in runtime[0]["message"]
    assert code == 1


def test_a_device_choice_that_falls_to_the_cpu_is_told_to_rewrite_first(tmp_path, cli, sim_build):
    doc, code = run(cli, tmp_path, CPU_WITHOUT_CUDA)
    found = codes(doc, "NP913")
    assert [(f["path"], f["line"]) for f in found] == [("train.py", 3)], found
    assert "run `neuron-port rewrite` first" in found[0]["message"], found
    assert code == 1
    # the rewritten copy runs on the device: no finding
    doc, code = run(cli, tmp_path, CPU_WITHOUT_CUDA, "--preview")
    assert doc["runtime"]["ops"]["calls"] > 0 and codes(doc, "NP913") == [], codes(doc, "NP913")


def test_a_model_left_on_the_cpu_is_reported_at_its_line(tmp_path, cli, sim_build):
    doc, code = run(cli, tmp_path, CPU_MODEL)
    found = codes(doc, "NP913")
    assert [(f["path"], f["line"], f["severity"]) for f in found] == [("train.py", 4, "error")], found
    assert 'model.to("neuron")' in found[0]["message"]
    assert code == 1


def test_lost_records_and_a_failed_run_are_not_also_no_device_work(tmp_path, cli, sim_build):
    doc, _ = run(cli, tmp_path, FOLDER_REMOVED)
    assert codes(doc, "NP912") and not codes(doc, "NP913"), [f["code"] for f in doc["findings"]]
    # exit 3 is how a process whose simulator could not be loaded ends (neuron_backend.LOAD_FAILED_EXIT)
    doc, code = run(cli, tmp_path, "import sys\nimport torch\n\nsys.exit(3)\n")
    assert codes(doc, "NP909") and not codes(doc, "NP913"), [f["code"] for f in doc["findings"]]
    assert code == 1
