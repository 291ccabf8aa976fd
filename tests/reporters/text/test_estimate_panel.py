"""The Estimate panel as `check` and `estimate` print it in a pipe (a CI log): one width rule for both
(lines as long as they need, as check's own panel and tables; a terminal's own width on a terminal), and a compile line that
charges NEFF compiles to the Trainium rows only (the H100 runs eager CUDA kernels)."""

from __future__ import annotations

import json
import textwrap

import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow

JOB = textwrap.dedent("""\
    import torch
    x = torch.ones(64, 64, device="neuron")
    for step in range(4):
        y = (x @ x).relu().sum()
    print(float(y))
    """)


def panel_widths(text: str) -> set[int]:
    """The widths of the Estimate panel's lines (its border to its border)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("╭") and " Estimate " in line)
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("╰"))
    return {len(line) for line in lines[start:end + 1]}


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory, sim_build):
    root = tmp_path_factory.mktemp("panel")
    (root / "project").mkdir()
    (root / "project" / "job.py").write_text(JOB)
    report = root / "report.json"
    result = run_cli("check", str(root / "project"), "-o", str(report), "--", "python", "job.py",
                     env={"COLUMNS": ""})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout, report


def test_the_panel_is_as_wide_under_check_as_under_estimate(saved_run):
    checked, report = saved_run
    [width] = panel_widths(checked)  # one width: as wide as its longest line, as check's own panel in a pipe
    estimated = run_cli("estimate", str(report), env={"COLUMNS": ""})
    assert estimated.returncode == 0, estimated.stderr
    assert panel_widths(estimated.stdout) == {width}, estimated.stdout
    # a pipe's lines stay whole whatever COLUMNS says, for both commands (issue 37 item 6: no cell cut)
    narrow = run_cli("estimate", str(report), env={"COLUMNS": "72"})
    assert panel_widths(narrow.stdout) == {width}, narrow.stdout
    project = report.parent / "project"
    again = run_cli("check", str(project), "--", "python", "job.py", env={"COLUMNS": "72"})
    assert panel_widths(again.stdout) == {width}, again.stdout[-4000:]


def test_only_trainium_rows_are_charged_neff_compiles(saved_run):
    checked, report = saved_run
    section = json.loads(report.read_text())["estimate"]
    kinds = {d["id"]: d["kind"] for d in section["devices"]}
    assert "gpu" in kinds.values() and "trainium" in kinds.values()
    for row in section["per_device"]:
        compile_ = row["compile"]
        if kinds[row["device"]] == "trainium":
            assert compile_["neff"] is True and compile_["eager_neffs"] > 0 and compile_["first_run_seconds"] > 0
        else:
            assert compile_["neff"] is False and compile_["eager_neffs"] == 0
            assert compile_["first_run_seconds"] == 0
            assert compile_["note"] == "no NEFF compile on a GPU (eager CUDA kernels)"
    # the panel says so: the NEFF compiles are the Trainium's, the H100 compiles none
    flat = " ".join(line.strip("│ ") for line in checked.splitlines())
    assert "h100-sxm: no NEFF compile on a GPU (eager CUDA kernels)" in " ".join(flat.split()), checked[-4000:]
