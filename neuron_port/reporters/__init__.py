"""Reporters: one module per output format, one protocol, one dispatch table.

Every reporter is ``emit(report, context, streams)``: it formats a Report (neuron_port.results) onto the
streams it is given and decides nothing else (the CLI owns the streams and the exit code, which reaches
the reporters only to be shown, as SARIF's ``exitCode``). Machine formats write one document to
``streams.out``; the text reporter also writes errors to ``streams.err``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from neuron_port.results import Report


@dataclass(frozen=True)
class RenderContext:
    exit_code: int = 0
    unsafe_fixes: bool = False  # whether unsafe fixes count as pending (SARIF fixes)
    folder: Optional[Path] = None  # `check`: the checked folder (report paths are relative to it)
    diff: bool = False  # `rewrite --diff` (the text summary says "would be rewritten")
    verbose: bool = False
    quiet: bool = False


@dataclass(frozen=True)
class Streams:
    out: "Console"
    err: "Console"


Reporter = Callable[["Report", RenderContext, Streams], None]


def reporter(name: str) -> Reporter:
    """The reporter for an --output-format name (text, json, sarif, github)."""
    from neuron_port.reporters import github, json_report, sarif, text

    table: dict[str, Reporter] = {"text": text.emit, "json": json_report.emit, "sarif": sarif.emit,
                                  "github": github.emit}
    return table[name]


FORMATS = ("text", "json", "sarif", "github")
