"""A failed `check` run reads as a failure (issue 35, item 6), through the real CLI: "Not ported yet ...: run
`neuron-port rewrite` first" only when the crash is CUDA-shaped or the failing frame's file has safe fixes not
applied, printed right under the failure line; the text panel and the HTML page lead with the failure; the
estimate is withheld, with one line why, when no whole step ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

NOT_PORTED = "Not ported yet"
# a file with a safe fix pending (NP101: the string "cuda" -> "neuron"), never run by the command
PENDING = 'import torch\n\nx = torch.ones(2).to("cuda")\n'
# the program's own bug in a file with no CUDA and no fix pending: one op on the device, then a KeyError
OWN_BUG = """\
import torch

x = torch.ones(4, device="neuron") * 2
labels = {}
print(labels["cat"])
"""
# runs on a CPU torch as it is (no CUDA: the CPU), with two safe fixes pending at line 3
CPU_IF_NO_CUDA = 'import torch\n\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
UNPORTED = """\
import torch

model = torch.nn.Linear(4, 2).cuda()
print(model(torch.randn(8, 4).cuda()).sum().item())
"""


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def check(cli, folder: Path, *args: str):
    return cli("check", str(folder), *args, "--timeout", "120", "--", "python", "train.py")


def np909(doc: dict) -> dict:
    return next(f for f in doc["findings"] if f["code"] == "NP909")


def test_a_crash_of_the_programs_own_gets_no_rewrite_advice_for_another_files_fix(tmp_path, cli, sim_build):
    folder = project(tmp_path, {"train.py": OWN_BUG, "utils.py": PENDING})
    result = check(cli, folder, "--output-format", "json")
    doc = json.loads(result.stdout)
    finding = np909(doc)
    assert "KeyError" in finding["message"] and finding["line"] == 5, finding
    assert NOT_PORTED not in finding["message"], finding  # 858089d: "(1 file(s) have safe fixes not applied yet)"
    assert "next_step" not in doc["runtime"], doc["runtime"].get("next_step")
    assert result.returncode == 1


def test_a_crash_in_a_file_with_fixes_pending_is_told_to_rewrite_first(tmp_path, cli, sim_build):
    # not CUDA-shaped (a KeyError), but the failing file itself still has a safe fix pending (line 3)
    folder = project(tmp_path, {"train.py": CPU_IF_NO_CUDA + 'raise KeyError("label")\n'})
    doc = json.loads(check(cli, folder, "--output-format", "json").stdout)
    assert "train.py, where it failed, has safe fixes not applied yet" in np909(doc)["message"], np909(doc)


def test_an_unported_crash_prints_the_next_step_under_the_failure_line(tmp_path, cli, sim_build):
    folder = project(tmp_path, {"train.py": UNPORTED})
    result = check(cli, folder)
    lines = result.stdout.splitlines()
    failure = next(i for i, line in enumerate(lines) if line.startswith("the process failed with"))
    assert "train.py:3" in lines[failure], lines[failure]
    assert lines[failure + 1].startswith(f"{NOT_PORTED} (the run failed on CUDA"), lines[failure:failure + 3]
    # and the panel leads with the failure and the next step, before the counts
    panel = result.stdout[:result.stdout.index("readiness:")]
    assert "failed: the process failed with" in panel and NOT_PORTED in panel, panel
    assert result.returncode == 1


@pytest.mark.parametrize("mode", [(), ("--shape-only",)], ids=["real", "shape-only"])
def test_a_crash_before_a_whole_step_has_no_estimate_but_says_why(tmp_path, cli, sim_build, mode):
    folder = project(tmp_path, {"train.py": OWN_BUG})
    report = tmp_path / "report.json"
    result = check(cli, folder, "-o", str(report), *mode)
    doc = json.loads(report.read_text())
    assert doc["runtime"]["ops"]["calls"] >= 1  # the op ran: on 858089d it was priced as a step
    assert "estimate" not in doc, doc.get("estimate", {}).get("steps")
    assert doc["runtime"]["estimate_withheld"].startswith("no estimate: the command failed before a whole step")
    assert "per step" not in result.stdout and "$" not in result.stdout, result.stdout
    assert "Estimate: no estimate: the command failed before a whole step ran" in result.stdout


def test_a_failed_runs_page_leads_with_the_failure(tmp_path, cli, sim_build):
    pytest.importorskip("matplotlib")
    folder = project(tmp_path, {"train.py": UNPORTED})
    page = tmp_path / "page.html"
    check(cli, folder, "-q", "--html", str(page))
    html = page.read_text()
    failure, summary = html.index('<section id="failure"'), html.index('<section id="summary"')
    assert failure < summary < html.index("No op fell back to the CPU before the run failed."), html
    assert "the process failed with AssertionError: Torch not compiled with CUDA enabled" in html[failure:summary]
    assert "train.py:3" in html[failure:summary] and NOT_PORTED in html[failure:summary]
