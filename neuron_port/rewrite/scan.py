"""The static scan of a project, shared by `rewrite` and `check`: validate the rule selection, discover the
files, look them up in the result cache and run the engine on the rest in worker processes. Nothing is
written here (see writer.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Sequence

from neuron_port.config import Settings
from neuron_port.errors import UsageError
from neuron_port.results import FileError, FileResult
from neuron_port.report import Report
from neuron_port.rewrite.discovery import discover
from neuron_port.rewrite.options import RunOptions
from neuron_port.rewrite.runner import run_files
from neuron_port.rewrite.sources import file_kind
from neuron_port.rules.instances import InstanceError, resolve_instance
from neuron_port.rules.registry import UnknownCodeError, select_codes, validate_patterns


def run_options(settings: Settings, *, want_diff: bool = False, instance: Optional[str] = None,
                neuron_cores: Optional[int] = None) -> RunOptions:
    """The engine options for these settings; raises UsageError for a selector that matches no rule or
    an unknown instance."""
    try:
        validate_patterns(settings.select + settings.ignore)
        resolve_instance(instance, neuron_cores)
    except (UnknownCodeError, InstanceError) as exc:
        raise UsageError(str(exc)) from None
    codes = select_codes(settings.select or None, settings.ignore or None, settings.target)
    return RunOptions(
        rule_codes=tuple(codes),
        target=settings.target,
        unsafe_fixes=settings.unsafe_fixes,
        want_diff=want_diff,
        max_bytes=int(settings.max_file_size * 2**20),
        instance=instance,
        neuron_cores=neuron_cores,
    )


def scan_project(
    paths: Sequence[Path],
    settings: Settings,
    *,
    command: str,
    want_diff: bool = False,
    jobs: Optional[int] = None,
    relative_to: Optional[Path] = None,
    instance: Optional[str] = None,
    neuron_cores: Optional[int] = None,
    use_cache: bool = True,
    on_result: Optional[Callable[[FileResult], None]] = None,
    on_files: Optional[Callable[[int], None]] = None,
) -> Report:
    """Findings and rewrites for every source file under ``paths``. ``relative_to`` (`check`): scan that
    folder, with every path in the report relative to it. ``on_files`` is told how many files there are
    before the scan starts, ``on_result`` is called per file (progress)."""
    options = run_options(settings, want_diff=want_diff, instance=instance, neuron_cores=neuron_cores)
    if relative_to is not None:
        folder = relative_to.resolve()
        files, problems = discover([str(folder)], exclude=settings.exclude, cwd=folder)
    else:
        files, problems = discover([str(p) for p in paths], exclude=settings.exclude)
    missing = [p for p, reason in problems if reason == "no such file or directory"]
    if missing:
        raise UsageError(f"{missing[0]}: no such file or directory")
    report = Report(command=command, target=settings.target)
    report.errors.extend(FileError(path=path, message=f"{path}: {reason}") for path, reason in problems)

    cache = None
    if use_cache:
        from neuron_port.rewrite.cache import ResultCache

        # one cache per project root of the files (display paths are relative to this folder)
        cache = ResultCache.for_run(options, base=relative_to.resolve() if relative_to is not None else None)
    if on_files is not None:
        on_files(len(files))
    try:
        results = run_files(files, options, jobs=jobs, on_result=on_result, cache=cache)
    finally:
        if cache is not None:
            cache.close()
    report.cache_stats = cache.stats if cache is not None else None
    report.errors.extend(FileError(path=r.path, message=r.error) for r in results if r.error)
    # scripts and configs that mention nothing CUDA-like are not part of the report (a tree has many)
    report.files = [r for r in results if not (r.skipped and file_kind(r.path) not in ("python", "notebook"))]
    return report
