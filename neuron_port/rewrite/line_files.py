"""The line engine: launch scripts (``*.sh``, Makefiles) and YAML / JSON / TOML configs.

These files are not parsed. Each line (for scripts, with its backslash continuations and without its
comment) goes to the enabled line rules of the registry (``LineRule.scan``, NP520-NP525 in
``rules/distributed/``); a fix replaces the characters a hit names (or deletes the line) and leaves
every other byte alone, so comments, quoting, indentation and newlines are kept. As for Python, a
second pass over the result must find nothing more to change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Sequence

from neuron_port.results import Finding, Fix
from neuron_port.rewrite.errors import RewriteError
from neuron_port.rewrite.options import RunOptions
from neuron_port.rewrite.prefilter import could_match, line_pattern
from neuron_port.rewrite.sources import DecodedSource, SourceError, read_source
from neuron_port.rewrite.suppression import NOT_SUPPRESSED, covers, line_suppression
from neuron_port.rules.distributed.launch_patterns import JSON, LAUNCHER_RE, MAKE, SCRIPT_KINDS
from neuron_port.rules.instances import describe_cores
from neuron_port.rules.registry import rule_by_code, rules_of_kind
from neuron_port.rules.spec import LineHit, LineOptions, LineRule, ScriptLine

if TYPE_CHECKING:  # pragma: no cover
    from neuron_port.rewrite.discovery import SourceFile


@dataclass
class ScanOutcome:
    text: str
    findings: list[Finding] = field(default_factory=list)
    fixes_applied: int = 0


@dataclass
class _Hit:
    rule: type[LineRule]
    line: int  # 1-based
    hit: LineHit


def line_rules(codes: Optional[Sequence[str]] = None, file_kind: Optional[str] = None) -> list[type[LineRule]]:
    """The line rules among ``codes`` (all of them when None) that read files of ``file_kind``."""
    rules = rules_of_kind("line") if codes is None else [r for r in map(rule_by_code, codes) if r.KIND == "line"]
    return [r for r in rules if file_kind is None or file_kind in r.FILE_KINDS]  # type: ignore[attr-defined]


def could_match_line_rules(text: str) -> bool:
    """The line engine's pre-filter (prefilter.line_pattern)."""
    return could_match(text, line_pattern())


def strip_comment(line: str, kind: str) -> str:
    """The line up to its comment (``#`` at the start or after whitespace, outside quotes)."""
    if kind == JSON:
        return line
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"':
                continue
            continue
        if ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace() or kind == MAKE):
            return line[:i]
    return line


def _logical_lines(lines: list[str], kind: str) -> list[str]:
    """For each line of a script, the whole logical line it belongs to (a line ending in a backslash
    continues on the next one), comments stripped."""
    logical: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j + 1 < len(lines) and lines[j].rstrip("\r\n").endswith("\\"):
            j += 1
        joined = "".join(strip_comment(line, kind) for line in lines[i:j + 1])
        logical.extend([joined] * (j - i + 1))
        i = j + 1
    return logical


def scan_lines(text: str, kind: str, rules: Sequence[type[LineRule]], options: LineOptions) -> list[_Hit]:
    lines = text.splitlines(keepends=True)
    scripts = kind in SCRIPT_KINDS
    launches = scripts and any(LAUNCHER_RE.search(strip_comment(line, kind)) for line in lines)
    logical = _logical_lines(lines, kind) if scripts else []
    instances = [rule() for rule in rules if kind in rule.FILE_KINDS]
    hits: list[_Hit] = []
    for number, line in enumerate(lines, start=1):
        body = line.rstrip("\r\n")
        code = strip_comment(body, kind)
        if not code.strip():
            continue
        view = ScriptLine(number=number, code=code, logical=logical[number - 1] if scripts else code,
                          in_launcher_script=launches)
        suppressed = line_suppression(body)
        for rule in instances:
            if suppressed is not NOT_SUPPRESSED and covers(suppressed, rule.CODE):
                continue
            hits.extend(_Hit(type(rule), number, hit) for hit in rule.scan(view, kind, options))
    return hits


def _allowed(hit: LineHit, options: LineOptions) -> bool:
    if not hit.fixable or options.target != "neuron":
        return False
    return hit.safety == "safe" or (hit.safety == "unsafe" and options.unsafe_fixes)


def _apply(text: str, hits: Sequence[_Hit], options: LineOptions) -> tuple[str, set[int]]:
    lines = text.splitlines(keepends=True)
    applied: set[int] = set()
    by_line: dict[int, list[tuple[int, LineHit]]] = {}
    for index, found in enumerate(hits):
        if _allowed(found.hit, options):
            by_line.setdefault(found.line, []).append((index, found.hit))
    for number, entries in by_line.items():
        line = lines[number - 1]
        if any(h.delete_line for _, h in entries):
            index = next(i for i, h in entries if h.delete_line)
            lines[number - 1] = ""
            applied.add(index)
            continue
        taken: list[tuple[int, int]] = []
        for index, hit in sorted(entries, key=lambda e: e[1].start, reverse=True):
            if any(not (hit.end <= a or hit.start >= b) for a, b in taken):
                continue  # overlapping fixes: the other one wins this pass
            line = line[:hit.start] + (hit.replacement or "") + line[hit.end:]
            taken.append((hit.start, hit.end))
            applied.add(index)
        lines[number - 1] = line
    return "".join(lines), applied


def _finding(found: _Hit, path: str, applied: bool, cell: Optional[int], line_offset: int) -> Finding:
    rule, hit = found.rule, found.hit
    return Finding(
        code=rule.CODE, name=rule.NAME, severity=rule.SEVERITY, path=path,
        line=found.line + line_offset, column=hit.start + 1, end_line=found.line + line_offset,
        end_column=max(hit.end, hit.start + 1) + 1, message=hit.message,
        fix=Fix(available=hit.fixable, applied=applied, safety=(hit.safety or "none") if hit.fixable else "none"),
        effort=None if hit.fixable else rule.EFFORT, cell=cell,
    )


def transform_text(text: str, kind: str, options: LineOptions, rules: Optional[Sequence[type[LineRule]]] = None,
                   path: str = "<string>", cell: Optional[int] = None, line_offset: int = 0) -> ScanOutcome:
    """Findings for one script or config, and the text with the allowed fixes applied. ``rules``: the
    line rules to run (default: all of them)."""
    rules = line_rules(file_kind=kind) if rules is None else [r for r in rules if kind in r.FILE_KINDS]
    if not rules or not could_match_line_rules(text):
        return ScanOutcome(text=text)
    hits = scan_lines(text, kind, rules, options)
    if not hits:
        return ScanOutcome(text=text)
    new_text, applied = _apply(text, hits, options)
    findings = [_finding(h, path, i in applied, cell, line_offset) for i, h in enumerate(hits)]
    if new_text != text:
        # a second pass must find nothing more to change (the engine's idempotency guarantee)
        again = [h for h in scan_lines(new_text, kind, rules, options) if _allowed(h.hit, options)]
        if again:
            raise RewriteError(f"{path}:{again[0].line}: the rewrite did not settle; file left unchanged "
                               "(please report this with the file)")
    return ScanOutcome(text=new_text, findings=findings, fixes_applied=len(applied) if new_text != text else 0)


def scan_launch_file(source: "SourceFile", options: RunOptions,
                     kind: str) -> Optional[tuple[DecodedSource, ScanOutcome]]:
    """(the file as read, the outcome) for a script or config, None when it is skipped: no line rule is
    selected, or it is not text, does not decode, exceeds --max-file-size (a data file named ``*.json`` is
    not the user's code, so those are skipped quietly) or mentions nothing a line rule looks for."""
    selected = line_rules(options.rule_codes)
    if not selected:
        return None
    try:
        if options.max_bytes and source.real.stat().st_size > options.max_bytes:
            return None
        decoded = read_source(source.real, source.display)
    except SourceError:
        return None
    if not could_match_line_rules(decoded.text):
        return None
    scan = LineOptions(target=options.target, unsafe_fixes=options.unsafe_fixes,
                       cores=describe_cores(options.instance, options.neuron_cores))
    return decoded, transform_text(decoded.text, kind, scan, selected, path=source.display)
