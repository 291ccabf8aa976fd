"""Reporters: one module or package per output format, two kinds of format, one dispatch.

STREAM formats (``REPORTERS``, the choices of --output-format: text, json, sarif, github, gitlab; each module is
imported when its format is asked for) are ``emit(report, context, streams)``: each formats a Report (neuron_port.results) onto the streams it is
given and decides nothing else (the CLI owns the streams and the exit code, which reaches the reporters
only to be shown, as SARIF's ``exitCode``). Machine formats write one document to ``streams.out``; the
text reporter (``text/``) also writes errors to ``streams.err``. ``render_report`` is the dispatch of the
whole CLI: the format asked for, or with --statistics the counts per code (``text/statistics.py``).

FILE formats (``FILE_REPORTERS``: html, the page `check --html FILE` writes) render the report's JSON
document (``json_report.to_document``) to the whole text of a file, so a saved JSON report renders the same
(`python -m neuron_port.commands.html REPORT.json --html FILE`); the CLI writes the file. A file format's
modules are imported only when a file is written (``html/`` draws with matplotlib, the `html` extra).

The rule pages (`rules`, `explain`, docs/rules/) are not a report: the registry renders them
(neuron_port.rules.docs).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from neuron_port.report import Report
from neuron_port.reporters.protocol import FileReporter, RenderContext, Reporter, Streams

__all__ = ["FILE_FORMATS", "FORMATS", "FileReporter", "RenderContext", "Reporter", "Streams", "file_reporter",
           "render_report", "reporter"]

# Each format's module, imported when the format is asked for: a run prints one format (the pre-commit
# hook, text, does not pay for SARIF's and GitHub's modules).
REPORTERS: dict[str, str] = {"text": "neuron_port.reporters.text.findings", "json": "neuron_port.reporters.json_report",
                             "sarif": "neuron_port.reporters.sarif", "github": "neuron_port.reporters.github",
                             "gitlab": "neuron_port.reporters.gitlab"}
FORMATS = tuple(REPORTERS)


def html_page(document: dict[str, Any]) -> str:
    """The HTML page of a report document (reporters/html/page.py, imported on the first page)."""
    from neuron_port.reporters.html.page import render

    return render(document)


FILE_REPORTERS: dict[str, FileReporter] = {"html": html_page}
FILE_FORMATS = tuple(FILE_REPORTERS)


def reporter(name: str) -> Reporter:
    """The reporter for an --output-format name (text, json, sarif, github): its module's ``emit``."""
    emit: Reporter = import_module(REPORTERS[name]).emit
    return emit


def file_reporter(name: str) -> FileReporter:
    """The renderer of a file format (html)."""
    return FILE_REPORTERS[name]


def render_report(report: Report, output_format: str, context: RenderContext, streams: Streams,
                  statistics: bool) -> None:
    """The report in ``output_format``, or with --statistics its counts per code (and, on stderr, the
    files that could not be processed)."""
    if not statistics:
        return reporter(output_format)(report, context, streams)
    from neuron_port.reporters.text.statistics import render as render_statistics

    streams.out.file.write(render_statistics(report, output_format, context.unsafe_fixes))
    for error in report.errors:
        streams.err.print(error.message, markup=False, highlight=False)
