"""`check --html` for a shape-only run: the header names the mode and a section lists the placeholders and
size rules, every value escaped; a real run's page and a saved report written before the mode existed
have no such section. Rendered from report documents, no simulator and no browser."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

from neuron_port.check.events import read_events
from neuron_port.check.runner import RunStatus
from neuron_port.check.runtime import build_runtime
from neuron_port.check.sites import SiteMapper
from neuron_port.report import Report
from neuron_port.reporters.html.page import render
from neuron_port.reporters.json_report import to_document

HOSTILE_CODE = "x = '</td><script>alert(1)</script>'"
HOSTILE_OP = "aten::<b>nonzero</b>"


def document(tmp_path: Path, mode: str = "shape_only") -> dict:
    root, events = tmp_path / "project", tmp_path / "events"
    root.mkdir(parents=True)
    events.mkdir()

    def site(line: int, code: str) -> dict:
        return {"file": str(root / "train.py"), "line": line, "function": "step", "code": code}

    for rank, pid in ((0, 100), (1, 101)):
        lines = [{"kind": "process", "schema": 1, "pid": pid, "rank": rank, "status": "exited", "mode": mode},
                 {"kind": "op", "op": "aten::mul.Tensor", "policy": "native", "calls": 4, "unique_signatures": 1}]
        if mode == "shape_only":
            lines += [
                {"kind": "shape_only", "event": "placeholder", "op": "aten::_local_scalar_dense", "value": False,
                 "site": site(40, HOSTILE_CODE), "time": 0.1},
                {"kind": "shape_only", "event": "placeholder", "op": "aten::_to_copy", "value": 0.0, "shape": [4, 8],
                 "site": site(41, "y = x.cpu()"), "time": 0.2},
                {"kind": "shape_only", "event": "size_rule", "op": HOSTILE_OP, "rule": "upper_bound",
                 "shape": [16, 1], "upper_bound": [16, 1], "site": site(57, "idx = mask.nonzero()"), "time": 0.3},
                {"kind": "shape_only", "event": "size_rule", "op": "aten::masked_select", "rule": "site",
                 "shape": [128], "upper_bound": [4096], "site": site(12, "y = x[mask]"), "time": 0.4},
            ]
        lines.append({"kind": "summary", "op_calls": 4, "native_calls": 4, "complete": True})
        (events / f"neuron-events-rank{rank}-pid{pid}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    status = RunStatus(command=["torchrun", "--nproc_per_node=2", "train.py"], exit_code=0, duration=0.5, processes=2)
    section, findings = build_runtime(read_events(events, on_note=None), status, SiteMapper(root))
    # through JSON, as a saved report is rendered
    return json.loads(json.dumps(to_document(Report(command="check", target="neuron", runtime=section,
                                                    runtime_findings=findings))))


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.ids += [value for name, value in attrs if name == "id" and value]


def rows(page: str, heading: str) -> list[str]:
    """The text of each body row of the table under the ``<h3>`` ``heading``."""
    table = page.split(f"<h3>{heading}</h3>", 1)[1].split("</table>", 1)[0]
    body = table.split("<tbody>", 1)[1]
    return ["|".join(re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row))
            for row in body.split("</tr>") if "<td" in row]


def test_the_page_names_the_mode_and_lists_the_sites(tmp_path):
    page = render(document(tmp_path))
    parts = Tags()
    parts.feed(page)
    assert "<strong>shape-only run</strong>: no values computed" in page.split("</header>", 1)[0]
    assert "shape-only" in parts.ids and '<a href="#shape-only">Shape-only run</a>' in page
    assert "2 line(s)) and data-dependent sizes follow a size rule (2 line(s))" in page
    placeholders = rows(page, "Placeholders")
    assert placeholders[0].startswith("train.py:40|aten::_local_scalar_dense|False|0,1|")
    assert placeholders[1] == "train.py:41|aten::_to_copy|zeros [4, 8]|0,1|y = x.cpu()"
    sizes = rows(page, "Size rules")
    assert sizes[0] == "train.py:12|aten::masked_select|site|[128]|[4096]|0,1|y = x[mask]"
    assert sizes[1].startswith("train.py:57|aten::&lt;b&gt;nonzero&lt;/b&gt;|upper_bound|[16, 1]|[16, 1]|0,1|")
    # NP911 in the findings table: two placeholder lines, one line at its upper bound (line 12 was set)
    findings = page.split('id="findings"', 1)[1]
    assert findings.count("NP911") == 3 and "train.py:12" not in findings


def test_every_value_is_escaped(tmp_path):
    page = render(document(tmp_path))
    parts = Tags()
    parts.feed(page)
    assert "script" not in parts.tags and "b" not in parts.tags
    assert "&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_real_run_and_an_older_report_have_no_shape_only_section(tmp_path):
    real = document(tmp_path / "real", mode="real")
    assert real["runtime"]["mode"] == "real"
    older = document(tmp_path / "older")
    del older["runtime"]["mode"], older["runtime"]["shape_only"]  # written before shape-only runs existed
    for name, doc in (("real", real), ("older", older)):
        page = render(doc)
        assert 'id="shape-only"' not in page and "<strong>shape-only run</strong>" not in page, name
