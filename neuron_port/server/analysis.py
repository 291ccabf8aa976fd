"""One editor buffer's analysis for the language server, without the protocol: the rewrite's findings at
the buffer's own places, the errors (a buffer that does not parse, a bad configuration) as problems, and
the fixes as edits. Pure static: no pygls, no torch; tested in process.

The findings come from ``api.rewrite_source`` (what `rewrite --stdin-filename F -` runs), so the editor
shows exactly what `neuron-port rewrite --check F` reports: the fixes the rewrite applies (safe ones, and
unsafe ones where ``unsafe-fixes = true``) at their places, and what is left as the rewrite's fixed point
finds it, moved back to the buffer's lines (``FileResult.reported_findings``, rewrite/line_map.py).

Positions here are 0-based lines and columns in Unicode code points, lines counted as Python counts them
(at ``\\r\\n``, ``\\r`` and ``\\n``); the protocol layer converts columns to the client's units.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

from neuron_port.config import ConfigError, Settings, load_settings
from neuron_port.results import FileResult, Finding
from neuron_port.server.edits import Edit, hunks, overlapping

_LINE_END = re.compile(r"\r\n|\r|\n")
# where a RewriteError's message puts the place: "<path>:<line>[:<col>]: <why>"
_PLACE = re.compile(r"(\d+)(?::(\d+))?: (.*)", re.DOTALL)


@dataclass(frozen=True)
class Problem:
    """A diagnostic: a finding, or an error of the whole buffer (``finding`` None)."""

    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    severity: str  # error | warning | info
    finding: Optional[Finding] = None
    pending: Optional[str] = None  # "safe" / "unsafe": the fix `rewrite` applies to this buffer now
    related: tuple[tuple[int, int, str], ...] = ()  # folded findings: (0-based line, column, code)

    @property
    def code(self) -> Optional[str]:
        return self.finding.code if self.finding else None

    def unsafe_fix_offered(self) -> bool:
        """An unsafe fix that the configuration does not apply: offered as its own, labelled action."""
        f = self.finding
        return bool(f and f.fix.available and f.fix.safety == "unsafe" and self.pending is None)


@dataclass
class Analysis:
    text: str
    path: str  # the name the engine saw (decides the kind; shown in messages)
    settings: Settings
    problems: list[Problem] = field(default_factory=list)
    fixed_text: Optional[str] = None  # the text with every fix `rewrite` applies; None when nothing changes
    excluded: bool = False
    _unsafe_text: Optional[str] = None
    _lines: Optional[list[str]] = None
    _fix_all: Optional[list[Edit]] = None

    def lines(self) -> list[str]:
        """The buffer's lines without their line ends (at least one)."""
        if self._lines is None:
            self._lines = _LINE_END.split(self.text)
        return self._lines

    def fix_all_edits(self) -> list[Edit]:
        if self._fix_all is None:
            self._fix_all = hunks(self.text, self.fixed_text) if self.fixed_text is not None else []
        return self._fix_all

    def fix_edits(self, problem: Problem) -> list[Edit]:
        """The edits of one pending fix: the rewrite's changes on its lines, with the changes no finding
        claims (the imports a fix needs). The engine rewrites a file as a whole: applying one fix and then
        the next equals "fix all"."""
        if problem.pending is None or self.fixed_text is None:
            return []
        return self._claimed(self.fix_all_edits(), problem)

    def unsafe_edits(self, problem: Problem) -> list[Edit]:
        """The edits of an unsafe fix the configuration leaves out (computed on first request)."""
        if not problem.unsafe_fix_offered():
            return []
        if self._unsafe_text is None:
            from neuron_port import api

            self._unsafe_text, _ = api.rewrite_source(self.text, path=self.path,
                                                      settings=replace(self.settings, unsafe_fixes=True))
        return self._claimed(hunks(self.text, self._unsafe_text), problem)

    def _claimed(self, edits: list[Edit], problem: Problem) -> list[Edit]:
        mine = [e for e in edits if overlapping(e, problem.line, problem.end_line)]
        if not mine:
            return []
        others = [p for p in self.problems if p.finding is not None and p is not problem]
        orphans = [e for e in edits if e not in mine and not any(overlapping(e, p.line, p.end_line) for p in others)]
        return sorted(mine + orphans, key=lambda e: (e.line, e.column))


class Configs:
    """The settings of each buffer's project, read from its ``[tool.neuron-port]`` (config.load_settings:
    the closest pyproject.toml with the table, never above the repository root or, outside a repository,
    the workspace folder) and re-read when that file changes on disk."""

    def __init__(self) -> None:
        self._found: dict[tuple[Path, Optional[Path]], tuple[tuple, Settings]] = {}

    def settings(self, file: Path, root: Optional[Path]) -> Settings:
        key = (file.parent, root)
        stamp = _stamp(file, root)
        cached = self._found.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        settings = load_settings(file, cwd=root)
        self._found[key] = (stamp, settings)
        return settings


def _stamp(file: Path, root: Optional[Path]) -> tuple:
    """The pyproject.toml files that may configure ``file``, with their modification times."""
    from neuron_port.config import search_folders

    stamp = []
    for folder in search_folders(file, root):
        try:
            info = (folder / "pyproject.toml").stat()
            stamp.append((str(folder), info.st_mtime_ns, info.st_size))
        except OSError:
            continue
    return tuple(stamp)


def analyse(text: str, path: str, settings: Settings, root: Optional[Path] = None,
            early: Optional[Callable[[list[Problem]], None]] = None) -> Analysis:
    """The problems of ``text``, the buffer of the file ``path`` (absolute, or a name for a buffer that
    is not on disk), under ``settings``. An excluded file has none; text that does not parse has one,
    at the error. ``early``: called, when a fix applies, with the problems the rewrite's first pass finds
    in the buffer as it is, before the passes that reach its fixed point (a fix's follow-up pass costs
    about as much as the first): the server shows them at once and the fixed point's only if they differ."""
    from neuron_port.rewrite.discovery import excluded_file

    analysis = Analysis(text=text, path=path, settings=settings)
    if settings.exclude and excluded_file(path, settings.exclude, cwd=_exclude_base(settings, root)):
        analysis.excluded = True
        return analysis
    limit = settings.max_file_size * 2**20  # as `rewrite` skips a file above max-file-size (0: no limit)
    if limit and len(text) * 4 > limit and len(text.encode("utf-8", "surrogatepass")) > limit:
        size = len(text.encode("utf-8", "surrogatepass")) / 2**20
        analysis.problems.append(Problem(0, 0, 0, 0, f"{size:.1f} MB is larger than the max-file-size limit "
                                         f"({settings.max_file_size:g} MB, usually a generated file): not checked",
                                         "info"))
        return analysis
    from neuron_port import api
    from neuron_port.rewrite.errors import RewriteError

    lines = analysis._lines = _LINE_END.split(text)

    def first_pass(found: list[Finding]) -> None:
        # the first pass's findings stand at the buffer's own places: no line map
        early([_finding_problem(f, f, lines) for f in found if f.cell is None])  # type: ignore[misc]

    try:
        new_text, findings = api.rewrite_source(text, path=path, settings=settings,
                                                on_first_pass=first_pass if early is not None else None)
    except RewriteError as exc:
        analysis.problems.append(_error_problem(str(exc), path, text))
        return analysis
    result = FileResult(path=path, real_path=path, findings=findings)
    if new_text != text:
        analysis.fixed_text = new_text
        if path.endswith(".py") or "." not in Path(path).name:
            from neuron_port.rewrite.line_map import line_map

            result.line_map = line_map(text, new_text)
    for raw, shown in zip(findings, result.reported_findings()):
        if shown.cell is not None:
            continue  # a notebook's cells have their own lines: the server does not serve notebooks
        analysis.problems.append(_finding_problem(raw, shown, lines))
    return analysis


def configuration_problem(error: ConfigError) -> Problem:
    """A configuration that cannot be read: one problem at the top of the buffer, so the editor says why
    it shows no findings."""
    return Problem(0, 0, 0, 0, f"neuron-port cannot read its configuration: {error}", "error")


def _exclude_base(settings: Settings, root: Optional[Path]) -> Optional[Path]:
    # exclude patterns are matched as `neuron-port rewrite` run from the project's folder matches them
    if settings.source:
        return Path(settings.source).parent
    return root


def _finding_problem(raw: Finding, shown: Finding, lines: list[str]) -> Problem:
    line = min(max(shown.line - 1, 0), len(lines) - 1)
    end_line = min(max(shown.end_line - 1, line), len(lines) - 1)
    column = min(max(shown.column - 1, 0), len(lines[line]))
    end_column = min(max(shown.end_column - 1, 0), len(lines[end_line]))
    if end_line == line and end_column < column:
        end_column = column
    pending = raw.fix.safety if raw.fix.applied else None
    related = tuple((max(r_line - 1, 0), max(r_column - 1, 0), code) for r_line, r_column, code in shown.related)
    return Problem(line, column, end_line, end_column, shown.message, shown.severity, finding=shown,
                   pending=pending, related=related)


def _error_problem(message: str, path: str, text: str) -> Problem:
    """The RewriteError (``path:line:col: why``) as a problem at its place (line 1 when it names none)."""
    rest = message[len(path) + 1:] if message.startswith(path + ":") else message
    match = _PLACE.match(rest)
    lines = _LINE_END.split(text)
    if not match:
        return Problem(0, 0, 0, len(lines[0]), rest.strip(), "error")
    line = min(max(int(match.group(1)) - 1, 0), len(lines) - 1)
    column = min(max(int(match.group(2) or 1) - 1, 0), len(lines[line]))
    end = column + 1 if column < len(lines[line]) else column
    return Problem(line, column, line, end, match.group(3).strip(), "error")
