"""SARIF 2.1.0 output (`--output-format sarif`) for `rewrite` and `check`.

One run, tool `neuron-port`, with a `tool.driver.rules` entry for every rule of the registry (so
`ruleIndex` is stable across runs and code-scanning UIs can show a rule's documentation), and one result
per finding that is left (fixes written to disk are not results; their count is in `run.properties`).

- Locations: `artifactLocation.uri` is the path relative to the directory the command ran in (for `check`
  the checked folder is prefixed, so the URI resolves from the repository root in CI), with
  `uriBaseId: "%SRCROOT%"`; `originalUriBaseIds` maps it to that directory. Regions are 1-based, columns
  in Unicode code points (`run.columnKind`), end column exclusive, as in the JSON report. Runtime findings
  with no user frame (NP909 about the command itself) have no location.
- Fixes: a finding whose fix is pending in this run (under `--check` / `--diff` and in `check`: safe fixes,
  and unsafe ones with `--unsafe-fixes`) gets one `fix` whose `artifactChanges` are the line hunks of the
  file's rewrite that overlap the finding's lines. Hunks that overlap no finding (imports the fixes add)
  go with the file's first fixable finding. A changed line whose line count is kept becomes a replacement
  of just the changed columns; other hunks replace whole lines (`deletedRegion` from column 1 of the
  first replaced line to column 1 of the line after the last one, `insertedContent` the new lines). The
  engine rewrites a file as a whole, so applying all of a file's fixes equals `neuron-port
  rewrite`; applying a single one may need the others (a fix that renames a device next to one that
  imports a module).
- Rules: `shortDescription` is the first sentence of the rule's documentation as plain text,
  `fullDescription` its whole documentation as written, `help` the same as plain text (`help.text`) and
  as Markdown with a header (`help.markdown`, what `neuron-port explain CODE` prints; rule_pages.py);
  `helpUri` the rule's generated page (docs/rules/CODE.md) under pyproject's `[project.urls]` "Rule
  reference" (the address the language server links too), or under `PROJECT_HOME` once that is set;
  the driver's `informationUri` only once the project has a public home (`PROJECT_HOME`: none yet);
  `defaultConfiguration.level` maps error -> error, warning -> warning, info -> note; `properties` carry
  the fix safety, effort, targets and tags.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

from neuron_port import __version__
from neuron_port.rewrite.sources import SourceError, decode_source
from neuron_port.reporters.protocol import RenderContext, Streams, printable_document
from neuron_port.results import Finding
from neuron_port.report import Report

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
# The project's public home: none yet (CONTRIBUTING.md, "Project URLs"). Until it is set, the log has no
# `informationUri` and no `helpUri` (both optional in SARIF) rather than an address that leads nowhere;
# each rule's whole page ships in the log anyway (`help`), as `neuron-port explain CODE` prints it.
PROJECT_HOME: Optional[str] = None
# One page per rule code under the home (docs/rules/CODE.md, scripts/generate_rule_docs.py).
DOCS_PATH = "/blob/main/docs/rules/{code}.md"
_DOUBLE_BACKTICKS = re.compile(r"``(.+?)``")
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
NO_LOCATION = {".", "", "<unknown>"}


def _short(docs: str, fallback: str) -> str:
    """The first paragraph of a rule's documentation as plain text: its ``code`` spans as `code`, the way
    finding messages quote code."""
    first = docs.strip().split("\n\n", 1)[0].replace("\n", " ").strip() if docs.strip() else ""
    return _DOUBLE_BACKTICKS.sub(r"`\1`", first) or fallback


def rule_descriptor(rule, home: Optional[str] = None) -> dict[str, Any]:
    """The rule's ``reportingDescriptor``; ``helpUri`` only when the project has a home (``home``, by
    default PROJECT_HOME)."""
    from neuron_port.reporters.rule_pages import markdown, plain

    home = home or PROJECT_HOME
    docs = rule.docs()
    properties: dict[str, Any] = {
        "tags": ["neuron-port", rule.FAMILY, rule.SEVERITY],
        "kind": rule.KIND,
        "fix": rule.FIX_AVAILABILITY,
        "targets": list(rule.TARGETS),
        "messageTemplate": rule.MESSAGE,
        "runtime": rule.KIND == "runtime",
    }
    if rule.FIX_AVAILABILITY != "never":
        properties["fixSafety"] = rule.FIX_SAFETY
    if rule.EFFORT:
        properties["effort"] = rule.EFFORT
    descriptor: dict[str, Any] = {
        "id": rule.CODE,
        "name": rule.NAME,
        "shortDescription": {"text": _short(docs, rule.NAME)},
        "fullDescription": {"text": docs or rule.NAME},
        "help": {"text": plain(docs or rule.NAME) + f"\n\n(neuron-port explain {rule.CODE})",
                 "markdown": markdown(rule.docs_header() + (docs or rule.NAME))},
    }
    page = home.rstrip("/") + DOCS_PATH.format(code=rule.CODE) if home else rule_reference_page(rule.CODE)
    if page:
        descriptor["helpUri"] = page
    descriptor.update({"defaultConfiguration": {"level": LEVELS[rule.SEVERITY]}, "properties": properties})
    return descriptor


def rule_reference_page(code: str) -> Optional[str]:
    """The rule's page under pyproject's ``[project.urls]`` "Rule reference" (None when neuron-port is
    not installed with its metadata)."""
    from neuron_port.reporters.rule_pages import rule_reference

    reference = rule_reference()
    return f"{reference.rstrip('/')}/{code}.md" if reference else None


def _uri(path: str) -> str:
    # the name's own bytes, percent-encoded: a name that is not UTF-8 (lat\xe9.py) stays exact
    return quote(os.fsencode(Path(path).as_posix()), safe="/")


def _root_uri(root: Path) -> str:
    uri = root.resolve().as_uri()
    return uri if uri.endswith("/") else uri + "/"


def display_path(path: str, prefix: Optional[str]) -> str:
    """The finding's path relative to the working directory (``prefix`` is the `check` folder)."""
    if not prefix or prefix == ".":
        return path
    return os.path.normpath(os.path.join(prefix, path))


def check_prefix(folder: Path, cwd: Optional[Path] = None) -> Optional[str]:
    """The `check` folder relative to the working directory; None when it lies outside of it."""
    cwd = (cwd or Path.cwd()).resolve()
    try:
        return folder.resolve().relative_to(cwd).as_posix() or "."
    except ValueError:
        return None


def locate(folder: Optional[Path]) -> tuple[Optional[str], Path]:
    """(prefix for report paths, directory URIs resolve from): the working directory and the `check`
    folder relative to it, or the folder itself when it lies outside the working directory."""
    if folder is None:
        return None, Path.cwd()
    prefix = check_prefix(folder)
    return (prefix, Path.cwd()) if prefix is not None else (None, folder)


def _hunks(old: str, new: str) -> list[tuple[int, int, dict[str, Any]]]:
    """The rewrite as replacements ``(first_old_line, end_old_line_exclusive, replacement)``, 1-based.

    A changed block of as many new lines as old ones is split into one replacement per line, trimmed to
    the changed columns (``.cuda()`` -> ``.to("neuron")``); other blocks replace whole lines."""
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for k in range(i2 - i1):
                out.append((i1 + k + 1, i1 + k + 2, _in_line(i1 + k + 1, a[i1 + k], b[j1 + k], a)))
            continue
        out.append((i1 + 1, i2 + 1, _whole_lines(i1 + 1, i2 + 1, "".join(b[j1:j2]), a)))
    return out


def _in_line(line: int, old: str, new: str, old_lines: list[str]) -> dict[str, Any]:
    old_body, new_body = old.rstrip("\r\n"), new.rstrip("\r\n")
    if old[len(old_body):] != new[len(new_body):]:  # the line ending changed: replace the whole line
        return _whole_lines(line, line + 1, new, old_lines)
    prefix = 0
    while prefix < min(len(old_body), len(new_body)) and old_body[prefix] == new_body[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < min(len(old_body), len(new_body)) - prefix
           and old_body[-1 - suffix] == new_body[-1 - suffix]):
        suffix += 1
    return {"deletedRegion": {"startLine": line, "startColumn": prefix + 1, "endLine": line,
                              "endColumn": len(old_body) - suffix + 1},
            "insertedContent": {"text": new_body[prefix:len(new_body) - suffix]}}


def _whole_lines(start: int, end: int, text: str, old_lines: list[str]) -> dict[str, Any]:
    """Lines ``start`` to ``end - 1`` (1-based) replaced by ``text``: from column 1 of the first to
    column 1 of the line after the last, or to the end of a last line that has no newline."""
    region: dict[str, Any] = {"startLine": start, "startColumn": 1, "endLine": end, "endColumn": 1}
    if end - 1 == len(old_lines) and old_lines and not old_lines[-1].endswith(("\n", "\r")):
        region = {"startLine": start, "startColumn": 1, "endLine": end - 1, "endColumn": len(old_lines[-1]) + 1}
    return {"deletedRegion": region, "insertedContent": {"text": text}}


def _file_fixes(result, location_uri: str, findings: list[Finding]) -> dict[int, dict[str, Any]]:
    """Fix objects keyed by ``id()`` of the pending findings of one changed file."""
    if not result.new_bytes or not findings or result.path.endswith(".ipynb"):
        return {}
    try:
        old_raw = Path(result.real_path).read_bytes()
        old = decode_source(old_raw, result.path)
        new = decode_source(result.new_bytes, result.path).text
    except (OSError, SourceError):
        return {}
    hunks = _hunks(old.text, new)
    claimed: set[int] = set()
    per_finding: dict[int, list[int]] = {}
    for f in findings:
        picked = [i for i, (start, end, _r) in enumerate(hunks)
                  if start <= f.end_line and max(end, start + 1) > f.line]
        per_finding[id(f)] = picked
        claimed.update(picked)
    orphans = [i for i in range(len(hunks)) if i not in claimed]
    if orphans:
        per_finding[id(findings[0])] = sorted(per_finding[id(findings[0])] + orphans)
    out = {}
    for f in findings:
        picked = per_finding[id(f)]
        if not picked:
            continue
        out[id(f)] = {
            "description": {"text": f"{f.code}: {f.message} (`neuron-port rewrite` applies every fix of the file "
                                    "together)"},
            "artifactChanges": [{
                "artifactLocation": {"uri": location_uri, "uriBaseId": "%SRCROOT%"},
                "replacements": [hunks[i][2] for i in picked],
            }],
        }
    return out


def _pending(f: Finding, unsafe_fixes: bool) -> bool:
    return f.fix.available and not f.fix.applied and (f.fix.safety == "safe"
                                                      or (f.fix.safety == "unsafe" and unsafe_fixes))


def to_document(
    report: Report,
    *,
    unsafe_fixes: bool = False,
    folder: Optional[Path] = None,
    exit_code: Optional[int] = None,
) -> dict[str, Any]:
    """The SARIF log. ``folder`` is the `check` folder, whose report paths are relative to it."""
    from neuron_port.rules.registry import all_rules

    rules = list(all_rules())
    index = {r.CODE: i for i, r in enumerate(rules)}
    prefix, root = locate(folder)

    fixes: dict[int, dict[str, Any]] = {}
    left = [f for f in report.findings if not f.fix.applied]
    if not report.wrote:
        by_path: dict[str, list[Finding]] = {}
        for f in left:
            if f.source == "static" and f.cell is None and _pending(f, unsafe_fixes):
                by_path.setdefault(f.path, []).append(f)
        for result in report.files:
            if result.changed and result.path in by_path:
                fixes.update(_file_fixes(result, _uri(display_path(result.path, prefix)), by_path[result.path]))

    results = []
    for f in left:
        item: dict[str, Any] = {
            "ruleId": f.code,
            "level": LEVELS.get(f.severity, "warning"),
            "message": {"text": f.message},
        }
        if f.code in index:
            item["ruleIndex"] = index[f.code]
        if f.path not in NO_LOCATION:
            physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(display_path(f.path, prefix)),
                                                              "uriBaseId": "%SRCROOT%"}}
            if f.cell is None:  # notebook cells have their own line numbers: only the file is located
                physical["region"] = {"startLine": f.line, "startColumn": f.column,
                                      "endLine": max(f.end_line, f.line), "endColumn": max(1, f.end_column)}
            item["locations"] = [{"physicalLocation": physical}]
            if f.related and f.cell is None:  # the findings folded into this one, each at its place
                item["relatedLocations"] = [
                    {"id": number, "message": {"text": code},
                     "physicalLocation": {"artifactLocation": physical["artifactLocation"],
                                          "region": {"startLine": line, "startColumn": column}}}
                    for number, (line, column, code) in enumerate(f.related)]
        if id(f) in fixes:
            item["fixes"] = [fixes[id(f)]]
        properties: dict[str, Any] = {"name": f.name, "severity": f.severity, "source": f.source,
                                      "fix": {"available": f.fix.available, "safety": f.fix.safety}}
        if f.effort:
            properties["effort"] = f.effort
        if f.cell is not None:
            properties.update(cell=f.cell, cellLine=f.line, cellColumn=f.column)
        item["properties"] = properties
        results.append(item)

    notifications = [{
        "level": "error",
        "message": {"text": e.message},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(display_path(e.path, prefix)),
                                                                 "uriBaseId": "%SRCROOT%"}}}],
    } for e in report.errors]
    runtime = report.runtime
    successful = not report.errors and (runtime is None or (runtime.status.exit_code == 0
                                                            and not runtime.status.timed_out))
    invocation: dict[str, Any] = {"executionSuccessful": successful,
                                  "toolExecutionNotifications": notifications}
    if exit_code is not None:
        invocation["exitCode"] = exit_code

    from neuron_port.reporters.json_report import summary

    run_properties: dict[str, Any] = {"command": report.command, "target": report.target,
                                      "summary": summary(report)}
    if runtime is not None:
        run_properties["runtime"] = {"status": runtime.status.to_json(), "ops": runtime.ops.to_json(),
                                     "neff_cache": runtime.neff_cache.to_json()}
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "neuron-port",
                "version": __version__,
                "semanticVersion": __version__,
                **({"informationUri": PROJECT_HOME} if PROJECT_HOME else {}),
                "rules": [rule_descriptor(r) for r in rules],
            }},
            "invocations": [invocation],
            "originalUriBaseIds": {"%SRCROOT%": {"uri": _root_uri(root)}},
            "columnKind": "unicodeCodePoints",
            "results": results,
            "properties": run_properties,
        }],
    }


def render(report: Report, **kwargs: Any) -> str:
    return json.dumps(printable_document(to_document(report, **kwargs)), indent=2, ensure_ascii=False) + "\n"


def emit(report: Report, context: RenderContext, streams: Streams) -> None:
    streams.out.file.write(render(report, unsafe_fixes=context.unsafe_fixes, folder=context.folder,
                                  exit_code=context.exit_code))
