"""`check` on a project nobody ported yet (issue 21, item 11), through the real CLI: the run fails on its
first CUDA call, and NP909 says what to do first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

NEXT_STEP = "run `neuron-port rewrite` first, or add `--preview`"
UNPORTED = """\
import torch

model = torch.nn.Linear(4, 2).cuda()
print(model(torch.randn(8, 4).cuda()).sum().item())
"""


def np909(cli, project: Path, *args: str) -> dict:
    result = cli("check", str(project), "--output-format", "json", *args, "--", "python", "train.py")
    assert result.stdout, result.stderr
    found = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "NP909"]
    return found[0] if found else {}


def test_an_unported_project_is_told_to_rewrite_first(tmp_path, cli):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(UNPORTED)
    finding = np909(cli, project)
    assert "Torch not compiled with CUDA enabled" in finding["message"], finding
    assert NEXT_STEP in finding["message"], finding
    assert finding["path"] == "train.py" and finding["line"] == 3, finding


def test_a_failure_of_ported_code_gets_no_rewrite_advice(tmp_path, cli):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text('import torch\nx = torch.ones(2, device="neuron")\nraise ValueError("bad data")\n')
    finding = np909(cli, project)
    assert "ValueError: bad data" in finding["message"] and NEXT_STEP not in finding["message"], finding


def test_preview_runs_the_rewritten_copy_without_the_advice(tmp_path, cli):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(UNPORTED)
    assert np909(cli, project, "--preview") == {}
