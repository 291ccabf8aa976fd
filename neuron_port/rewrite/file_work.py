"""One file's pass, as a worker runs it: read, decode, pre-filter, run the engine that fits the file's
kind (Python, notebook, launch script or config) and record the outcome as a typed FileResult.

It never raises: a file that cannot be read, decoded or parsed, and any bug of ours, becomes the file's
error and the file is left unchanged. The engines and the rule modules (LibCST with them) are imported
only once a file passes the pre-filter. neuron_port/rewrite/runner.py runs it in worker processes.
"""

from __future__ import annotations

import hashlib
import os
import sys
import traceback
from typing import Optional

from neuron_port.results import FileResult, Finding
from neuron_port.rewrite.discovery import SourceFile
from neuron_port.rewrite.errors import RewriteError
from neuron_port.rewrite.options import RunOptions
from neuron_port.rewrite.prefilter import codes_of_kind, could_match, line_pattern, pattern_for
from neuron_port.rewrite.sources import (
    DecodedSource,
    SourceError,
    decode_source,
    encode_source,
    file_kind,
    keep_final_cr,
    read_source,
)
from neuron_port.rewrite.writer import unified_diff

# The engine, the line and notebook engines and the rule modules (and with them LibCST) are imported
# only once a file passes the pre-filter: a run over files without CUDA idioms never loads them.
_rules_cache: dict[tuple[tuple[str, ...], bool], tuple] = {}


def _rules_for(codes: tuple[str, ...], refs: bool = False):
    """The Python rule classes among ``codes`` (imports them); with ``refs``, as registry.RuleRef where the
    index has them (the engine imports a rule's module only when its triggers occur in the text)."""
    if (codes, refs) not in _rules_cache:
        from neuron_port.rules.registry import rule_by_code, rule_refs

        found = rule_refs(codes) if refs else None
        if found is not None:
            found = tuple(ref for ref in found if ref.KIND == "python")
        else:
            found = tuple(r for r in (rule_by_code(c) for c in codes) if r.KIND == "python")
        _rules_cache[codes, refs] = found
    return _rules_cache[codes, refs]


def _record(result: FileResult, decoded: DecodedSource, new_text: str, findings: list[Finding], fixes: int,
            options: RunOptions) -> FileResult:
    """An engine's outcome in the file's result: the findings and, when the text changed, the new bytes in
    the file's own encoding (and the diff, when asked for)."""
    result.findings = findings
    new_text = keep_final_cr(decoded.text, new_text)
    if new_text != decoded.text:
        decoded.require_round_trip(result.path)
        result.new_bytes = encode_source(new_text, decoded.encoding, result.path)
        result.fixes_applied = fixes
        if options.want_diff:
            result.diff = unified_diff(decoded.text, new_text, result.path)
    return result


def digest(data: bytes) -> bytes:
    """The sha256 of a file's bytes (the writer compares it before replacing the file)."""
    return hashlib.sha256(data).digest()


def process_file(source: SourceFile, options: RunOptions, raw: Optional[bytes],
                 passed: bool = False) -> tuple[FileResult, Optional[bytes]]:
    """Everything for one file, and for a changed file the digest of the bytes its rewrite was computed
    from (the writer compares it with the file's bytes just before replacing it). Never raises: errors
    become FileResult.error. ``raw``: the file's bytes when the main process has already read them (for
    the cache key), so the worker does not read them again; ``passed``: its text has passed the pre-filter there
    (it is not searched again)."""
    result = FileResult(path=source.display, real_path=str(source.real))
    try:
        kind = file_kind(source.display)
        if kind == "cuda":  # a .cu / .cuh file: reported once, never parsed
            from neuron_port.rewrite.cuda_files import cuda_file_findings

            result.findings = cuda_file_findings(source, options)
            result.skipped = not result.findings
            return result, None
        if kind not in ("python", "notebook"):  # launch scripts and configs (pyproject.toml: every project)
            if not _launch_file_could_match(source, options):
                result.skipped = True
                return result, None
            from neuron_port.rewrite.dataclass_code import compiled_once

            with compiled_once():  # its rules import LibCST: the dataclass methods from their cache
                from neuron_port.rewrite.line_files import scan_launch_file
            scanned = scan_launch_file(source, options, kind)
            if scanned is None:
                result.skipped = True
                return result, None
            decoded, line_outcome = scanned
            _record(result, decoded, line_outcome.text, line_outcome.findings, line_outcome.fixes_applied, options)
            return result, _read_digest(result, decoded, None)
        if options.max_bytes:
            size = source.real.stat().st_size
            if size > options.max_bytes:
                raise SourceError(
                    f"{source.display}: {size / 2**20:.1f} MB is larger than the {options.max_bytes / 2**20:g} MB "
                    "limit (usually a generated file); skipped. Raise --max-file-size to process it"
                )
        decoded = read_source(source.real, source.display) if raw is None else decode_source(raw, source.display)
        triggers = pattern_for(options.rule_codes)
        if kind == "python" and not passed and not could_match(decoded.text, triggers):
            result.skipped = True
            return result, None
        load_engines()
        from neuron_port.rewrite.engine import EngineOptions, transform_source
        from neuron_port.rewrite.notebooks import transform_notebook

        outcome = (transform_notebook if kind == "notebook" else transform_source)(
            decoded.text,
            _rules_for(options.rule_codes, refs=kind == "python"),
            EngineOptions(target=options.target, unsafe_fixes=options.unsafe_fixes),
            path=source.display,
            triggers=triggers,
            **({"matched": True} if kind == "python" else {}),
        )
        _record(result, decoded, outcome.code, outcome.findings, outcome.fixes_applied, options)
        if kind == "python" and result.changed:  # what is left stands at the rewritten text's lines
            from neuron_port.rewrite.line_map import line_map

            result.line_map = line_map(decoded.text, outcome.code)
        return result, _read_digest(result, decoded, raw)
    except (SourceError, RewriteError) as exc:
        result.error = str(exc)
        result.findings = []
        result.new_bytes = None
    except RecursionError:  # LibCST's visitors and code generation recurse in Python, per nesting level
        result.error = f"{source.display}: nested too deeply to process; file left unchanged"
        result.findings = []
        result.new_bytes = None
    except Exception as exc:  # a bug of ours must not stop the run or lose the file
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        result.error = (
            f"{source.display}: internal error {type(exc).__name__}: {exc} "
            f"(at {os.path.basename(frame.filename)}:{frame.lineno}); file left unchanged"
        )
        result.findings = []
        result.new_bytes = None
    return result, None


def _read_digest(result: FileResult, decoded: DecodedSource, raw: Optional[bytes]) -> Optional[bytes]:
    """The digest of the bytes the rewrite was computed from: ``raw``, or the decoded text encoded again
    (the same bytes: _record refuses files whose encoding does not round-trip)."""
    if result.new_bytes is None:
        return None
    return digest(raw if raw is not None else decoded.text.encode(decoded.encoding))


def load_engines() -> None:
    """Import the Python and notebook engines (LibCST with them) in this process. The first import runs
    inside dataclass_code.compiled_once: LibCST's dataclass methods compiled once per install."""
    if "neuron_port.rewrite.notebooks" in sys.modules:  # imported last below
        return
    from neuron_port.rewrite.dataclass_code import compiled_once

    with compiled_once():
        import neuron_port.rewrite.engine  # noqa: F401
        import neuron_port.rewrite.notebooks  # noqa: F401


def import_engines(codes: tuple[str, ...]) -> None:
    """Import the engines and the selected rules (LibCST with them) in this process."""
    load_engines()
    import neuron_port.rewrite.line_files  # noqa: F401

    _rules_for(codes)


def _launch_file_could_match(source: SourceFile, options: RunOptions) -> bool:
    """False when no line rule is selected or the file's text matches no line rule's trigger; True also
    when it cannot be read (scan_launch_file decides what to do with it)."""
    if not codes_of_kind(options.rule_codes, "line"):
        return False
    try:
        if options.max_bytes and source.real.stat().st_size > options.max_bytes:
            return True
        text = read_source(source.real, source.display).text
    except (OSError, SourceError):
        return True
    return could_match(text, line_pattern())
