"""Jupyter notebooks: each code cell goes through the engine on its own; only the changed cells'
``source`` values are replaced in the file's text.

The notebook is never re-serialised: its JSON text is walked to find the span of every cell's
``source`` value, and a changed cell's value is written back in the same form (a list of lines or one
string), with the same separators and indentation, reusing the original (escaped) text of every line
that did not change. Outputs, metadata, key order, indentation, ``ensure_ascii`` style and the final
newline are therefore untouched byte for byte, and a notebook without changes is not written at all.
The result is checked: it must load to the original document with only those sources replaced.

IPython syntax is masked before parsing and restored afterwards: ``%magic`` and ``!shell`` lines
(also ``x = !cmd`` / ``x = %magic``) and ``obj?`` help lines become a placeholder name on the same line,
so line numbers stay those of the cell. A cell that starts with a cell magic runs Python only for
``%%time``, ``%%timeit``, ``%%capture`` and ``%%prun`` (the magic line is masked); any other cell magic
(``%%bash``, ``%%writefile``, ``%%html``...) is left alone. Notebooks whose kernel language is not
Python are skipped.

Findings carry ``cell``: the cell's 1-based position in the notebook (markdown cells count, as a
reader scrolling the notebook counts them), and ``line``: the line within that cell.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Optional, Pattern, Sequence

from neuron_port.rewrite.engine import EngineOptions, RewriteError, SourceOutcome, transform_source
from neuron_port.rewrite.sources import SourceError
from neuron_port.rules.spec import PythonRule

PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})
_WS = " \t\n\r"
_decoder = json.JSONDecoder()
_ASSIGN_MAGIC_RE = re.compile(r"^(\s*[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*)([!%].*)$")
_HELP_RE = re.compile(r"^\s*(\?{1,2}[\w.]+|[\w.]+\?{1,2})\s*$")


# -- locating values in the JSON text --------------------------------------------------------------
def _ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _expect(text: str, i: int, char: str) -> None:
    if i >= len(text) or text[i] != char:
        raise ValueError(f"expected {char!r} at offset {i}")


def _members(text: str, i: int) -> list[tuple[str, int, int]]:
    """(key, value start, value end) of each member of the object that starts at ``text[i]``."""
    _expect(text, i, "{")
    i = _ws(text, i + 1)
    out: list[tuple[str, int, int]] = []
    if text[i] == "}":
        return out
    while True:
        key, i = _decoder.raw_decode(text, i)
        i = _ws(text, i)
        _expect(text, i, ":")
        start = _ws(text, i + 1)
        _value, end = _decoder.raw_decode(text, start)
        out.append((key, start, end))
        i = _ws(text, end)
        if text[i] == ",":
            i = _ws(text, i + 1)
            continue
        _expect(text, i, "}")
        return out


def _elements(text: str, i: int) -> list[tuple[int, int]]:
    """(start, end) of each element of the array that starts at ``text[i]``."""
    _expect(text, i, "[")
    i = _ws(text, i + 1)
    out: list[tuple[int, int]] = []
    if text[i] == "]":
        return out
    while True:
        _value, end = _decoder.raw_decode(text, i)
        out.append((i, end))
        i = _ws(text, end)
        if text[i] == ",":
            i = _ws(text, i + 1)
            continue
        _expect(text, i, "]")
        return out


def source_spans(text: str) -> list[Optional[tuple[int, int]]]:
    """Per cell, the span of its ``source`` value (None when it has none)."""
    start = _ws(text, 0)
    cells = [m for m in _members(text, start) if m[0] == "cells"]
    if len(cells) != 1:
        raise ValueError("no single 'cells' list")
    spans: list[Optional[tuple[int, int]]] = []
    for cell_start, _cell_end in _elements(text, cells[0][1]):
        sources = [(s, e) for key, s, e in _members(text, cell_start) if key == "source"]
        spans.append(sources[-1] if sources else None)  # json.loads keeps the last duplicate
    return spans


# -- masking IPython syntax ------------------------------------------------------------------------
def _split_lines(source: str) -> list[str]:
    """Lines with their "\\n", as Jupyter stores them (only "\\n" splits a line)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", source)


def _mask(source: str) -> Optional[tuple[str, dict[str, str]]]:
    """(Python text, placeholder -> original) or None when the cell is not Python."""
    lines = _split_lines(source)
    if lines and lines[0].lstrip().startswith("%%"):
        name = lines[0].lstrip()[2:].split(None, 1)[0] if lines[0].lstrip()[2:].strip() else ""
        if name not in PYTHON_CELL_MAGICS:
            return None
    prefix = "__neuron_port_ipython_"
    while prefix in source:
        prefix += "_"
    masks: dict[str, str] = {}
    out = []
    for line in lines:
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        stripped = body.lstrip()
        indent = body[: len(body) - len(stripped)]
        if stripped.startswith(("%", "!")) or _HELP_RE.match(body):
            key = f"{prefix}{len(masks)}__"
            masks[key] = stripped
            out.append(indent + key + ending)
            continue
        match = _ASSIGN_MAGIC_RE.match(body)
        if match:
            key = f"{prefix}{len(masks)}__"
            masks[key] = match.group(2)
            out.append(match.group(1) + key + ending)
            continue
        out.append(line)
    return "".join(out), masks


def _unmask(code: str, masks: dict[str, str], where: str) -> str:
    for key, original in masks.items():
        if code.count(key) != 1:
            raise RewriteError(f"{where}: a fix touched a masked IPython line; notebook left unchanged "
                               "(please report this with the notebook)")
        code = code.replace(key, original)
    return code


# -- imports of earlier cells ---------------------------------------------------------------------
def _imports_of(code: str) -> list[str]:
    """The top-level import statements of a (masked) cell, as source text (none if it does not parse)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    out = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not (
            isinstance(node, ast.ImportFrom) and node.module == "__future__"
        ):
            segment = ast.get_source_segment(code, node)
            if segment:
                out.append(segment)
    return out


def _transform_cell(code: str, prelude: str, rules, options: EngineOptions, path: str, triggers,
                    number: int) -> SourceOutcome:
    """Cells share one namespace: the imports of the cells above go in front of the cell (and are taken
    off again), so a fix that needs ``import torch`` does not add it to every cell."""
    if prelude and "__future__" not in code:
        offset = prelude.count("\n")
        outcome = transform_source(prelude + code, rules, options, path=path, triggers=triggers, cell=number,
                                   line_offset=-offset)
        if outcome.code.startswith(prelude):
            outcome.code = outcome.code[len(prelude):]
            outcome.findings = [f for f in outcome.findings if f.line >= 1]
            return outcome
    return transform_source(code, rules, options, path=path, triggers=triggers, cell=number)


# -- writing a cell's source back ------------------------------------------------------------------
def _ensure_ascii(text: str) -> bool:
    """Whether the notebook escapes non-ASCII characters (\\u00e9) rather than writing them raw."""
    if any(ord(ch) > 127 for ch in text):
        return False
    return re.search(r"\\u(?!00[0-7][0-9a-fA-F])[0-9a-fA-F]{4}", text) is not None


def _render_source(text: str, start: int, end: int, new_source: str, ascii_only: bool) -> str:
    raw = text[start:end]
    if raw.startswith('"'):
        return json.dumps(new_source, ensure_ascii=ascii_only)
    elements = _elements(text, start)
    new_lines = _split_lines(new_source)
    if not elements:
        return json.dumps(new_lines, ensure_ascii=ascii_only)
    known: dict[str, str] = {}
    for s, e in elements:
        known.setdefault(json.loads(text[s:e]), text[s:e])
    lead = text[start + 1: elements[0][0]]
    sep = text[elements[0][1]: elements[1][0]] if len(elements) > 1 else "," + lead
    tail = text[elements[-1][1]: end - 1]
    items = [known.get(line) or json.dumps(line, ensure_ascii=ascii_only) for line in new_lines]
    if not items:
        return "[]"
    return "[" + lead + sep.join(items) + tail + "]"


# -- the notebook ----------------------------------------------------------------------------------
def kernel_language(document: dict) -> str:
    """The notebook's kernel language ("python" when it does not say). Metadata is free-form JSON: a
    ``language_info`` or ``kernelspec`` that is not an object, or a name that is not a string, says nothing
    (the nbformat schema wants objects; hand-edited and tool-written notebooks do not always comply)."""
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return "python"
    for section, key in (("language_info", "name"), ("kernelspec", "language")):
        value = metadata.get(section)
        if isinstance(value, dict) and isinstance(value.get(key), str) and value[key].strip():
            return value[key].strip()
    return "python"


def transform_notebook(
    text: str,
    rules: Sequence[type[PythonRule]],
    options: EngineOptions = EngineOptions(),
    path: str = "<notebook>",
    triggers: Optional[Pattern[str]] = None,
) -> SourceOutcome:
    """Rewrite a notebook's code cells; the other bytes of ``text`` are kept. Raises SourceError for a
    file that is not a notebook and RewriteError for a cell the engine cannot handle."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise SourceError(f"{path}: not a valid notebook (JSON error: {exc})") from None
    if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
        if isinstance(document, dict) and "worksheets" in document:
            raise SourceError(f"{path}: nbformat 3 notebooks are not supported (convert with `jupyter nbconvert "
                              "--to notebook`)")
        raise SourceError(f"{path}: not a notebook (no 'cells' list)")
    if kernel_language(document).lower() != "python":
        return SourceOutcome(code=text, skipped=True)

    findings = []
    once = {rule.CODE for rule in rules if rule.ONCE_PER_FILE}  # reported for the notebook, not per cell
    fixes = 0
    changed: dict[int, str] = {}
    imports: list[str] = []
    for index, cell in enumerate(document["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str) or not source.strip():
            continue
        masked = _mask(source)
        if masked is None:
            continue
        code, masks = masked
        number = index + 1
        prelude = "".join(line + "\n" for line in imports)
        imports.extend(_imports_of(code))
        try:
            outcome = _transform_cell(code, prelude, rules, options, path, triggers, number)
        except RewriteError as exc:
            message = str(exc)
            if message.startswith(path):
                message = f"{path}[cell {number}]" + message[len(path):]
            raise RewriteError(message) from None
        seen = {f.code for f in findings}
        findings.extend(f for f in outcome.findings if f.code not in once or f.code not in seen)
        if outcome.code != code:
            new_source = _unmask(outcome.code, masks, f"{path}[cell {number}]")
            if new_source != source:
                changed[index] = new_source
                fixes += outcome.fixes_applied
    if not changed:
        return SourceOutcome(code=text, findings=findings)

    try:
        spans = source_spans(text)
    except (ValueError, IndexError) as exc:
        raise RewriteError(f"{path}: cannot locate the cell sources in the notebook's text ({exc}); "
                           "notebook left unchanged") from None
    if len(spans) != len(document["cells"]):
        raise RewriteError(f"{path}: cell count mismatch while locating sources; notebook left unchanged")
    ascii_only = _ensure_ascii(text)
    pieces = []
    last = 0
    for index in sorted(changed):
        span = spans[index]
        assert span is not None
        pieces.append(text[last:span[0]])
        pieces.append(_render_source(text, span[0], span[1], changed[index], ascii_only))
        last = span[1]
    pieces.append(text[last:])
    new_text = "".join(pieces)

    # verify: the new text loads to the original document with only those sources replaced
    expected = json.loads(text)
    for index, new_source in changed.items():
        old = expected["cells"][index]["source"]
        expected["cells"][index]["source"] = _split_lines(new_source) if isinstance(old, list) else new_source
    if json.loads(new_text) != expected:
        raise RewriteError(f"{path}: internal error, the rewritten notebook does not load to the expected "
                           "document; notebook left unchanged (please report this with the notebook)")
    return SourceOutcome(code=new_text, findings=findings, fixes_applied=fixes)
