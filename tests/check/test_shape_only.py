"""A shape-only run's report side: the ``shape_only`` event (placeholders and size rules, EVENTS.md), the
process line's ``mode``, their aggregator merging ranks per (event, op, site), NP911, and the runtime
section's ``mode`` and ``shape_only`` against the report schema. Hand-written events, no simulator."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from neuron_port.check.aggregate.shape_only import ShapeOnlyAggregator
from neuron_port.check.events import (
    MalformedEvent,
    ProcessEvent,
    ShapeOnlyEvent,
    Site,
    parse_event,
    parse_events_file,
    read_events,
)
from neuron_port.check.runner import RunStatus
from neuron_port.check.runtime import build_runtime
from neuron_port.check.sites import SiteMapper, UserSite
from neuron_port.reporters.json_report import to_document
from neuron_port.report import Report
from neuron_port.rules.registry import rule_by_code

SITE = {"file": "/work/proj/train.py", "line": 57, "function": "step", "code": "idx = torch.nonzero(mask)"}
TYPED_SITE = Site(file="/work/proj/train.py", line=57, function="step", code="idx = torch.nonzero(mask)")
PLACEHOLDER = {"kind": "shape_only", "event": "placeholder", "op": "aten::_local_scalar_dense", "value": 0.0,
               "site": SITE, "time": 0.25}
COPY = {"kind": "shape_only", "event": "placeholder", "op": "aten::_to_copy", "value": 0.0, "shape": [4, 8],
        "site": SITE, "time": 0.5}
SIZE_RULE = {"kind": "shape_only", "event": "size_rule", "op": "aten::nonzero", "rule": "upper_bound",
             "shape": [16, 1], "upper_bound": [16, 1], "site": SITE, "time": 0.75}


def line(fields: dict) -> str:
    return json.dumps(fields)


@pytest.mark.parametrize("fields, expected", [
    (PLACEHOLDER, ShapeOnlyEvent(event="placeholder", op="aten::_local_scalar_dense", value=0.0, site=TYPED_SITE,
                                 time=0.25)),
    (COPY, ShapeOnlyEvent(event="placeholder", op="aten::_to_copy", value=0.0, shape=(4, 8), site=TYPED_SITE,
                          time=0.5)),
    ({**PLACEHOLDER, "value": False}, ShapeOnlyEvent(event="placeholder", op="aten::_local_scalar_dense",
                                                      value=False, site=TYPED_SITE, time=0.25)),
    ({**PLACEHOLDER, "value": "0j"}, ShapeOnlyEvent(event="placeholder", op="aten::_local_scalar_dense", value="0j",
                                                     site=TYPED_SITE, time=0.25)),  # the writer's default=str
    (SIZE_RULE, ShapeOnlyEvent(event="size_rule", op="aten::nonzero", rule="upper_bound", shape=(16, 1),
                               upper_bound=(16, 1), site=TYPED_SITE, time=0.75)),
    ({"kind": "shape_only", "site": None}, ShapeOnlyEvent()),
], ids=["placeholder", "copy", "false", "complex", "size_rule", "defaults"])
def test_shape_only_lines_parse(fields, expected):
    event = parse_event(line(fields))
    assert event == expected and type(event) is ShapeOnlyEvent


@pytest.mark.parametrize("fields", [
    {**PLACEHOLDER, "value": {"real": 0}},
    {**PLACEHOLDER, "value": [0]},
    {**COPY, "shape": "4x8"},
    {**COPY, "shape": [4.0, 8]},
    {**SIZE_RULE, "upper_bound": [16, None]},
    {**SIZE_RULE, "rule": 3},
    {**SIZE_RULE, "op": ["aten::nonzero"]},
    {**SIZE_RULE, "site": [57]},
    {**SIZE_RULE, "time": "0.75"},
])
def test_malformed_shape_only_lines_raise(fields):
    with pytest.raises(MalformedEvent):
        parse_event(line(fields))


def test_a_malformed_shape_only_line_is_skipped_and_counted(tmp_path):
    text = "\n".join([line(PLACEHOLDER), line({**COPY, "shape": "4x8"}), line(SIZE_RULE)]) + "\n"
    process = parse_events_file(tmp_path / "neuron-events-rank0-pid1.jsonl", text)
    assert process.bad_lines == 1 and "shape: expected a list" in process.notes[0]
    assert [e.event for e in process.events] == ["placeholder", "size_rule"]


def test_the_process_line_says_its_mode():
    process = {"kind": "process", "schema": 1, "pid": 1}
    assert parse_event(line(process)) == ProcessEvent(schema=1, pid=1, mode="real")  # an older simulator
    assert parse_event(line({**process, "mode": "shape_only"})).mode == "shape_only"
    with pytest.raises(MalformedEvent):
        parse_event(line({**process, "mode": 1}))


def at(root: Path, line_number: int, code: str = "if loss.item() < 0.1:") -> Site:
    return Site(file=str(root / "train.py"), line=line_number, function="step", code=code)


def shown(line_number: int, code: str = "if loss.item() < 0.1:") -> dict:
    return UserSite(path="train.py", line=line_number, function="step", code=code).to_json()


def test_two_ranks_merge_per_event_op_and_site(tmp_path):
    aggregator = ShapeOnlyAggregator(SiteMapper(tmp_path))
    for rank in (1, 0):
        aggregator.add(ShapeOnlyEvent(event="placeholder", op="aten::_local_scalar_dense", value=0.0,
                                      site=at(tmp_path, 40)), rank)
        aggregator.add(ShapeOnlyEvent(event="size_rule", op="aten::nonzero", rule="upper_bound", shape=(16, 1),
                                      upper_bound=(16, 1), site=at(tmp_path, 57, "idx = mask.nonzero()")), rank)
    # rank 0 only: a copy to the CPU at the same line as its read (another op: its own entry), a sized line
    aggregator.add(ShapeOnlyEvent(event="placeholder", op="aten::_to_copy", value=0.0, shape=(4, 8),
                                  site=at(tmp_path, 40)), 0)
    aggregator.add(ShapeOnlyEvent(event="size_rule", op="aten::masked_select", rule="site", shape=(128,),
                                  upper_bound=(4096,), site=at(tmp_path, 12, "y = x[mask]")), 0)
    aggregator.add(ShapeOnlyEvent(event="later_kind", op="aten::mm", site=at(tmp_path, 3)), 0)  # not reported
    [part] = aggregator.section()
    assert part.to_json() == {
        "placeholder_sites": 1, "size_rule_sites": 2,
        "placeholders": [
            {"op": "aten::_local_scalar_dense", "site": shown(40), "value": 0.0, "shape": None, "ranks": [0, 1]},
            {"op": "aten::_to_copy", "site": shown(40), "value": 0.0, "shape": [4, 8], "ranks": [0]}],
        "size_rules": [
            {"op": "aten::masked_select", "site": shown(12, "y = x[mask]"), "rule": "site", "shape": [128],
             "upper_bound": [4096], "ranks": [0]},
            {"op": "aten::nonzero", "site": shown(57, "idx = mask.nonzero()"), "rule": "upper_bound",
             "shape": [16, 1], "upper_bound": [16, 1], "ranks": [0, 1]}],
    }
    # NP911: once per line read (its first op), once per line at its upper bound; a line --size-rule set is
    # listed, not reported
    findings = aggregator.findings()
    assert [(f.code, f.severity, f.path, f.line, f.source, f.message) for f in findings] == [
        ("NP911", "info", "train.py", 40, "runtime",
         "value not computed in a shape-only run: aten::_local_scalar_dense returned 0.0 here; control flow that "
         "depends on it may differ from a real run"),
        ("NP911", "info", "train.py", 57, "runtime",
         "data-dependent size: aten::nonzero sized at its upper bound [16, 1]; set --size-rule FILE:LINE=N for the "
         "real size"),
    ]
    assert all(len(f.message) <= 160 and "\n" not in f.message and not f.fix.available for f in findings)


@pytest.mark.parametrize("value, shape, shown_as", [
    (False, None, "returned False here"), (True, None, "returned True here"), (0, None, "returned 0 here"),
    ("0j", None, "returned 0j here"), (0.0, (2, 3), "returned zeros here"),
])
def test_np911_names_the_placeholder_as_python_shows_it(tmp_path, value, shape, shown_as):
    aggregator = ShapeOnlyAggregator(SiteMapper(tmp_path))
    aggregator.add(ShapeOnlyEvent(event="placeholder", op="aten::is_nonzero", value=value, shape=shape,
                                  site=at(tmp_path, 9)), None)
    [finding] = aggregator.findings()
    assert shown_as in finding.message


def test_a_placeholder_without_a_user_frame_is_reported_at_the_project(tmp_path):
    aggregator = ShapeOnlyAggregator(SiteMapper(tmp_path))
    aggregator.add(ShapeOnlyEvent(event="placeholder", op="aten::_local_scalar_dense", value=0), None)
    [finding] = aggregator.findings()
    assert (finding.path, finding.line) == ("<unknown>", 1)
    assert aggregator.section()[0].placeholders[0].to_json()["site"] is None


def test_the_size_rule_message_template_is_one_short_line():
    rule = rule_by_code("NP911")
    assert rule.SEVERITY == "info" and rule.KIND == "runtime"
    fixed = rule.SIZE_RULE_MESSAGE.format(op="", shape="")
    assert "\n" not in rule.SIZE_RULE_MESSAGE and len(fixed) <= 130


def process_line(rank: int, pid: int, mode: str = "shape_only") -> dict:
    return {"kind": "process", "schema": 1, "simulator": "neuron-port", "pid": pid, "rank": rank, "local_rank": rank,
            "world_size": 2, "argv": ["train.py"], "cwd": "/p", "started": 1.0, "written": 2.0, "status": "exited",
            "torchneuron_release": {}, "unsupported_mode": "raise", "mode": mode, "torch": "2.13.0+cpu"}


def shape_only_run(tmp_path: Path, mode: str = "shape_only"):
    """Two ranks of a shape-only run, written as the simulator writes them (one malformed line)."""
    root, events = tmp_path / "project", tmp_path / "events"
    root.mkdir()
    events.mkdir()
    read = {"file": str(root / "train.py"), "line": 40, "function": "step", "code": "if loss.item() < 0.1:"}
    sized = {"file": str(root / "train.py"), "line": 57, "function": "step", "code": "idx = torch.nonzero(mask)"}
    for rank, pid in ((0, 100), (1, 101)):
        lines = [process_line(rank, pid, mode),
                 {"kind": "op", "op": "aten::mul.Tensor", "policy": "native", "calls": 3, "unique_signatures": 1},
                 {**PLACEHOLDER, "site": read}, {**SIZE_RULE, "site": sized},
                 {"kind": "summary", "op_calls": 3, "native_calls": 3, "complete": True}]
        text = "".join(json.dumps(e) + "\n" for e in lines)
        if rank == 1:
            text += json.dumps({**SIZE_RULE, "upper_bound": "16x1"}) + "\n"
        (events / f"neuron-events-rank{rank}-pid{pid}.jsonl").write_text(text)
    status = RunStatus(command=["torchrun", "--nproc_per_node=2", "train.py"], exit_code=0, duration=1.0,
                       processes=2)
    return build_runtime(read_events(events, on_note=None), status, SiteMapper(root))


def test_build_runtime_reports_a_shape_only_run_and_its_json_validates(tmp_path, report_schema):
    section, findings = shape_only_run(tmp_path)
    runtime = section.to_json()
    assert list(runtime)[0] == "mode" and runtime["mode"] == "shape_only"
    assert runtime["processes"][1]["notes"] and "upper_bound: expected a list" in runtime["processes"][1]["notes"][0]
    assert runtime["shape_only"]["placeholders"] == [
        {"op": "aten::_local_scalar_dense", "site": shown(40), "value": 0.0, "shape": None, "ranks": [0, 1]}]
    assert runtime["shape_only"]["size_rules"][0]["ranks"] == [0, 1]
    assert list(runtime)[-2:] == ["shape_only", "failures"]  # the last aggregator's key, before failures
    assert [(f.code, f.line) for f in findings] == [("NP911", 40), ("NP911", 57)]
    doc = to_document(Report(command="check", target="neuron", runtime=section, runtime_findings=findings))
    jsonschema.validate(doc, report_schema)


def test_a_real_run_has_an_empty_part_and_its_json_validates(tmp_path, report_schema):
    root = tmp_path / "project"
    root.mkdir()
    section, findings = build_runtime([], RunStatus(command=["python", "t.py"], exit_code=0), SiteMapper(root))
    runtime = section.to_json()
    assert runtime["mode"] == "real" and runtime["shape_only"] == {
        "placeholder_sites": 0, "size_rule_sites": 0, "placeholders": [], "size_rules": []}
    assert not [f for f in findings if f.code == "NP911"]
    jsonschema.validate(to_document(Report(command="check", target="neuron", runtime=section,
                                           runtime_findings=findings)), report_schema)
    for broken in ({**runtime, "mode": "fake"}, {k: v for k, v in runtime.items() if k != "mode"},
                   {k: v for k, v in runtime.items() if k != "shape_only"}):
        doc = to_document(Report(command="check", target="neuron"))
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**doc, "runtime": broken}, report_schema)
