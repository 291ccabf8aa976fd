"""Typed, picklable results: what a worker returns for a file and what reporters render.

Plain dataclasses of plain values, so they cross process boundaries and serialise to the JSON report
without a conversion layer of their own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Optional

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
    # the findings folded into this one (a kept scope's), each (line, column, code) in the same file
    related: tuple[tuple[int, int, str], ...] = ()

    def to_json(self) -> dict:
        data = asdict(self)
        if data["cell"] is None:
            del data["cell"]
        if self.related:
            data["related"] = [{"path": self.path, "line": line, "column": column, "code": code}
                               for line, column, code in self.related]
        else:
            del data["related"]
        return data

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code)


@dataclass
class FileResult:
    """The outcome for one file. ``new_bytes`` is set only when the file would change; a finding's
    ``fix.applied`` says its fix is part of ``new_bytes``. Whether that reached the disk is ``written``,
    which only the writer (neuron_port/rewrite/writer.py) sets."""

    path: str  # as displayed (relative to the working directory)
    real_path: str  # absolute path to write to (symlinks resolved)
    findings: list[Finding] = field(default_factory=list)
    fixes_applied: int = 0
    new_bytes: Optional[bytes] = None
    diff: Optional[str] = None
    error: Optional[str] = None
    skipped: bool = False  # pre-filter: no rule could match
    written: bool = False
    # a changed Python file: where the rewritten text's lines stand in the file as it is (rewrite/line_map.py)
    line_map: tuple[tuple[int, int, int, bool], ...] = ()

    @property
    def changed(self) -> bool:
        return self.new_bytes is not None

    def reported_findings(self) -> list[Finding]:
        """The findings as a report shows them: a fix counts as applied once the file is written; until then
        the file keeps its old lines, so what is left (found on the rewritten text) is shown at those."""
        if self.written:
            return list(self.findings)
        return [replace(f, fix=replace(f.fix, applied=False)) if f.fix.applied else self._at_old_lines(f)
                for f in self.findings]

    def _at_old_lines(self, finding: Finding) -> Finding:
        if not self.line_map or finding.cell is not None:
            return finding
        from neuron_port.rewrite.line_map import old_line

        line, end = old_line(self.line_map, finding.line), old_line(self.line_map, finding.end_line)
        related = tuple((old_line(self.line_map, r_line), column, code) for r_line, column, code in finding.related)
        return replace(finding, line=line, end_line=max(line, end), related=related)

    def without_rewrite(self) -> "FileResult":
        """This result for a file that keeps its old content (its rewrite could not be written)."""
        return replace(self, new_bytes=None, fixes_applied=0, diff=None, written=False)


@dataclass
class FileError:
    path: str
    message: str
