"""The JSON report (schema_version 1), shared by `rewrite` and `check`.

The schema ships with the package (neuron_port/schema/report.schema.json) and the tests validate every
document against it.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from neuron_port import __version__
from neuron_port.reporters.protocol import RenderContext, Streams, printable_document
from neuron_port.report import Report
from neuron_port.rewrite.statistics import file_statistics, total_statistics

SCHEMA_VERSION = 1


def summary(report: Report) -> dict[str, Any]:
    wrote = report.wrote
    findings = report.findings
    remaining = [f for f in findings if not f.fix.applied]
    pending = sum(1 for f in findings if f.fix.available and not f.fix.applied)
    return {
        "files_scanned": len(report.files),
        "files_changed": sum(1 for r in report.files if r.changed),
        "fixes_applied": sum(r.fixes_applied for r in report.files) if wrote else 0,
        "fixes_pending": 0 if wrote else sum(r.fixes_applied for r in report.files),
        "fixable_unapplied": pending,
        "findings": len(findings),
        "findings_remaining": len(remaining),
        "by_code": dict(sorted(Counter(f.code for f in findings).items())),
        "by_severity": {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warning", "info")},
        "errors": len(report.errors),
        "statistics": total_statistics(report.files).to_json(),
    }


def to_document(report: Report) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "neuron-port", "version": __version__},
        "command": report.command,
        "target": report.target,
        "summary": summary(report),
        "files": [{"path": r.path, "changed": r.changed, "statistics": file_statistics(r).to_json()}
                  for r in report.files],
        "findings": [f.to_json() for f in report.findings],
        "errors": [{"path": e.path, "message": e.message} for e in report.errors],
    }
    if report.runtime is not None:
        doc["runtime"] = report.runtime.to_json()
        if report.runtime.estimate is not None:
            doc["estimate"] = report.runtime.estimate
    return doc


def render(report: Report) -> str:
    return json.dumps(printable_document(to_document(report)), indent=2, sort_keys=False) + "\n"


def emit(report: Report, context: RenderContext, streams: Streams) -> None:
    streams.out.file.write(render(report))
