"""`check`'s console output for a shape-only run: the run panel says so (no values computed, the placeholder
and size-rule lines counted) and NP911 is listed with the other findings; a real run's panel does not
mention it. Built from hand-written event files, no simulator."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from neuron_port.check.events import read_events
from neuron_port.check.runner import RunStatus
from neuron_port.check.runtime import build_runtime
from neuron_port.check.sites import SiteMapper
from neuron_port.report import Report
from neuron_port.reporters.protocol import RenderContext, Streams
from neuron_port.reporters.text import findings as text_reporter
from neuron_port.reporters.text.check import summary_line


def report_of(tmp_path: Path, mode: str) -> Report:
    root, events = tmp_path / "project", tmp_path / "events"
    root.mkdir()
    events.mkdir()

    def site(line: int, code: str) -> dict:
        return {"file": str(root / "train.py"), "line": line, "function": "step", "code": code}

    lines = [
        {"kind": "process", "schema": 1, "pid": 7, "rank": None, "status": "exited", "mode": mode},
        {"kind": "op", "op": "aten::mul.Tensor", "policy": "native", "calls": 4, "unique_signatures": 1},
        {"kind": "summary", "op_calls": 4, "native_calls": 4, "complete": True},
    ]
    if mode == "shape_only":
        lines[2:2] = [
            {"kind": "shape_only", "event": "placeholder", "op": "aten::_local_scalar_dense", "value": 0.0,
             "site": site(40, "if loss.item() < 0.1:"), "time": 0.1},
            {"kind": "shape_only", "event": "placeholder", "op": "aten::_to_copy", "value": 0.0, "shape": [4],
             "site": site(41, "print(x.cpu())"), "time": 0.2},
            {"kind": "shape_only", "event": "size_rule", "op": "aten::nonzero", "rule": "upper_bound",
             "shape": [16, 1], "upper_bound": [16, 1], "site": site(57, "idx = torch.nonzero(mask)"), "time": 0.3},
        ]
    (events / "neuron-events-norank-pid7.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    status = RunStatus(command=["python", "train.py"], exit_code=0, duration=0.5, processes=1)
    section, findings = build_runtime(read_events(events, on_note=None), status, SiteMapper(root))
    return Report(command="check", target="neuron", runtime=section, runtime_findings=findings)


def printed(report: Report, quiet: bool = False) -> str:
    out, err = io.StringIO(), io.StringIO()
    streams = Streams(out=Console(file=out, width=200, highlight=False, emoji=False, markup=False),
                      err=Console(file=err, width=200))
    text_reporter.emit(report, RenderContext(quiet=quiet), streams)
    return out.getvalue()


def test_the_run_panel_says_shape_only_and_np911_is_listed(tmp_path):
    text = printed(report_of(tmp_path, "shape_only"))
    assert "shape-only run: no values computed; 2 placeholder site(s), 1 size-rule site(s)" in text
    assert ("train.py:40:1: NP911 value not computed in a shape-only run: aten::_local_scalar_dense returned 0.0 "
            "here; control flow that depends on it may differ from a real run (effort: low)") in text
    assert "train.py:41:1: NP911 value not computed in a shape-only run: aten::_to_copy returned zeros here" in text
    assert ("train.py:57:1: NP911 data-dependent size: aten::nonzero sized at its upper bound [16, 1]; set "
            "--size-rule FILE:LINE=N for the real size") in text
    # the panel comes before the findings, as for every check
    assert text.index("shape-only run:") < text.index("NP911")


def test_quiet_lists_the_findings_and_counts_them_as_info(tmp_path):
    report = report_of(tmp_path, "shape_only")
    text = printed(report, quiet=True)
    assert text.count(" NP911 ") == 3
    assert summary_line(report).endswith("3 finding(s) (3 info)")


def test_a_real_run_says_nothing_of_shape_only(tmp_path):
    report = report_of(tmp_path, "real")
    assert report.runtime is not None and report.runtime.mode == "real"
    text = printed(report)
    assert "shape-only" not in text and "NP911" not in text
