"""The rewrite's fixed point (issue 34, item 2): after the fixes the rules run again on the rewritten text,
and the report is that run's. What `rewrite` lists as left is exactly what `rewrite --check` reports on
the rewritten tree (same code, place and message), over every fixture project and the wheel audit set's
CI package; nothing a fix creates is missing from the first report. Through the real CLI, as a user runs it.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURES
from tests.rewrite.test_held_out import PACKAGE, load_audit

FIXTURE_PROJECTS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and p.name != "expected")


def _findings(cli, folder: Path, *extra: str) -> tuple[dict, set]:
    done = cli("rewrite", ".", "--output-format", "json", "--fail-on", "never", *extra, cwd=folder)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["errors"] == [], report["errors"]
    return report, {(f["path"], f["line"], f["column"], f["code"], f["message"], f["fix"]["applied"])
                    for f in report["findings"]}


def _assert_fixed_point(cli, folder: Path) -> set:
    """`rewrite` then `rewrite --check`: the second run's findings are the first run's left ones."""
    _, first = _findings(cli, folder)
    left = {f for f in first if not f[-1]}
    second_report, second = _findings(cli, folder, "--check")
    assert second_report["summary"]["fixes_pending"] == 0
    assert second == left, (
        "new in the second run:\n" + "\n".join(map(str, sorted(second - left)))
        + "\nlisted as left but not reported again:\n" + "\n".join(map(str, sorted(left - second))))
    return left


@pytest.mark.parametrize("name", FIXTURE_PROJECTS)
def test_fixture_left_findings_are_the_second_runs(name, tmp_path, cli):
    work = tmp_path / name
    shutil.copytree(FIXTURES / name, work)
    _assert_fixed_point(cli, work)


def test_audit_package_left_findings_are_the_second_runs(tmp_path, cli):
    folder = load_audit().build_corpus([PACKAGE], tmp_path)[PACKAGE]
    left = _assert_fixed_point(cli, folder)
    assert len(left) > 20  # the corpus was really read


def test_no_fix_creates_a_finding_another_fix_asks_to_undo(tmp_path, cli):
    """The issue's example (and the README demo's): `device` holds the rank's device, so `set_device(device)`
    is `set_device(local_rank)`. On 858089d NP201 renamed it and NP101 made `device` the plain "neuron"; then
    the second run reported NP502 "drop `set_device(device)`", which the first had not. Now both renames keep
    the rank's index (TorchNeuron's core is neuron:<LOCAL_RANK>) and nothing is left."""
    (tmp_path / "train.py").write_text(textwrap.dedent("""\
        import os
        import torch
        from torch.distributed import init_process_group

        init_process_group(backend="nccl")
        local_rank = int(os.environ["LOCAL_RANK"])
        if local_rank >= 0:
            device = f"cuda:{local_rank}"
            torch.cuda.set_device(device)
        else:
            device = "cpu"
        x = torch.ones(2, device=device)
        """))
    report, first = _findings(cli, tmp_path)
    assert ("train.py", 9, 5, "NP201") in {f[:4] for f in first if f[-1]}, first
    text = (tmp_path / "train.py").read_text()
    assert 'device = f"neuron:{local_rank}"\n    torch.neuron.set_device(device)' in text
    assert _findings(cli, tmp_path, "--check")[1] == {f for f in first if not f[-1]} == set()


@pytest.mark.parametrize("name", FIXTURE_PROJECTS)
def test_what_is_left_stands_at_the_lines_of_the_file_on_disk(cli, tmp_path, name):
    """Nothing written (`--check`; `--diff` and `check --preview` the same): what is left points at the file
    as it is, where editors, GitHub annotations and SARIF show it. Each left finding's line there holds the
    text that the same finding's line holds in the rewritten file once `rewrite` wrote it (the fixed point
    reports at the new lines; on 858089d's fixed point, --check said train.py:112 for the float64 at 113)."""
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    before = {p: p.read_text(encoding="utf-8", errors="replace").splitlines()
              for p in folder.rglob("*.py")}
    checked, _ = _findings(cli, folder, "--check", "--exit-zero")
    written, _ = _findings(cli, folder)
    at_new = {(f["path"], f["code"], f["message"], f["column"]): f["line"]
              for f in written["findings"] if not f["fix"]["applied"] and "cell" not in f}
    compared = 0
    for f in checked["findings"]:
        key = (f["path"], f["code"], f["message"], f["column"])
        path = folder / f["path"]
        if f["fix"]["available"] or "cell" not in f and path not in before or key not in at_new:
            continue
        new_lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        assert before[path][f["line"] - 1] == new_lines[at_new[key] - 1], (f, at_new[key])
        compared += 1
    left = [f for f in checked["findings"] if not f["fix"]["available"] and (folder / f["path"]) in before]
    assert compared or not left
