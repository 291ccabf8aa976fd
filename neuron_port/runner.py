"""Runs the engine over files in worker processes and collects typed FileResults.

Workers only read and compute; the main process does every write (atomically, one file at a time),
so an interrupted run leaves each file either old or new.
"""

from __future__ import annotations

import difflib
import multiprocessing
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Optional, Sequence

from neuron_port.engine import EngineOptions, RewriteError, could_match, transform_source, triggers_for
from neuron_port.files import SourceError, SourceFile, encode_source, read_source
from neuron_port.files import file_kind
from neuron_port.launch_configs import process_launch_file
from neuron_port.notebooks import transform_notebook
from neuron_port.results import FileResult
from neuron_port.rules.registry import rule_by_code

# Below this many files a process pool costs more than it saves (pre-commit runs on a handful).
PARALLEL_THRESHOLD = 8


@dataclass(frozen=True)
class RunOptions:
    rule_codes: tuple[str, ...]
    target: str = "neuron"
    unsafe_fixes: bool = False
    want_diff: bool = False
    max_bytes: int = 0  # 0 = no limit
    instance: Optional[str] = None  # --instance / --neuron-cores: GPU counts in launch scripts -> NeuronCores
    neuron_cores: Optional[int] = None


_rules_cache: dict[tuple[str, ...], tuple] = {}


def _rules_for(codes: tuple[str, ...]):
    if codes not in _rules_cache:
        # rules with FILE_KINDS (NP52x) match scripts and configs, never a Python tree
        rules = tuple(r for r in (rule_by_code(c) for c in codes) if not getattr(r, "FILE_KINDS", None))
        _rules_cache[codes] = (rules, triggers_for(rules))
    return _rules_cache[codes]


def unified_diff(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=f"a/{path.lstrip('/')}", tofile=f"b/{path.lstrip('/')}"
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def process_file(source: SourceFile, options: RunOptions) -> FileResult:
    """Everything for one file; never raises (errors become FileResult.error)."""
    result = FileResult(path=source.display, real_path=str(source.real))
    rules, triggers = _rules_for(options.rule_codes)
    try:
        kind = file_kind(source.display)
        if kind not in ("python", "notebook"):  # launch scripts and configs
            return process_launch_file(source, options, result, kind)
        if options.max_bytes:
            size = source.real.stat().st_size
            if size > options.max_bytes:
                raise SourceError(
                    f"{source.display}: {size / 2**20:.1f} MB is larger than the {options.max_bytes / 2**20:g} MB "
                    "limit (usually a generated file); skipped. Raise --max-file-size to process it"
                )
        decoded = read_source(source.real, source.display)
        if not could_match(decoded.text, triggers):
            result.skipped = True
            return result
        outcome = (transform_notebook if kind == "notebook" else transform_source)(
            decoded.text,
            rules,
            EngineOptions(target=options.target, unsafe_fixes=options.unsafe_fixes),
            path=source.display,
            triggers=triggers,
        )
        result.findings = outcome.findings
        if outcome.code != decoded.text:
            result.new_bytes = encode_source(outcome.code, decoded.encoding, source.display)
            result.fixes_applied = outcome.fixes_applied
            if options.want_diff:
                result.diff = unified_diff(decoded.text, outcome.code, source.display)
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


def _work(args: tuple[SourceFile, RunOptions]) -> FileResult:
    return process_file(*args)


def _pool_context():
    # fork is the cheapest start on Linux (the registry is already imported); elsewhere use spawn
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def run_files(
    files: Sequence[SourceFile],
    options: RunOptions,
    jobs: Optional[int] = None,
    on_result: Optional[Callable[[FileResult], None]] = None,
) -> list[FileResult]:
    jobs = jobs or os.cpu_count() or 1
    results: list[FileResult] = []
    work: Iterable[tuple[SourceFile, RunOptions]] = ((f, options) for f in files)
    if jobs <= 1 or len(files) < PARALLEL_THRESHOLD:
        iterator: Iterator[FileResult] = map(_work, work)
        for result in iterator:
            results.append(result)
            if on_result:
                on_result(result)
        return results
    _rules_for(options.rule_codes)  # import every rule module once, before forking
    chunksize = max(1, min(16, len(files) // (jobs * 8)))
    with _pool_context().Pool(processes=jobs) as pool:
        for result in pool.imap_unordered(_work, work, chunksize=chunksize):
            results.append(result)
            if on_result:
                on_result(result)
    results.sort(key=lambda r: r.path)
    return results
