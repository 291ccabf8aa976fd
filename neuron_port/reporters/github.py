"""GitHub Actions workflow commands (`--output-format github`) for `rewrite` and `check`.

One line per finding that is left, which GitHub shows as an annotation on the pull request:

    ::error file=train.py,line=3,col=10,endLine=3,endColumn=16,title=NP101 cuda-device-string::message

error -> `::error`, warning -> `::warning`, info -> `::notice`. Paths are relative to the working
directory (for `check` the checked folder is prefixed), which in a workflow is the repository root.
Files that could not be processed are `::error` lines too, with the `line` (and `col`) their message
names (a syntax error). Values are escaped as the Actions runner
expects: `%`, CR and LF in the message; additionally `:` and `,` in properties.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from neuron_port.reporters.sarif import NO_LOCATION, display_path, locate
from neuron_port.reporters.protocol import RenderContext, Streams, printable
from neuron_port.results import FileError, Finding
from neuron_port.report import Report

COMMANDS = {"error": "error", "warning": "warning", "info": "notice"}
_LINE_COLUMN = re.compile(r"([1-9][0-9]*)(?::([1-9][0-9]*))?: ")


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def _command(kind: str, properties: list[tuple[str, object]], message: str) -> str:
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties)
    return f"::{kind}{(' ' + props) if props else ''}::{escape_data(message)}"


def finding_line(f: Finding, prefix: Optional[str] = None) -> str:
    properties: list[tuple[str, object]] = []
    message = f.message
    if f.path not in NO_LOCATION:
        properties.append(("file", display_path(f.path, prefix)))
        if f.cell is None:
            properties += [("line", f.line), ("col", f.column), ("endLine", max(f.end_line, f.line)),
                           ("endColumn", max(1, f.end_column))]
        else:
            message = f"cell {f.cell}, line {f.line}: {message}"
    properties.append(("title", f"{f.code} {f.name}"))
    if f.fix.available and not f.fix.applied:
        message += (" (fix: `neuron-port rewrite`)" if f.fix.safety == "safe"
                    else " (fix: `neuron-port rewrite --unsafe-fixes`, needs review)")
    elif f.effort and not f.fix.available:
        message += f" (effort: {f.effort})"
    return _command(COMMANDS.get(f.severity, "warning"), properties, message)


def error_location(error: FileError) -> list[tuple[str, object]]:
    """``line`` (and ``col``) of a file's error whose message names them the way a syntax error does,
    ``PATH:LINE:COL: why`` (neuron_port/rewrite/syntax.py); nothing for an error about the whole file."""
    if not error.message.startswith(error.path + ":"):
        return []
    found = _LINE_COLUMN.match(error.message, len(error.path) + 1)
    if found is None:
        return []
    line, column = found.groups()
    return [("line", int(line))] + ([("col", int(column))] if column else [])


def error_line(error: FileError, prefix: Optional[str] = None) -> str:
    properties = [("file", display_path(error.path, prefix)), *error_location(error), ("title", "neuron-port")]
    return _command("error", properties, error.message)


def render(report: Report, folder: Optional[Path] = None) -> str:
    """``folder`` is the `check` folder, whose report paths are relative to it."""
    prefix, _root = locate(folder)
    lines = [error_line(e, prefix) for e in report.errors]
    lines += [finding_line(f, prefix) for f in report.findings if not f.fix.applied]
    return "".join(line + "\n" for line in lines)


def emit(report: Report, context: RenderContext, streams: Streams) -> None:
    streams.out.file.write(printable(render(report, folder=context.folder)))
