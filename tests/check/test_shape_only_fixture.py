"""`check --shape-only` on a program that reads device values and has data-dependent sizes (the
moe_routing fixture: top-1 expert routing through `torch.nonzero`, a padding mask, a NaN check,
`loss.item()` logging and an early stop), through the real CLI: it runs to the end, and the report
lists each placeholder and size-rule site at its line; what follows from the batch's own (real, small)
data alone, the padding mask's token count and the masked size, is exact and not listed; `--size-rule`
sets a size at a line."""

from __future__ import annotations

import json
import re
import shutil

import jsonschema
import pytest

from conftest import FIXTURES

pytestmark = pytest.mark.slow


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def shape_only_check(cli, schema, tmp_path, *options, shape_only=True):
    project = tmp_path / ("moe_routing" if shape_only else "real") / "moe_routing"
    shutil.copytree(FIXTURES / "moe_routing", project)
    result = cli("check", str(project), *(["--shape-only"] if shape_only else []), "--output-format", "json",
                 *options, "--", "python", "train.py", "--steps", "4")
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, schema)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    return doc, (project / "train.py").read_text(), result.stderr


def test_every_value_read_and_data_dependent_size_is_listed_at_its_line(tmp_path, cli, report_schema, sim_build):
    doc, source, output = shape_only_check(cli, report_schema, tmp_path)
    assert doc["runtime"]["mode"] == "shape_only"
    section = doc["runtime"]["shape_only"]
    placeholders = {(p["site"]["line"], p["op"]): p["value"] for p in section["placeholders"]}
    assert placeholders == {
        (line_of(source, "if not torch.isfinite(loss):"), "aten::_local_scalar_dense"): True,  # finite: not skipped
        (line_of(source, "value = loss.item()"), "aten::_local_scalar_dense"): 0.0,
    }
    sizes = {(s["site"]["line"], s["op"]): (s["rule"], s["shape"]) for s in section["size_rules"]}
    routing = line_of(source, "torch.nonzero(choice == index)")
    assert sizes == {(routing, "aten::nonzero"): ("upper_bound", [128, 1])}  # 8 x 16 tokens, all routed here
    np911 = {f["line"] for f in doc["findings"] if f["code"] == "NP911"}
    assert np911 == {line for line, _ in placeholders} | {routing}
    # the padding mask comes from the batch (real CPU data moved to the device): its count is the real one
    _, _, real_output = shape_only_check(cli, report_schema, tmp_path, shape_only=False)
    tokens = re.compile(r"tokens (\d+)")
    assert tokens.findall(output) == tokens.findall(real_output) and len(tokens.findall(output)) == 4
    assert "loss is not finite" not in doc["runtime"]["status"]["stderr_tail"]  # the NaN check took its usual path


def test_a_size_rule_sets_the_data_dependent_size_at_its_line(tmp_path, cli, report_schema, sim_build):
    source = (FIXTURES / "moe_routing" / "train.py").read_text()
    routing = line_of(source, "torch.nonzero(choice == index)")
    doc, _, _ = shape_only_check(cli, report_schema, tmp_path, "--size-rule", f"train.py:{routing}=32")
    sizes = {s["site"]["line"]: (s["rule"], s["shape"]) for s in doc["runtime"]["shape_only"]["size_rules"]}
    assert sizes[routing] == ("site", [32, 1])
    assert routing not in {f["line"] for f in doc["findings"] if f["code"] == "NP911"}


@pytest.mark.parametrize("options, message", [
    (["--size-rule", "train.py=3"], "expected FILE:LINE=N"),
    (["--size-rule", "train.py:5=many"], "expected FILE:LINE=N"),
    (["--size-rule", "train.py:5=3"], "add --shape-only"),
    (["--shape-only", "--nproc", "2"], "--nproc is not supported"),
    (["--world-size", "8"], "add --shape-only"),
])
def test_bad_shape_only_options_are_usage_errors(options, message, tmp_path, cli):
    (tmp_path / "train.py").write_text("print('never runs')\n")
    result = cli("check", str(tmp_path), *options, "--", "python", "train.py")
    assert result.returncode == 2
    assert message in result.stderr
    assert "never runs" not in result.stdout + result.stderr
