"""What `check` shows while and after it runs: the program's own output passed on live, a failing rank
named with its exception and traceback (text and JSON), `-q`, and sites that never wrap in a pipe."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema
import pytest

pytestmark = pytest.mark.slow

TWO_RANKS = """\
import torch
import torch.distributed as dist
print("worker says hello", flush=True)
dist.init_process_group("gloo")
x = torch.ones(3, device="neuron")
if dist.get_rank() == 1:
    raise RuntimeError("rank one broke on purpose")  # FAILS
dist.destroy_process_group()
"""


def _project(tmp_path: Path, name: str, code: str) -> Path:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / name).write_text(textwrap.dedent(code))
    return project


def test_a_failing_rank_is_named_with_its_exception_and_traceback(tmp_path, cli, report_schema):
    project = _project(tmp_path, "train.py", TWO_RANKS)
    result = cli("check", str(project), "--nproc", "2", "--output-format", "json", "--", "python", "train.py")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, report_schema)
    [failure] = doc["runtime"]["failures"]
    assert failure["rank"] == 1 and failure["exception"] == "RuntimeError: rank one broke on purpose"
    assert (failure["site"]["path"], failure["site"]["line"]) == ("train.py", 7)
    assert failure["traceback"][0] == "Traceback (most recent call last):"
    assert failure["traceback"][-1] == "RuntimeError: rank one broke on purpose"
    assert {r["rank"] for r in doc["runtime"]["status"]["ranks"]} == {0, 1}
    # the two workers, not torchrun's launcher (which imports torch but runs no model)
    assert sorted(p["rank"] for p in doc["runtime"]["processes"]) == [0, 1]
    [np909] = [f for f in doc["findings"] if f["code"] == "NP909"]
    assert (np909["path"], np909["line"]) == ("train.py", 7)
    assert "rank 1 failed with RuntimeError: rank one broke on purpose" in np909["message"]
    # the program's output is passed on live; with a JSON document on stdout it goes to stderr
    assert "worker says hello" in result.stderr

    text = cli("check", str(project), "--nproc", "2", "--", "python", "train.py")
    assert "rank 1 failed with RuntimeError: rank one broke on purpose at train.py:7" in text.stdout
    assert 'raise RuntimeError("rank one broke on purpose")  # FAILS' in text.stdout
    assert "worker says hello" in text.stdout


def test_output_streams_live_and_quiet_hides_it(tmp_path, cli):
    project = _project(tmp_path, "run.py", """\
        import sys, torch
        print("to stdout from the program")
        print("to stderr from the program", file=sys.stderr)
        x = torch.ones(2, device="neuron").double() * 2
        """)
    result = cli("check", str(project), "--", "python", "run.py")
    assert result.returncode == 0, result.stderr
    assert "to stdout from the program" in result.stdout
    assert "to stderr from the program" in result.stderr
    assert result.stdout.index("to stdout from the program") < result.stdout.index("neuron-port check")
    quiet = cli("check", str(project), "-q", "--", "python", "run.py")
    assert "from the program" not in quiet.stdout + quiet.stderr
    lines = quiet.stdout.splitlines()
    assert [line for line in lines if "NP905" in line], lines  # the findings
    assert lines[-1].startswith("neuron-port check: the command succeeded")  # and one summary line
    assert not any("─" in line or "│" in line for line in lines)  # no panel, no tables


def test_sites_never_wrap_in_a_pipe(tmp_path, cli):
    deep = tmp_path / "project" / "a_rather_long_package_name" / "with_a_nested_module_folder"
    deep.mkdir(parents=True)
    filler = "".join(f"v{i} = {i}\n" for i in range(600))
    (deep / "training_loop_of_the_model.py").write_text(
        "import torch\n" + filler + "p = torch.ones(2, 4, device='neuron') / 4\nprint(torch.multinomial(p, 1))\n")
    result = cli("check", str(tmp_path / "project"), "--", "python",
                 "a_rather_long_package_name/with_a_nested_module_folder/training_loop_of_the_model.py")
    assert result.returncode == 0, result.stderr
    site = "a_rather_long_package_name/with_a_nested_module_folder/training_loop_of_the_model.py:603"
    table_lines = [line for line in result.stdout.splitlines() if "aten::multinomial" in line and "│" in line]
    assert table_lines and all(site in line for line in table_lines), result.stdout


def test_the_summary_separates_safe_fixes_from_unsafe_ones(tmp_path, cli):
    project = _project(tmp_path, "train.py", """\
        import torch
        x = torch.ones(2).cuda()
        torch.backends.cuda.matmul.allow_tf32 = True
        """)
    result = cli("check", str(project), "--", "python", "-c", "print('nothing')")
    assert "static findings left: 2 (1 fixed by `neuron-port rewrite`, 1 need `--unsafe-fixes`, 0 manual)" in \
        result.stdout
