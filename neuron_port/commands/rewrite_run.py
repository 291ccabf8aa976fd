"""What `neuron-port rewrite` does once typer has read its arguments: check their combination, load the
settings, scan, print the patch and the report; returns the exit code. Without typer; a usage error is
printed here as the other usage errors are (``neuron-port: error: ...``, exit 2)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

from neuron_port import api
from neuron_port.commands.console import err, out, print_usage_error, say_interrupted, scan_progress
from neuron_port.commands.exit_codes import exit_code
from neuron_port.commands.option_specs import FailOn, OutputFormat, TargetChoice
from neuron_port.config import Settings, load_settings
from neuron_port.errors import UsageError
from neuron_port.reporters import RenderContext, Streams, render_report
from neuron_port.rewrite.runner import available_cores, interrupts_as_exceptions


def command_settings(start: Path, config: Optional[Path], **cli) -> Settings:
    """The settings found from ``start`` (or read from ``config``) with the command line's on top; raises
    UsageError."""
    return load_settings(start, explicit=config).merged(**cli)


def run_rewrite(paths: list[Path], **options: Any) -> int:
    """`rewrite` with cli.py's parameters (by keyword: ``_rewrite``'s, option_specs.REWRITE_PARAMETERS);
    returns the exit code, 2 with the message for a usage error."""
    try:
        return _rewrite(paths, **options)
    except UsageError as exc:
        print_usage_error(str(exc))
        return 2


def _rewrite(
    paths: list[Path], *, diff: bool = False, check: bool = False, fix: bool = False,
    stdin_filename: Optional[str] = None, unsafe_fixes: Optional[bool] = None,
    select: Optional[list[str]] = None, ignore: Optional[list[str]] = None,
    extend_select: Optional[list[str]] = None, extend_ignore: Optional[list[str]] = None,
    target: Optional[TargetChoice] = None, output_format: OutputFormat = OutputFormat.text,
    statistics: bool = False, exit_zero: bool = False, jobs: Optional[int] = None,
    exclude: Optional[list[str]] = None, fail_on: Optional[FailOn] = None, max_file_size: Optional[float] = None,
    config: Optional[Path] = None, quiet: bool = False, verbose: bool = False, instance: Optional[str] = None,
    neuron_cores: Optional[int] = None, cache: Optional[bool] = None,
) -> int:
    """cli.py's docstring of `rewrite` says what each parameter does; raises UsageError."""
    stdin = [str(p) for p in paths] == ["-"]
    if fix and (diff or check):
        raise UsageError("--fix cannot be combined with --diff or --check")
    if not stdin and ("-" in map(str, paths) or stdin_filename is not None):
        raise UsageError("`-` (stdin) must be the only path" if stdin_filename is None
                         else "--stdin-filename needs `-` as the only path")
    if statistics and output_format.value not in ("text", "json"):
        raise UsageError(f"--statistics prints text or json, not {output_format.value}")
    missing_options = [p for p in map(str, paths) if p.startswith("-") and p != "-" and not os.path.lexists(p)]
    if missing_options:  # after `--` (the hooks' entry) an option is a path: say so
        raise UsageError(f"{missing_options[0]}: no such file or directory (after `--` every word is a path: "
                         "options go before it, or in [tool.neuron-port] of pyproject.toml)")
    if jobs is not None and jobs > available_cores() and not quiet:  # said once: the runner caps it silently
        err().print(f"neuron-port: note: --jobs {jobs} is more than the {available_cores()} CPU core(s) this "
                    f"process may use; at most {available_cores()} worker processes run", markup=False,
                    highlight=False)
    start = Path(stdin_filename) if stdin and stdin_filename else Path.cwd() if stdin else paths[0]
    settings = command_settings(start, config, select=select, ignore=ignore, extend_select=extend_select,
                                extend_ignore=extend_ignore, exclude=exclude,
                                target=target.value if target else None, unsafe_fixes=unsafe_fixes,
                                fail_on=fail_on.value if fail_on else None, max_file_size=max_file_size)
    if stdin:
        from neuron_port.commands.stdin import rewrite_stdin

        return rewrite_stdin(stdin_filename, settings, fix=fix, diff=diff, check=check,
                             output_format=output_format.value, statistics=statistics, exit_zero=exit_zero,
                             verbose=verbose, quiet=quiet, instance=instance, neuron_cores=neuron_cores)
    try:  # SIGTERM stops the run like Ctrl-C (workers ended, each file old or new): exit 143
        with interrupts_as_exceptions(), \
                scan_progress(sys.stderr.isatty() and not quiet and output_format == OutputFormat.text) as progress:
            report = api.rewrite(paths, settings, write=not (diff or check), diff=diff, jobs=jobs,
                                 use_cache=cache, instance=instance, neuron_cores=neuron_cores, **progress)
    except KeyboardInterrupt as exc:  # typer would exit 130 silently: 130 for SIGINT, 143 for SIGTERM
        signum = getattr(exc, "signum", 2)
        say_interrupted(f"neuron-port: interrupted ({'SIGTERM' if signum == 15 else 'Ctrl-C'}); every file is "
                        "either unchanged or completely rewritten")
        return 128 + signum
    code = exit_code(report, settings.fail_on, pending_fails=check, exit_zero=exit_zero)
    stats = report.cache_stats
    for warning in stats.warnings if stats is not None else ():
        err().print(f"neuron-port: warning: {warning}", style="yellow", markup=False, highlight=False)
    if verbose and stats is not None:
        err().print(f"cache: {stats.hits} hit(s), {stats.misses} miss(es), {stats.stored} stored, "
                    f"{stats.discarded} discarded", markup=False, highlight=False)
    patches = "".join(r.diff for r in report.files if r.diff) if diff else ""
    machine = output_format != OutputFormat.text
    # with --diff, stdout carries only the patch (text) or only the document (other formats)
    if patches and not machine:
        sys.stdout.write(patches)
        sys.stdout.flush()
    context = RenderContext(exit_code=code, unsafe_fixes=settings.unsafe_fixes, diff=diff, verbose=verbose,
                            quiet=quiet)
    # with --diff, the text report goes to stderr (stdout carries the patch)
    streams = Streams(out=err() if diff and not machine else out(), err=err())
    render_report(report, output_format.value, context, streams, statistics)
    if patches and machine:
        sys.stderr.write(patches)
    return code
