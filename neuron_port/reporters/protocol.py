"""The reporters' protocol: ``emit(report, context, streams)`` formats a Report onto the streams it is given;
the context carries what a format needs besides the report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

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
