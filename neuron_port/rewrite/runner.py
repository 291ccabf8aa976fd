"""Runs the engine over files in worker processes and collects typed FileResults.

Workers only read and compute; the main process does every write (atomically, one file at a time),
so an interrupted run leaves each file either old or new.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import traceback
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from neuron_port.rewrite.discovery import SourceFile
from neuron_port.rewrite.errors import RewriteError
from neuron_port.rewrite.prefilter import codes_of_kind, could_match, line_pattern, pattern_for
from neuron_port.rewrite.sources import (
    DecodedSource,
    SourceError,
    decode_source,
    encode_source,
    file_kind,
    read_source,
    unified_diff,
)
from neuron_port.rewrite.options import RunOptions
from neuron_port.results import FileResult, Finding

if TYPE_CHECKING:  # pragma: no cover
    from neuron_port.rewrite.cache import ResultCache

# Below this many files a process pool costs more than it saves (pre-commit runs on a handful).
PARALLEL_THRESHOLD = 8


# The engine, the line and notebook engines and the rule modules (and with them LibCST) are imported
# only once a file passes the pre-filter: a run over files without CUDA idioms never loads them.
_rules_cache: dict[tuple[str, ...], tuple] = {}


def _rules_for(codes: tuple[str, ...]):
    """The Python rule classes among ``codes`` (imports them)."""
    if codes not in _rules_cache:
        from neuron_port.rules.registry import rule_by_code

        _rules_cache[codes] = tuple(r for r in (rule_by_code(c) for c in codes) if r.KIND == "python")
    return _rules_cache[codes]


def _record(result: FileResult, decoded: DecodedSource, new_text: str, findings: list[Finding], fixes: int,
            options: RunOptions) -> FileResult:
    """An engine's outcome in the file's result: the findings and, when the text changed, the new bytes in
    the file's own encoding (and the diff, when asked for)."""
    result.findings = findings
    if new_text != decoded.text:
        result.new_bytes = encode_source(new_text, decoded.encoding, result.path)
        result.fixes_applied = fixes
        if options.want_diff:
            result.diff = unified_diff(decoded.text, new_text, result.path)
    return result


def process_file(source: SourceFile, options: RunOptions, raw: Optional[bytes] = None) -> FileResult:
    """Everything for one file; never raises (errors become FileResult.error). ``raw``: the file's bytes
    when the main process has already read them (for the cache key), so the worker does not read again."""
    result = FileResult(path=source.display, real_path=str(source.real))
    try:
        kind = file_kind(source.display)
        if kind not in ("python", "notebook"):  # launch scripts and configs (pyproject.toml: every project)
            if not _launch_file_could_match(source, options):
                result.skipped = True
                return result
            from neuron_port.rewrite.line_files import scan_launch_file

            scanned = scan_launch_file(source, options, kind)
            if scanned is None:
                result.skipped = True
                return result
            decoded, line_outcome = scanned
            return _record(result, decoded, line_outcome.text, line_outcome.findings, line_outcome.fixes_applied,
                           options)
        if options.max_bytes:
            size = source.real.stat().st_size
            if size > options.max_bytes:
                raise SourceError(
                    f"{source.display}: {size / 2**20:.1f} MB is larger than the {options.max_bytes / 2**20:g} MB "
                    "limit (usually a generated file); skipped. Raise --max-file-size to process it"
                )
        decoded = read_source(source.real, source.display) if raw is None else decode_source(raw, source.display)
        triggers = pattern_for(options.rule_codes)
        if kind == "python" and not could_match(decoded.text, triggers):
            result.skipped = True
            return result
        from neuron_port.rewrite.engine import EngineOptions, transform_source
        from neuron_port.rewrite.notebooks import transform_notebook

        outcome = (transform_notebook if kind == "notebook" else transform_source)(
            decoded.text,
            _rules_for(options.rule_codes),
            EngineOptions(target=options.target, unsafe_fixes=options.unsafe_fixes),
            path=source.display,
            triggers=triggers,
        )
        _record(result, decoded, outcome.code, outcome.findings, outcome.fixes_applied, options)
    except (SourceError, RewriteError) as exc:
        result.error = str(exc)
        result.findings = []
    except Exception as exc:  # a bug of ours must not stop the run or lose the file
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        result.error = (
            f"{source.display}: internal error {type(exc).__name__}: {exc} "
            f"(at {os.path.basename(frame.filename)}:{frame.lineno}); file left unchanged"
        )
        result.findings = []
        result.new_bytes = None
    return result


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


def _work(args: tuple[SourceFile, RunOptions, Optional[bytes]]) -> FileResult:
    return process_file(*args)


def _pool_context():
    # fork is the cheapest start on Linux (the registry is already imported); elsewhere use spawn
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _main_side(source: SourceFile, options: RunOptions, cache: Optional["ResultCache"]):
    """What the main process settles for a file without a worker: a cache hit or a pre-filter skip.

    Returns (result, None) when settled, else (None, (raw bytes or None, cache key or None)) for a worker.
    The cache is asked first (a lookup is one hash and one small read), so skipped files are cached too.
    Anything unusual (unreadable, too large, undecodable, launch files) goes to process_file as is, and
    so do notebooks: their cells are pre-filtered one by one there (the JSON escapes the code's text).
    """
    kind = file_kind(source.display)
    if kind not in ("python", "notebook"):  # launch scripts and configs: not cached
        return None, (None, None)
    try:
        raw = source.real.read_bytes()
    except OSError:
        return None, (None, None)
    if options.max_bytes and len(raw) > options.max_bytes:
        return None, (None, None)
    key = None
    if cache is not None:
        key = cache.key(raw)
        hit = cache.get(key, source.display, str(source.real))
        if hit is not None:
            if options.want_diff and hit.new_bytes is not None:
                try:
                    hit.diff = unified_diff(decode_source(raw, source.display).text,
                                            decode_source(hit.new_bytes, source.display).text, source.display)
                except SourceError:
                    return None, (raw, None)
            return hit, None
    try:
        text = decode_source(raw, source.display).text
    except SourceError:
        return None, (raw, key)
    # the pattern is compiled on first use: a run whose files all hit the cache never needs it
    if kind == "python" and not could_match(text, pattern_for(options.rule_codes)):  # most files stop here
        result = FileResult(path=source.display, real_path=str(source.real), skipped=True)
        if cache is not None and key is not None:
            cache.put(key, result)
        return result, None
    return None, (raw, key)


def _run(files, options, jobs, on_result, cache: Optional["ResultCache"]) -> list[FileResult]:
    """The main process reads each file once, looks it up in the cache and pre-filters it (most files stop
    here); the rest go to workers with their bytes, one file per task (each is parsed: >= ~10 ms, so the
    IPC costs nothing), and their results are stored in the cache by the main process. The pool starts
    as soon as there is enough work for it, so workers parse while the main process is still reading.
    Results come back in ``files`` order."""
    slots: list[Optional[FileResult]] = [None] * len(files)
    pending: list[tuple[int, Optional[str], tuple[SourceFile, RunOptions, Optional[bytes]]]] = []
    submitted: list = []
    pool = None

    def done(index: int, key: Optional[str], result: FileResult) -> None:
        slots[index] = result
        if key is not None and cache is not None:
            cache.put(key, result)
        if on_result:
            on_result(result)

    try:
        for index, source in enumerate(files):
            result, todo = _main_side(source, options, cache)
            if result is not None:
                slots[index] = result
                if on_result:
                    on_result(result)
                continue
            raw, key = todo
            pending.append((index, key, (source, options, raw)))
            if pool is None and jobs > 1 and len(pending) >= PARALLEL_THRESHOLD:
                _rules_for(options.rule_codes)  # import every rule module once, before forking
                pool = _pool_context().Pool(processes=jobs)
            if pool is not None:
                submitted.extend(pool.apply_async(_work_indexed, (item,)) for item in pending)
                pending.clear()
        for index, key, args in pending:  # too few for a pool (or --jobs 1)
            done(index, key, _work(args))
        for future in submitted:
            done(*future.get())
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    return [r for r in slots if r is not None]


def _work_indexed(item: tuple[int, Optional[str], tuple[SourceFile, RunOptions, Optional[bytes]]]):
    index, key, args = item
    return index, key, _work(args)


def run_files(
    files: Sequence[SourceFile],
    options: RunOptions,
    jobs: Optional[int] = None,
    on_result: Optional[Callable[[FileResult], None]] = None,
    cache: Optional["ResultCache"] = None,
) -> list[FileResult]:
    jobs = jobs or os.cpu_count() or 1
    return _run(files, options, jobs, on_result, cache)
