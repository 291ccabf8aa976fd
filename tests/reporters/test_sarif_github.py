"""`--output-format sarif` (validated against the SARIF 2.1.0 schema) and `--output-format github`, for
`rewrite` and `check`, through the real CLI."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from importlib.metadata import metadata
from pathlib import Path

import jsonschema
import pytest

from conftest import FIXTURES, REPO
from neuron_port.reporters import github
from neuron_port.reporters import sarif as sarif_module
from neuron_port.results import FileError, Finding, Fix
from neuron_port.report import Report
from neuron_port.rules.registry import all_rules

SARIF_SCHEMA = REPO / "tests" / "schemas" / "sarif-2.1.0.json"

TRAIN = '''import torch

device = "cuda"
model = torch.nn.Linear(4, 4).cuda()
print(torch.cuda.memory_allocated())
torch.backends.cudnn.benchmark = True
'''


@pytest.fixture(scope="session")
def sarif_validator():
    schema = json.loads(SARIF_SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def sarif(cli, *args: str, cwd: Path, validator) -> tuple[dict, int]:
    args = list(args)
    at = args.index("--") if "--" in args else len(args)  # options go before `check`'s command
    result = cli(*args[:at], "--output-format", "sarif", *args[at:], cwd=cwd)
    assert result.stdout, result.stderr
    doc = json.loads(result.stdout)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    return doc, result.returncode


def apply_fixes(text: str, results: list[dict], uri: str) -> str:
    """Apply every replacement for ``uri`` (each distinct one once), from the end of the file backwards."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return (starts[line - 1] if line - 1 < len(starts) else starts[-1]) + column - 1

    edits = set()
    for result in results:
        for fix in result.get("fixes", []):
            for change in fix["artifactChanges"]:
                if change["artifactLocation"]["uri"] != uri:
                    continue
                for r in change["replacements"]:
                    region = r["deletedRegion"]
                    edits.add((offset(region["startLine"], region["startColumn"]),
                               offset(region["endLine"], region["endColumn"]), r["insertedContent"]["text"]))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def test_rewrite_check_sarif_has_rules_regions_and_fixes(tmp_path, cli, sarif_validator):
    project = tmp_path / "proj"
    shutil.copytree(FIXTURES / "gpt_trainer", project)
    (project / "extra.py").write_text(TRAIN)
    (project / "broken.py").write_text("import torch\nx = torch.cuda(\n")
    doc, code = sarif(cli, "rewrite", "--check", ".", cwd=project, validator=sarif_validator)
    assert code == 1
    assert doc["version"] == "2.1.0"
    [run] = doc["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "neuron-port"

    # one rule entry per registry rule, documented
    registry = all_rules()
    assert [r["id"] for r in driver["rules"]] == [r.CODE for r in registry]
    by_id = {r["id"]: r for r in driver["rules"]}
    np101 = by_id["NP101"]
    assert np101["name"] == "cuda-device-string"
    assert np101["defaultConfiguration"]["level"] == "error"
    assert "## What it does" in np101["fullDescription"]["text"]
    assert np101["help"]["markdown"].startswith("# NP101 cuda-device-string")
    assert np101["helpUri"].endswith("/docs/rules/NP101.md") and "informationUri" not in driver  # the rule page
    levels = {r.SEVERITY: by_id[r.CODE]["defaultConfiguration"]["level"] for r in registry}
    assert levels == {"error": "error", "warning": "warning", "info": "note"}

    results = run["results"]
    for result in results:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
    # a region, exactly as in the text report
    [device] = [r for r in results if r["ruleId"] == "NP101"
                and r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "extra.py"]
    location = device["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
    assert location["region"] == {"startLine": 3, "startColumn": 10, "endLine": 3, "endColumn": 16}
    assert device["level"] == "error" and device["properties"]["source"] == "static"
    # the fix of that finding replaces just the device string
    [change] = device["fixes"][0]["artifactChanges"]
    assert change["replacements"] == [{"deletedRegion": {"startLine": 3, "startColumn": 11, "endLine": 3,
                                                         "endColumn": 15},
                                       "insertedContent": {"text": "neuron"}}]
    # a report-only finding has no fix
    report_only = [r for r in results if not r["properties"]["fix"]["available"]]
    assert report_only and all("fixes" not in r for r in report_only)
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.resolve().as_uri() + "/"

    # applying every fix of a file gives exactly what `neuron-port rewrite` writes
    rewritten = tmp_path / "rewritten"
    shutil.copytree(project, rewritten)
    cli("rewrite", ".", cwd=rewritten)
    changed = 0
    for name in ("train.py", "model.py", "extra.py"):
        original = (project / name).read_text()
        changed += (rewritten / name).read_text() != original
        assert apply_fixes(original, results, name) == (rewritten / name).read_text(), name
    assert changed == 2  # train.py and extra.py

    # the file that does not parse is a tool notification, and the run is not successful
    [invocation] = run["invocations"]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 1
    [note] = invocation["toolExecutionNotifications"]
    assert note["level"] == "error" and "broken.py" in note["message"]["text"]


def test_rewrite_in_place_sarif_lists_only_what_is_left(tmp_path, cli, sarif_validator):
    (tmp_path / "train.py").write_text(TRAIN)
    doc, code = sarif(cli, "rewrite", ".", cwd=tmp_path, validator=sarif_validator)
    [run] = doc["runs"]
    assert run["properties"]["summary"]["fixes_applied"] >= 3
    [left] = run["results"]  # cudnn.benchmark: its fix is unsafe, so not applied and not offered
    assert left["ruleId"] == "NP407" and left["level"] == "note"
    assert left["properties"]["fix"] == {"available": True, "safety": "unsafe"} and "fixes" not in left
    assert code == 0 and run["invocations"][0]["executionSuccessful"] is True


def test_rewrite_github_annotations(tmp_path, cli):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(TRAIN)
    result = cli("rewrite", "--check", "pkg", "--output-format", "github", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines), lines
    assert lines[0] == ("::error file=pkg/train.py,line=3,col=10,endLine=3,endColumn=16,"
                        "title=NP101 cuda-device-string::`\"cuda\"` is a CUDA device string: use `\"neuron\"` "
                        "(fix: `neuron-port rewrite`)")
    [notice] = [line for line in lines if "NP407" in line]
    assert notice.startswith("::notice file=pkg/train.py,line=6,col=1,")
    assert notice.endswith("(fix: `neuron-port rewrite --unsafe-fixes`, needs review)")


def test_github_escaping():
    finding = Finding(code="NP201", name="cuda-api-call", severity="info", path="a,b:c%.py", line=2, column=3,
                      end_line=2, end_column=9, message="50% done\r\nnext: a, b",
                      fix=Fix(False, False, "none"), effort="low")
    line = github.finding_line(finding)
    assert line == ("::notice file=a%2Cb%3Ac%25.py,line=2,col=3,endLine=2,endColumn=9,title=NP201 cuda-api-call"
                    "::50%25 done%0D%0Anext: a, b (effort: low)")
    unplaced = Finding(code="NP909", name="command-failed", severity="error", path=".", line=1, column=1,
                       end_line=1, end_column=1, message="the command exited with code 3",
                       fix=Fix(False, False, "none"), effort=None, source="runtime")
    assert github.render(Report(command="check", target="neuron", runtime_findings=[unplaced])) == (
        "::error title=NP909 command-failed::the command exited with code 3\n")


JOB = textwrap.dedent("""\
    import torch

    def unused():
        return torch.zeros(2, device="cuda")

    x = torch.ones(4, 8, device="neuron", dtype=torch.float64).sum()
    y = torch.multinomial(torch.ones(2, 4, device="neuron"), 1)
    raise SystemExit(3)
    """)


@pytest.mark.slow
def test_check_sarif_and_github(tmp_path, cli, sarif_validator):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "job.py").write_text(JOB)
    doc, code = sarif(cli, "check", "proj", "--", "python", "job.py", cwd=tmp_path, validator=sarif_validator)
    assert code == 1
    [run] = doc["runs"]
    assert run["properties"]["command"] == "check"
    assert run["properties"]["runtime"]["status"]["exit_code"] == 3
    assert run["invocations"][0]["executionSuccessful"] is False
    results = run["results"]
    runtime = [r for r in results if r["properties"]["source"] == "runtime"]
    codes = {r["ruleId"] for r in runtime}
    assert {"NP901", "NP905", "NP909"} <= codes, codes
    [fallback] = [r for r in runtime if r["ruleId"] == "NP901"]
    physical = fallback["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"]["uri"] == "proj/job.py"  # relative to where the command ran
    assert physical["region"]["startLine"] == 7
    assert fallback["level"] == "warning"
    [failed] = [r for r in runtime if r["ruleId"] == "NP909"]
    assert "locations" not in failed and "exited with code 3" in failed["message"]["text"]
    # the static half, with its pending fix
    [static] = [r for r in results if r["ruleId"] == "NP101"]
    assert static["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    assert static["fixes"][0]["artifactChanges"][0]["artifactLocation"]["uri"] == "proj/job.py"

    result = cli("check", "proj", "--output-format", "github", "--", "python", "job.py", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert any(line.startswith("::warning file=proj/job.py,line=7,") and "NP901" in line for line in lines), lines
    assert any(line.startswith("::error title=NP909 ") for line in lines), lines
    assert any(line.startswith("::error file=proj/job.py,line=4,") and "NP101" in line for line in lines), lines


def test_rule_descriptions_help_and_pages(tmp_path, cli, sarif_validator):
    """shortDescription is plain text (the docs' ``code`` spans as `code`, as in the messages); help.text is
    plain text (no backticks, no headings), help.markdown Markdown without reST's double backticks; helpUri
    is the rule's generated page under pyproject's "Rule reference" URL, or under a configured home; with no
    public home (sarif.PROJECT_HOME) the log has no informationUri, and the log validates."""
    (tmp_path / "train.py").write_text(TRAIN)
    doc, _code = sarif(cli, "rewrite", "--check", ".", cwd=tmp_path, validator=sarif_validator)
    driver = doc["runs"][0]["tool"]["driver"]
    by_id = {r["id"]: r for r in driver["rules"]}
    assert by_id["NP103"]["shortDescription"]["text"] == (
        "Rewrites `x.cuda()` / `x.cuda(i)` / `x.cuda(non_blocking=True)` to `x.to(...)`.")
    assert not [r["id"] for r in driver["rules"] if "``" in r["shortDescription"]["text"]]
    assert "``" in by_id["NP103"]["fullDescription"]["text"]  # the whole documentation is kept as written
    assert "informationUri" not in driver
    reference = next(url.split(",", 1)[1].strip() for url in metadata("neuron-port").get_all("Project-URL")
                     if url.lower().startswith("rule reference,")).replace("/tree/", "/blob/")
    assert [r["helpUri"] for r in driver["rules"]] == [f"{reference}/{r['id']}.md" for r in driver["rules"]]
    assert all((REPO / "docs" / "rules" / f"{r['id']}.md").is_file() for r in driver["rules"])
    for rule in driver["rules"]:
        text, markdown = rule["help"]["text"], rule["help"]["markdown"]
        assert "`" not in re.sub(r"^    .*$", "", text, flags=re.M) and not re.search(r"^#", text, re.M), rule["id"]
        assert "``" not in re.sub(r"```", "", markdown) and markdown.startswith(f"# {rule['id']} "), rule["id"]
    assert by_id["NP103"]["help"]["markdown"].count("`x.cuda()`") == 1
    assert "Rewrites x.cuda() / x.cuda(i)" in by_id["NP103"]["help"]["text"]

    home = "https://example.org/mirror/neuron-port/"
    configured = sarif_module.rule_descriptor(all_rules()[0], home=home)
    assert configured["helpUri"] == f"https://example.org/mirror/neuron-port/blob/main/docs/rules/{configured['id']}.md"
    assert (REPO / "docs" / "rules" / f"{configured['id']}.md").is_file()
    document = sarif_module.to_document(Report(command="rewrite", target="neuron"))
    document["runs"][0]["tool"]["driver"]["rules"] = [sarif_module.rule_descriptor(r, home=home) for r in all_rules()]
    assert not list(sarif_validator.iter_errors(document))


def test_a_syntax_error_annotation_carries_its_line(tmp_path, cli):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "broken.py").write_text("import torch\nx = torch.cuda(\n")
    (tmp_path / "pkg" / "late.py").write_text("import torch\n\nx = torch.ones(1).cuda()\ny = = 2\n")
    result = cli("rewrite", "--check", "pkg", "--output-format", "github", cwd=tmp_path)
    errors = sorted(line for line in result.stdout.splitlines() if "title=neuron-port::" in line)
    assert len(errors) == 2, result.stdout
    for line, (path, number) in zip(errors, (("pkg/broken.py", 2), ("pkg/late.py", 4))):
        assert line.startswith(f"::error file={path},line={number},col="), line
        assert f"{path}:{number}:" in line  # the message names the same line
    # an error about the whole file has no line
    unplaced = github.error_line(FileError(path="big.py", message="big.py: 3.0 MB is larger than the 2 MB limit"))
    assert unplaced == "::error file=big.py,title=neuron-port::big.py: 3.0 MB is larger than the 2 MB limit"
