"""`neuron-port check`: real runs of commands on the simulated neuron device, through the real CLI."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import jsonschema
import pytest

from conftest import FIXTURES
from neuron_port.check.preview import line_map
from neuron_port.check.aggregate.shapes import padding_buckets, varying_dims

pytestmark = pytest.mark.slow


def check_json(cli, path: Path, *args: str, command: list[str]) -> tuple[dict, int]:
    result = cli("check", str(path), "--output-format", "json", *args, "--", *command)
    assert result.stdout, result.stderr
    return json.loads(result.stdout), result.returncode


def site_lines(entries, path):
    return sorted({s["line"] for s in entries if s and s["path"] == path})


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".neuron-port-cache" not in p.parts}  # the result cache is not the project


def test_gpt_fixture_preview_reports_fallback_shapes_and_float64(tmp_path, cli, report_schema):
    project = tmp_path / "gpt_trainer"
    shutil.copytree(FIXTURES / "gpt_trainer", project)
    before = tree_bytes(project)
    doc, code = check_json(cli, project, "--preview",
                           command=["python", "train.py", "--steps", "6", "--variable-length"])
    jsonschema.validate(doc, report_schema)
    assert tree_bytes(project) == before, "--preview must not touch the project"
    runtime = doc["runtime"]
    assert runtime["status"]["exit_code"] == 0, runtime["status"]["stderr_tail"]
    assert doc["command"] == "check"

    # the sampling op falls back to the CPU, at the user's line in model.py
    [multinomial] = [f for f in runtime["fallbacks"] if f["op"] == "aten::multinomial"]
    assert [(s["path"], s["line"]) for s in multinomial["sites"]] == [("model.py", 137)]
    assert any(f["code"] == "NP901" and f["path"] == "model.py" and f["line"] == 137 for f in doc["findings"])

    # float64 at the two lines that use it (lines of the original file, not of the rewritten copy)
    float64_lines = site_lines([d["site"] for d in runtime["demotions"] if d["dtype"] == "float64"], "train.py")
    assert float64_lines == [113, 126]
    assert {f["line"] for f in doc["findings"] if f["code"] == "NP905"} == {113, 126}

    # the variable sequence length: shapes vary along the time dimension in training, with buckets suggested
    # (generate() after training has its own growing lengths, judged as its own phase)
    attention = [v for v in runtime["shape_variance"] if (v["site"] or {}).get("path") == "model.py"
                 and "scaled_dot_product" in v["op"] and v["phase"] == "training"]
    assert attention, runtime["shape_variance"]
    dims = attention[0]["varying"][0]
    assert dims["dim"] == 2 and {8, 16, 32} <= set(dims["values"])
    assert attention[0]["suggested_buckets"]
    assert any(f["code"] == "NP902" and f["source"] == "runtime" for f in doc["findings"])

    # the static half is there too: pending safe rewrites of the unrewritten tree
    assert any(f["code"] == "NP101" and f["path"] == "train.py" for f in doc["findings"])
    assert runtime["ops"]["calls"] > 0 and 0 < runtime["ops"]["readiness"] < 1
    assert code == 1  # NP101 errors are left in the tree


@pytest.mark.parametrize("ending, expect", [
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", {"signal": "SIGSEGV"}),
    ("raise SystemExit(3)\n", {"exit_code": 3}),
    ("import time\ntime.sleep(60)\n", {"timed_out": True}),
])
def test_failed_commands_still_give_a_valid_report(tmp_path, cli, report_schema, ending, expect):
    script = textwrap.dedent("""\
        import sys
        import torch
        x = torch.ones(4, 8, device="neuron", dtype=torch.float64)
        y = torch.multinomial(torch.ones(2, 4, device="neuron"), 1)
        print("about to stop", file=sys.stderr)
        """) + ending
    (tmp_path / "job.py").write_text(script)
    doc, code = check_json(cli, tmp_path, "--timeout", "15", command=["python", "job.py"])
    jsonschema.validate(doc, report_schema)
    status = doc["runtime"]["status"]
    for key, value in expect.items():
        assert status[key] == value, status
    assert code == 1
    assert "about to stop" in status["stderr_tail"]
    assert any(f["code"] == "NP909" for f in doc["findings"])
    # events recorded before the failure survived (nothing flushed them: the crash-proof records)
    assert [f["op"] for f in doc["runtime"]["fallbacks"]] == ["aten::multinomial"]
    assert site_lines([d["site"] for d in doc["runtime"]["demotions"] if d["dtype"] == "float64"], "job.py") == [3]


def test_check_needs_a_command(tmp_path, cli):
    result = cli("check", str(tmp_path))
    assert result.returncode == 2 and "no command" in result.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.neuron-port]\ncheck-command = "python -c \'print(1)\'"\n')
    doc, code = check_json(cli, tmp_path, command=[])
    assert doc["runtime"]["status"]["exit_code"] == 0 and code == 0


def test_text_report_has_summary_and_sites(tmp_path, cli):
    (tmp_path / "job.py").write_text(
        "import torch\np = torch.ones(2, 4, device='neuron')\nprint(torch.multinomial(p, 1).cpu())\n")
    result = cli("check", str(tmp_path), "--", "python", "job.py")
    assert "readiness:" in result.stdout
    assert "job.py:3 NP901" not in result.stdout  # findings are path:line:col
    assert "job.py:3:1: NP901" in result.stdout
    assert result.returncode == 0  # a fallback is a warning


def test_pure_helpers():
    sigs = [["f32[4,8,64]", "f32[64]"], ["f32[4,16,64]", "f32[64]"], ["f32[4,32,64]", "f32[64]"]]
    assert varying_dims(sigs) == [{"arg": 0, "dim": 1, "values": [8, 16, 32]}]
    assert padding_buckets([5, 6, 7, 9, 17, 30]) == [8, 16, 32]
    assert len(padding_buckets(range(1, 1000))) == 4
    old = "a\nb\nc\n"
    new = "import x\n\na\nB\nc\n"
    mapping = line_map(old, new)
    assert mapping[3] == 1 and mapping[4] == 2 and mapping[5] == 3


def test_distributed_fixture_under_two_processes_merges_ranks_per_site(tmp_path, cli, report_schema):
    project = tmp_path / "distributed_sharding"
    shutil.copytree(FIXTURES / "distributed_sharding", project)
    doc, _ = check_json(cli, project, "--preview", "--nproc", "2", command=["python", "train_dist.py", "--steps", "2"])
    jsonschema.validate(doc, report_schema)
    runtime = doc["runtime"]
    assert runtime["status"]["exit_code"] == 0, runtime["status"]["stderr_tail"]
    assert runtime["status"]["command"][:2] == ["torchrun", "--nproc_per_node=2"]
    assert sorted(p["rank"] for p in runtime["processes"] if p["rank"] is not None) == [0, 1]
    collectives = {(d["op"], d["site"]["line"]): d for d in runtime["distributed"] if d["site"]}
    # one entry per (collective, line), with both ranks merged into it
    all_reduce = collectives[("all_reduce", 96)]
    assert all_reduce["ranks"] == [0, 1] and all_reduce["count"] >= 2
    assert collectives[("broadcast", 67)]["ranks"] == [0, 1]  # DDP's parameter broadcast at construction
    assert any(op == "reduce_scatter_tensor" for op, _ in collectives)  # FSDP2's gradient reduce-scatter
    eager = [e for e in runtime["eager_compiles"] if e["site"] and e["site"]["path"] == "train_dist.py"]
    assert eager and len({(e["op"], e["site"]["line"]) for e in eager}) == len(eager)  # merged, not per rank


def test_a_command_that_cannot_start_is_reported(tmp_path, cli):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    (project / "run.sh").write_text("#!/bin/sh\necho never\n")  # not executable
    result = cli("check", str(project), "--output-format", "json", "--", "./run.sh")
    # issue 12: a usage error (exit 2, the path and the fix named), not a report of a run that never was
    assert result.returncode == 2, result.stderr
    assert "run.sh is not executable (chmod +x ./run.sh" in result.stderr
    assert result.stdout == ""
