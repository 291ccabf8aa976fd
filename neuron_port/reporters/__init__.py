"""Reporters: one module per output format, one protocol, one dispatch table.

Every reporter is ``emit(report, context, streams)``: it formats a Report (neuron_port.results) onto the
streams it is given and decides nothing else (the CLI owns the streams and the exit code, which reaches
the reporters only to be shown, as SARIF's ``exitCode``). Machine formats write one document to
``streams.out``; the text reporter also writes errors to ``streams.err``.
"""

from __future__ import annotations

from neuron_port.reporters import github, json_report, sarif, text
from neuron_port.reporters.protocol import RenderContext, Reporter, Streams

__all__ = ["FORMATS", "RenderContext", "Reporter", "Streams", "reporter"]

REPORTERS: dict[str, Reporter] = {"text": text.emit, "json": json_report.emit, "sarif": sarif.emit,
                                  "github": github.emit}
FORMATS = tuple(REPORTERS)


def reporter(name: str) -> Reporter:
    """The reporter for an --output-format name (text, json, sarif, github)."""
    return REPORTERS[name]
