"""Migration statistics (found / converted / fixable / manual / share), per file and in total, in the JSON
report and the text summary; exact numbers on the hf_finetune fixture."""

from __future__ import annotations

import json
import shutil

import jsonschema

from conftest import FIXTURES
from neuron_port.results import FileResult, Finding, Fix
from neuron_port.rewrite.statistics import Statistics, file_statistics, total_statistics


def _finding(available: bool, applied: bool, safety: str = "safe", source: str = "static") -> Finding:
    return Finding(code="NP101", name="x", severity="error", path="a.py", line=1, column=1, end_line=1,
                   end_column=2, message="m", fix=Fix(available, applied, safety if available else "none"),
                   effort=None, source=source)


def test_file_and_total_statistics():
    result = FileResult(path="a.py", real_path="/a.py", fixes_applied=2, findings=[
        _finding(True, True), _finding(True, True), _finding(True, False, "unsafe"), _finding(False, False),
        _finding(False, False, source="runtime")])
    stats = file_statistics(result)
    assert stats == Statistics(found=4, converted=2, fixable=1, manual=1)
    assert stats.to_json() == {"found": 4, "converted": 2, "fixable": 1, "manual": 1, "share_converted": 0.5}
    empty = FileResult(path="b.py", real_path="/b.py", skipped=True)
    assert file_statistics(empty).to_json()["share_converted"] is None
    assert total_statistics([result, empty, result]) == Statistics(8, 4, 2, 2)


# The hf_finetune fixture under the default `rewrite` (safe fixes). The counts of the files whose
# rules are this family's (launch script, config) are exact; the Python files' counts follow the
# findings in the same report, whatever the other families report.
EXPECTED_FILES = {
    "config.yaml": {"found": 3, "converted": 2, "fixable": 0, "manual": 1},  # device, dist_backend / num_gpus
    "launch.sh": {"found": 7, "converted": 1, "fixable": 2, "manual": 4},  # --device cuda:0 / 2x CVD / nproc, 2 env, smi
}


def test_fixture_statistics_json_and_text(tmp_path, cli, report_schema):
    work = tmp_path / "hf"
    shutil.copytree(FIXTURES / "hf_finetune", work)
    check = json.loads(cli("rewrite", "--check", "--output-format", "json", ".", cwd=work).stdout)
    result = cli("rewrite", "--output-format", "json", ".", cwd=work)
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, report_schema)
    files = {f["path"]: f["statistics"] for f in doc["files"]}
    assert set(files) == {"config.yaml", "explore.ipynb", "finetune.py", "launch.sh"}
    for path, expected in EXPECTED_FILES.items():
        assert {k: files[path][k] for k in expected} == expected, path
    for path, stats in files.items():
        mine = [f for f in doc["findings"] if f["path"] == path]
        assert stats["found"] == len(mine)
        assert stats["converted"] == sum(f["fix"]["applied"] for f in mine)
        assert stats["fixable"] == sum(f["fix"]["available"] and not f["fix"]["applied"] for f in mine)
        assert stats["manual"] == sum(not f["fix"]["available"] for f in mine)
        assert stats["share_converted"] == round(stats["converted"] / stats["found"], 4)
    total = doc["summary"]["statistics"]
    for key in ("found", "converted", "fixable", "manual"):
        assert total[key] == sum(s[key] for s in files.values())
    assert total["found"] == doc["summary"]["findings"]
    assert total["converted"] == doc["summary"]["fixes_applied"]
    # the notebook and the script have safe conversions (NP1xx/NP2xx/NP3xx/NP5xx at least)
    assert files["explore.ipynb"]["converted"] >= 6 and files["finetune.py"]["converted"] >= 9
    # --check counts what would be converted: the same numbers
    assert check["summary"]["statistics"] == total

    shutil.rmtree(work)
    shutil.copytree(FIXTURES / "hf_finetune", work)
    text = cli("rewrite", ".", cwd=work).stdout
    line = next(l for l in text.splitlines() if l.startswith("CUDA references:"))
    assert line == (f"CUDA references: {total['found']} found, {total['converted']} converted "
                    f"({total['converted'] / total['found']:.1%}), {total['fixable']} need --unsafe-fixes or "
                    f"review, {total['manual']} need manual work")
    assert any(l.split()[:2] == ["launch.sh", "7"] for l in text.splitlines())


def test_a_finding_about_a_suppression_comment_is_not_a_cuda_reference(tmp_path, cli):
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(2)  # neuron-port: ignore[NP999]\n")
    result = cli("rewrite", "--check", "--output-format", "json", str(tmp_path))
    doc = json.loads(result.stdout)
    assert [f["code"] for f in doc["findings"]] == ["NP799"]
    assert doc["summary"]["statistics"]["found"] == 0
