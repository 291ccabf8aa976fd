"""Folds keep their locations (issue 34, item 4): the findings folded into a kept scope's one finding (NP717's
CUDA-only module, NP701's Triton kernel) keep their lines, as related locations in JSON (a list of
{path, line, column, code} under the folding finding) and in SARIF (relatedLocations). Through the real CLI,
from a fresh run and from the result cache. On 858089d every finding inside such a module lost its line.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap

import jsonschema
import pytest

from conftest import FIXTURES, REPO
from tests.rewrite.test_held_out import PACKAGE, load_audit

MIXED = textwrap.dedent("""\
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)


    def add(x):
        assert x.is_cuda
        add_kernel[(1,)](x, 1, BLOCK=16)
        return x


    class Model(torch.nn.Module):
        def forward(self, x):
            y = x.double()
            return torch.nn.functional.interpolate(y, scale_factor=2, mode="bilinear").to("cuda")
    """)
_FOLDED = re.compile(r"(\d+) findings? inside left as they are and folded into this one")


def _report(cli, folder, output_format: str = "json", *extra: str) -> dict:
    done = cli("rewrite", ".", "--check", "--output-format", output_format, "--fail-on", "never", *extra, cwd=folder)
    assert done.returncode in (0, 1), done.stderr  # 1: --check with fixes pending
    doc = json.loads(done.stdout)
    assert not doc.get("errors") and not doc.get("runs", [{}])[0].get("invocations", [{}])[0].get(
        "toolExecutionNotifications"), done.stdout[-2000:]
    return doc


def test_folded_findings_keep_their_lines_in_json_and_sarif(tmp_path, cli, report_schema):
    (tmp_path / "mix.py").write_text(MIXED)
    for cached in (False, True):  # the second run reads the result cache
        doc = _report(cli, tmp_path)
        jsonschema.validate(doc, report_schema)
        (fold,) = [f for f in doc["findings"] if f["code"] == "NP717"]
        related = {(r["path"], r["line"], r["code"]) for r in fold["related"]}
        # the launcher's precondition and the kernel, each at its line
        assert {("mix.py", 12, "NP720"), ("mix.py", 6, "NP701")} <= related, (cached, related)
        assert len(fold["related"]) == int(_FOLDED.search(fold["message"]).group(1))
    sarif = _report(cli, tmp_path, "sarif")
    (result,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "NP717"]
    places = {(loc["physicalLocation"]["region"]["startLine"], loc["message"]["text"])
              for loc in result["relatedLocations"]}
    assert {(12, "NP720"), (6, "NP701")} <= places
    assert all(loc["physicalLocation"]["artifactLocation"]["uri"] == "mix.py" for loc in result["relatedLocations"])


def test_a_kernel_module_s_portable_code_is_ported_at_its_lines(tmp_path, cli):
    """NP717 keeps the kernel code (the @triton.jit kernel, its launcher), not the whole module: the model's
    float64 and CUDA device in the same file are findings of their own at their lines, in text, JSON and SARIF,
    and the CUDA device string is rewritten. On 858089d the whole module was one fold with no line inside."""
    (tmp_path / "mix.py").write_text(MIXED)
    doc = _report(cli, tmp_path)
    (fold,) = [f for f in doc["findings"] if f["code"] == "NP717"]
    assert "(`add_kernel`, `add`;" in fold["message"] and "kernel code" in fold["message"]
    assert {(r["line"], r["code"]) for r in fold["related"]}.isdisjoint({(19, "NP801"), (20, "NP101")})
    own = {(f["line"], f["code"]) for f in doc["findings"]}
    assert {(19, "NP801"), (20, "NP101")} <= own, own
    sarif = _report(cli, tmp_path, "sarif")
    results = {(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
               for r in sarif["runs"][0]["results"]}
    assert {("NP801", 19), ("NP101", 20)} <= results
    text = cli("rewrite", ".", "--check", "--verbose", "--fail-on", "never", cwd=tmp_path)
    lines = text.stdout.splitlines()
    assert any(line.startswith("mix.py:19:") and " NP801 " in line for line in lines), text.stdout
    assert any(line.startswith("mix.py:20:") and " NP101 " in line for line in lines), text.stdout
    # --verbose lists the fold's findings at their places under it, each a location line of its own
    at = next(i for i, line in enumerate(lines) if " NP717 " in line)
    assert any(line.startswith("mix.py:12:") for line in lines[at + 1:at + 8]), text.stdout
    assert "(folded into NP717 at " in lines[at + 1], text.stdout
    cli("rewrite", ".", cwd=tmp_path)
    written = (tmp_path / "mix.py").read_text()
    assert '.to("neuron")' in written and "assert x.is_cuda" in written  # the launcher's precondition is kept


def _folds_all_located(doc: dict) -> list[str]:
    missing = []
    for finding in doc["findings"]:
        folded = _FOLDED.search(finding["message"])
        if folded and len(finding.get("related", ())) != int(folded.group(1)):
            missing.append(f"{finding['path']}:{finding['line']} {finding['code']}: {len(finding.get('related', ()))} "
                           f"of {folded.group(1)} located")
    return missing


@pytest.mark.parametrize("name", ["cuda_only_features", "kernel_ops"])
def test_every_folded_reference_of_a_fixture_has_a_location(name, tmp_path, cli):
    shutil.copytree(FIXTURES / name, tmp_path / name)
    doc = _report(cli, tmp_path / name)
    assert any(_FOLDED.search(f["message"]) for f in doc["findings"]), "the fixture has a fold"
    assert _folds_all_located(doc) == []


def test_every_folded_reference_of_the_audit_package_has_a_location(tmp_path, cli):
    folder = load_audit().build_corpus([PACKAGE], tmp_path)[PACKAGE]
    assert _folds_all_located(_report(cli, folder)) == []


def test_the_schema_declares_related_locations():
    schema = json.loads((REPO / "neuron_port" / "schema" / "report.schema.json").read_text())
    assert set(schema["$defs"]["finding"]["properties"]["related"]["items"]["required"]) == {
        "path", "line", "column", "code"}
