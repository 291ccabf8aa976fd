"""Typed, picklable results: what a worker returns for a file and what reporters render.

Plain dataclasses of plain values, so they cross process boundaries and serialise to the JSON report
without a conversion layer of their own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # the static path does not import the runtime half
    from neuron_port.check.runtime import RuntimeSection

SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


@dataclass(frozen=True)
class Fix:
    available: bool
    applied: bool
    safety: str  # safe | unsafe | none


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    severity: str
    path: str
    line: int
    column: int  # 1-based
    end_line: int
    end_column: int
    message: str
    fix: Fix
    effort: Optional[str]
    source: str = "static"
    cell: Optional[int] = None  # notebook cell index, when the file is a notebook

    def to_json(self) -> dict:
        data = asdict(self)
        if data["cell"] is None:
            del data["cell"]
        return data

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code)


@dataclass
class FileResult:
    """The outcome for one file. ``new_bytes`` is set only when the file would change."""

    path: str  # as displayed (relative to the working directory)
    real_path: str  # absolute path to write to (symlinks resolved)
    findings: list[Finding] = field(default_factory=list)
    fixes_applied: int = 0
    new_bytes: Optional[bytes] = None
    diff: Optional[str] = None
    error: Optional[str] = None
    skipped: bool = False  # pre-filter: no rule could match

    @property
    def changed(self) -> bool:
        return self.new_bytes is not None


@dataclass
class FileError:
    path: str
    message: str


@dataclass
class Report:
    command: str
    target: str
    files: list[FileResult] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    runtime: Optional[RuntimeSection] = None  # `check` only
    runtime_findings: list[Finding] = field(default_factory=list)  # NP9xx from `check`

    @property
    def findings(self) -> list[Finding]:
        out = [f for r in self.files for f in r.findings] + list(self.runtime_findings)
        out.sort(key=Finding.sort_key)
        return out
