"""The README's examples run as written: the Python API example (extracted from the "Python API" section
and run in a fresh interpreter, its `check` on the simulator included) and the CI section's GitHub
Actions workflow, which uses action.yml at the release tag: the action's steps run on a fixture, the SARIF
validated against the 2.1.0 schema."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from conftest import FIXTURES, REPO, simulator_env

README = (REPO / "README.md").read_text()
SARIF_SCHEMA = REPO / "tests" / "schemas" / "sarif-2.1.0.json"


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.S | re.M)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def code_block(text: str, language: str) -> str:
    blocks = re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)
    assert len(blocks) == 1, f"expected one {language} block, found {len(blocks)}"
    return blocks[0]


@pytest.mark.slow
def test_python_api_example_runs(tmp_path, sim_build):
    example = tmp_path / "example.py"
    example.write_text(code_block(section("Python API"), "python"))
    result = subprocess.run([sys.executable, str(example)], cwd=tmp_path, env=simulator_env(), capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "[('NP103', 2, True)]"
    assert '+model = torch.nn.Linear(2, 2).to("neuron")' in lines
    left = [line for line in lines if re.match(r".*train\.py:\d+:\d+: NP\d+ ", line)]
    assert len(left) == 1 and re.fullmatch(r".*train\.py:3:1: NP407 .*cudnn.*", left[0]), left
    document = json.loads(result.stdout[result.stdout.index("{\n"):result.stdout.index("\n}\n") + 2])
    assert document["summary"]["fixes_applied"] == 2
    assert "True" in lines  # the unsafe fix would apply
    assert any(line.startswith("usage error:") and "NP999" in line for line in lines)
    assert re.search(r"^True \[.*'NP407'.*\]$", result.stdout, re.M), lines[-1]  # check: the command succeeded


def workflow() -> dict:
    return yaml.safe_load(code_block(section("CI"), "yaml"))


def test_ci_workflow_uses_the_action_at_the_release_tag():
    from neuron_port import __version__

    flow = workflow()
    assert flow["permissions"]["security-events"] == "write"
    steps = flow["jobs"]["neuron-port"]["steps"]
    assert [step["uses"] for step in steps] == ["actions/checkout@v4", f"neuron-port/neuron-port@v{__version__}"]
    action = yaml.safe_load((REPO / "action.yml").read_text())
    upload = next(step for step in action["runs"]["steps"]
                  if step.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    assert "cancelled()" in upload["if"]


@pytest.mark.parametrize("fixture", ["gpt_trainer", "hf_finetune"])
def test_ci_workflow_commands_run_on_a_fixture(tmp_path, fixture):
    """The action's steps (tests/test_action.py runs them as the runner does) on a fixture."""
    from test_action import _run_action

    project = tmp_path / fixture
    shutil.copytree(FIXTURES / fixture, project)
    (project / ".git").mkdir()  # a checkout: the repository root
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    outputs, ran, used = _run_action(project, tmp_path)
    assert outputs["exit-code"] == "1" and [p.returncode for p in ran] == [0, 1], [p.stderr for p in ran]
    log = json.loads(Path(outputs["sarif-file"]).read_text())
    jsonschema.validate(log, json.loads(SARIF_SCHEMA.read_text()))
    results = log["runs"][0]["results"]
    assert results and all(r["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
                           for r in results)
    assert log["runs"][0]["invocations"][0]["executionSuccessful"] is True
    gate = ran[1]  # fixes are pending: the step fails, with the counts per code
    assert gate.stdout and all(re.fullmatch(r" *\d+\tNP\d{3}\t(\[[* ]\] )?[a-z0-9-]+", line)
                               for line in gate.stdout.splitlines()), gate.stdout
    counted = sum(int(line.split("\t")[0]) for line in gate.stdout.splitlines())
    assert counted == len(results)  # the same findings as the SARIF
    after = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert after == before  # --check writes nothing
