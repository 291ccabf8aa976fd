"""The reporters' protocols: a stream format's ``emit(report, context, streams)`` formats a Report onto the
streams it is given (the context carries what a format needs besides the report); a file format renders
the report's JSON document to the whole text of its file."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from neuron_port.report import Report


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
# the document is json_report.to_document's (made printable) or a saved JSON report, so both render the same
FileReporter = Callable[[dict[str, Any]], str]


# A file name that is not valid UTF-8 reaches Python with its bad bytes as lone surrogates
# (surrogateescape); no UTF-8 document or stream can carry them.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with each undecodable byte of a file name (a lone surrogate) shown as U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def printable_document(value: Any) -> Any:
    """A JSON-ready value whose strings (keys too) are all valid Unicode (see ``printable``)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_document(k): printable_document(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable_document(v) for v in value]
    return value
