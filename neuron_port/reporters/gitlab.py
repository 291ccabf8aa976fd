"""GitLab Code Quality (`--output-format gitlab`) for `rewrite` and `check`: a JSON array of issues, the
report a merge request's Code Quality widget and its diff annotations read (a job's
`artifacts: reports: codequality:` file). The fields are GitLab's, as ruff writes them:

    [{"check_name": "NP103", "description": "NP103 cuda-method-call: `.cuda()` ...", "severity": "major",
      "fingerprint": "9c1f...", "location": {"path": "train.py", "lines": {"begin": 3, "end": 3}}}]

error -> major, warning -> minor, info -> info. One issue per finding that is left and per file that could not
be processed (check_name `neuron-port`, at the line its message names). Paths are relative to the working
directory (for `check` the checked folder is prefixed), which in a pipeline is the repository root. The
fingerprint is stable while the code is edited around a finding: a hash of the path, the code, the message
and how many findings before it in that file share them, not of the line, so GitLab tells new findings
from moved ones.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any, Optional

from neuron_port.reporters.github import error_location
from neuron_port.reporters.protocol import RenderContext, Streams, printable_document
from neuron_port.reporters.sarif import NO_LOCATION, display_path, locate
from neuron_port.report import Report

SEVERITIES = {"error": "major", "warning": "minor", "info": "info"}


def _fingerprint(seen: Counter, *key: str) -> str:
    seen[key] += 1
    return hashlib.sha256("\0".join((*key, str(seen[key]))).encode("utf-8", "surrogateescape")).hexdigest()


def issues(report: Report, folder: Optional[Path] = None) -> list[dict[str, Any]]:
    prefix, _root = locate(folder)
    seen: Counter = Counter()
    found: list[dict[str, Any]] = []
    for error in report.errors:
        line = dict(error_location(error)).get("line", 1)
        path = display_path(error.path, prefix)
        found.append({"check_name": "neuron-port", "description": error.message, "severity": "blocker",
                      "fingerprint": _fingerprint(seen, path, "error", error.message),
                      "location": {"path": path, "lines": {"begin": line, "end": line}}})
    for f in report.findings:
        if f.fix.applied:
            continue
        path = display_path(f.path, prefix) if f.path not in NO_LOCATION else "."
        where = f" (cell {f.cell}, line {f.line})" if f.cell is not None else ""
        begin = 1 if f.cell is not None or f.path in NO_LOCATION else f.line
        end = begin if f.cell is not None or f.path in NO_LOCATION else max(f.end_line, f.line)
        found.append({"check_name": f.code, "description": f"{f.code} {f.name}: {f.message}{where}",
                      "severity": SEVERITIES.get(f.severity, "minor"),
                      "fingerprint": _fingerprint(seen, path, f.code, f.message),
                      "location": {"path": path, "lines": {"begin": begin, "end": end}}})
    return found


def emit(report: Report, context: RenderContext, streams: Streams) -> None:
    document = printable_document(issues(report, folder=context.folder))
    streams.out.file.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
