"""The documented Python API (neuron_port.api): rewrite_source on strings of each file kind, rewrite on a
tree giving the same report as the CLI's JSON, usage errors as exceptions, and check on the simulator."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli
from neuron_port.api import Settings, UsageError, check, rewrite, rewrite_source
from neuron_port.reporters.json_report import render

CUDA = "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n"


def test_rewrite_source_rewrites_a_string_and_reports():
    code, findings = rewrite_source(CUDA)
    assert code == ('import torch\nmodel = torch.nn.Linear(2, 2).to("neuron")\nif torch.neuron.is_available():\n'
                    "    torch.neuron.synchronize()\n")
    assert {f.code for f in findings} == {"NP103", "NP201"}
    assert all(f.fix.applied and f.path == "<string>" for f in findings)
    again, more = rewrite_source(code)
    assert again == code and not any(f.fix.applied for f in more)


@pytest.mark.parametrize("ending", ["\r", "\r\n", "\n"])
def test_rewrite_source_keeps_every_line_ending(ending):
    """The same text as the file runner writes, down to a lone CR that ends the text (old Mac files)."""
    code, _ = rewrite_source(CUDA.replace("\n", ending))
    assert code == rewrite_source(CUDA)[0].replace("\n", ending)


def test_rewrite_source_reads_the_kind_from_the_path_and_honours_settings():
    text, findings = rewrite_source("torchrun --nproc_per_node=8 train.py --backend nccl\n", path="launch.sh")
    assert text == "torchrun --nproc_per_node=8 train.py --backend neuron\n"
    assert [f.code for f in findings] == ["NP521", "NP523"]
    text, _ = rewrite_source("torchrun --nproc_per_node=8 train.py\n", path="launch.sh",
                             settings=Settings(unsafe_fixes=True), instance="trn2.3xlarge")
    assert text == "torchrun --nproc_per_node=4 train.py\n"
    code, findings = rewrite_source(CUDA, settings=Settings(select=("NP2",)))
    assert {f.code for f in findings} == {"NP201"} and ".cuda()" in code
    accelerator, _ = rewrite_source(CUDA, settings=Settings(target="accelerator"))
    assert "torch.accelerator" in accelerator


def test_rewrite_source_of_a_notebook():
    notebook = json.dumps({"cells": [{"cell_type": "code", "source": ["x = y.cuda()\n"], "metadata": {},
                                      "outputs": [], "execution_count": None}],
                           "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    text, findings = rewrite_source(notebook, path="explore.ipynb")
    assert json.loads(text)["cells"][0]["source"] == ['x = y.to("neuron")\n']
    assert findings[0].cell == 1


def test_usage_errors_raise():
    with pytest.raises(UsageError, match="matches no rule"):
        rewrite_source(CUDA, settings=Settings(select=("NP999",)))
    with pytest.raises(UsageError, match="no such file"):
        rewrite(["/no/such/folder"], write=False)
    with pytest.raises(UsageError, match="unknown instance"):
        rewrite_source("x\n", instance="trn9.huge")
    # a GPU instance of the catalogue (for the estimate) is not one the launch scripts can target
    with pytest.raises(UsageError, match="is a GPU instance"):
        rewrite_source("x\n", instance="p5.48xlarge")


@pytest.mark.parametrize("name", ["gpt_trainer", "hf_finetune"])
def test_rewrite_gives_the_report_the_cli_prints(tmp_path, monkeypatch, name):
    for side in ("api", "cli"):
        shutil.copytree(FIXTURES / name, tmp_path / side / name)
    monkeypatch.chdir(tmp_path / "api")
    pending = rewrite([name], write=False, use_cache=False)
    cli = run_cli("rewrite", "--check", "--no-cache", "--output-format", "json", name, cwd=tmp_path / "cli")
    assert render(pending) == cli.stdout
    written = rewrite([name], use_cache=False)
    cli = run_cli("rewrite", "--no-cache", "--output-format", "json", name, cwd=tmp_path / "cli")
    assert written.wrote and render(written) == cli.stdout
    for path in sorted((tmp_path / "cli" / name).rglob("*")):
        if path.is_file():
            assert path.read_bytes() == (tmp_path / "api" / name / path.relative_to(tmp_path / "cli" / name)).read_bytes()
    assert written.findings and all(f.fix.applied for f in written.findings if f.fix.available and f.fix.safety == "safe")


@pytest.mark.slow
def test_check_runs_on_the_simulator(sim_build, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("import torch\nx = torch.ones(4, device='cuda')\n"
                                      "print(torch.multinomial(x / 4, 1).cpu())\n")
    report = check(project, ["python", "train.py"], Settings(), preview=True, timeout=300)
    assert report.runtime is not None and report.runtime.status.succeeded
    assert {f.code for f in report.runtime_findings} >= {"NP901"}
    assert {f.code for f in report.findings if f.source == "static"} == {"NP101"}
    assert (project / "train.py").read_text().count("'cuda'") == 1  # the preview never touches the project
