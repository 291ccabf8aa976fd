"""action.yml, the composite GitHub Action (issue 38 item 2): its steps' shell commands run here as the
runner runs them (bash -eo pipefail, `${{ inputs.* }}` at their defaults, GITHUB_ACTION_PATH, RUNNER_TEMP
and GITHUB_OUTPUT set, each `if:` evaluated), on a project with CUDA code and on a clean one. The `uses:`
steps (setup-python, upload-sarif) are GitHub's and run nowhere else: the test checks what they are given.
The install step's pip line is checked, not run (it would build and install this checkout again)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

yaml = pytest.importorskip("yaml")  # pre-commit (dev) brings PyYAML

EXPRESSION = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")
CUDA = "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\ntorch.cuda.synchronize()\n"


def _value(name: str, inputs: dict, outputs: dict):
    if name.startswith("inputs."):
        return inputs[name.removeprefix("inputs.")]
    if name.startswith("steps.check.outputs."):
        return outputs.get(name.removeprefix("steps.check.outputs."), "")
    raise AssertionError(f"action.yml uses {name!r}, which this test does not know")


def _condition(expression: str, inputs: dict, outputs: dict) -> bool:
    """An `if:` of GitHub's expression syntax, the subset action.yml uses: names, '...' strings, ==, !=,
    &&, ||, ! and cancelled()."""
    body = EXPRESSION.fullmatch(expression.strip())
    text = body.group(1) if body else expression
    python = re.sub(r"[a-z][\w-]*(\.[\w-]+)+", lambda m: repr(_value(m.group(0), inputs, outputs)), text)
    python = python.replace("!cancelled()", "True").replace("&&", " and ").replace("||", " or ")
    assert re.fullmatch(r"[\s'\w./=!-]*", python.replace("!=", "==")), python  # nothing else to evaluate
    return bool(eval(python, {"__builtins__": {}}))  # noqa: S307 (a checked, literal-only expression)


def _run_action(project: Path, tmp: Path) -> tuple[dict, list[subprocess.CompletedProcess], list[dict]]:
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    inputs = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    outputs: dict[str, str] = {}
    output_file = tmp / "github_output"
    output_file.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NEURON_PORT_SIMULATE")}
    env.update(GITHUB_ACTION_PATH=str(REPO), RUNNER_TEMP=str(tmp), GITHUB_OUTPUT=str(output_file),
               PATH=str(Path(sys.executable).parent) + os.pathsep + env["PATH"])
    ran, used = [], []
    for step in action["runs"]["steps"]:
        if "if" in step and not _condition(str(step["if"]), inputs, outputs):
            continue
        given = {key: EXPRESSION.sub(lambda m: str(_value(m.group(1), inputs, outputs)), str(value))
                 for key, value in {**step.get("with", {}), **step.get("env", {})}.items()}
        if "uses" in step:
            used.append({"uses": step["uses"], **given})
            continue
        assert step["shell"] == "bash" and "${{" not in step["run"], step  # inputs reach scripts through env
        if "pip install" in step["run"]:
            assert re.search(r'pip install [^\n]*"\$GITHUB_ACTION_PATH"$', step["run"].strip()), step["run"]
            continue
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=project,
                              env={**env, **{k: v for k, v in given.items() if k in step.get("env", {})}},
                              capture_output=True, text=True, timeout=300)
        ran.append(proc)
        outputs.update(line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line)
        if proc.returncode:
            break
    return outputs, ran, used


def test_the_action_checks_uploads_and_fails_on_findings(tmp_path):
    project = tmp_path / "repo"
    project.mkdir()
    (project / ".git").mkdir()
    (project / "train.py").write_text(CUDA)
    outputs, ran, used = _run_action(project, tmp_path)
    assert outputs["exit-code"] == "1" and [p.returncode for p in ran] == [0, 1], [p.stderr for p in ran]
    log = json.loads(Path(outputs["sarif-file"]).read_text())
    assert {r["ruleId"] for r in log["runs"][0]["results"]} == {"NP103", "NP201"}
    assert [u["uses"].split("@")[0] for u in used] == ["actions/setup-python", "github/codeql-action/upload-sarif"]
    assert used[1]["sarif_file"] == outputs["sarif-file"] and used[1]["category"] == "neuron-port"
    assert "NP103" in ran[1].stdout  # the counts per code in the log


def test_the_action_passes_a_clean_project(tmp_path):
    project = tmp_path / "repo"
    project.mkdir()
    (project / "train.py").write_text("import torch\nprint(torch.ones(2).sum())\n")
    outputs, ran, used = _run_action(project, tmp_path)
    assert outputs["exit-code"] == "0" and [p.returncode for p in ran] == [0], [p.stderr for p in ran]
    assert json.loads(Path(outputs["sarif-file"]).read_text())["runs"][0]["results"] == []
    assert len(used) == 2  # the upload runs on a clean project too (it clears closed alerts)
