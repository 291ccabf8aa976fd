"""The `neuron-port` command line: options, rendering and exit codes over neuron_port.api. The one module
that declares the commands; their pieces are in neuron_port/commands/ (options, `check`'s `--`, stdin, the
reference commands, the estimate, --html, the consoles), the formats in neuron_port/reporters/.

Exit codes: 0 nothing at or above --fail-on was left (and, with --check, nothing would change);
1 findings at or above it, pending changes under --check (neither with --exit-zero), files that could
not be processed or, for `check`, a command that failed; 2 usage or configuration errors; 130 / 143
interrupted by SIGINT / SIGTERM.
"""

from __future__ import annotations

import gc
import os
import shlex
import sys
from pathlib import Path
from typing import Optional

gc.set_threshold(5_000, 1_000, 1_000)  # LibCST's trees live per file: don't re-scan them (bench/README.md, Issue 20)

import typer

from neuron_port import __version__, api
from neuron_port.check import DEFAULT_TIMEOUT_SECONDS
from neuron_port.commands import estimate, reference
from neuron_port.commands.check_args import CommandAfterDashes, command_after_dashes, parse_size_rules
from neuron_port.commands.console import err, out, program_output, run_spinner, scan_progress
from neuron_port.commands.help import PlainHelpCommand
from neuron_port.commands.html import HtmlOption, write_html
from neuron_port.commands.option_paths import PathsAfterDashes
from neuron_port.commands.options import (
    CacheOption, CheckExitZeroOption, CheckOption, CheckQuietOption, ConfigOption, DiffOption, ExcludeOption,
    ExitZeroOption, ExtendIgnoreOption, ExtendSelectOption, FailOnOption, FixOption, FolderArgument, FormatOption,
    IgnoreOption, InstanceOption, JobsOption, MaxFileSizeOption, NeuronCoresOption, NoCacheOption, NprocOption,
    OutputFormat, OutputOption, PathsArgument, PreviewOption, PreviewUnsafeFixesOption, QuietOption, SelectOption,
    ShapeOnlyOption, SizeRuleOption, StatisticsOption, WorldSizeOption, StdinFilenameOption, TargetOption,
    TimeoutOption, UnsafeFixesOption, VerboseOption, exit_code, fail_usage)
from neuron_port.commands.rewrite_argv import run_plain_rewrite
from neuron_port.config import Settings, load_settings
from neuron_port.errors import UsageError
from neuron_port.reporters import RenderContext, Streams, render_report
from neuron_port.rewrite.runner import interrupts_as_exceptions

app = typer.Typer(
    name="neuron-port",
    help=(
        "Move a PyTorch project from NVIDIA GPUs to AWS Trainium (TorchNeuron, device 'neuron').\n\n"
        "`rewrite` fixes CUDA-specific code in place (safe fixes only by default) and lists what it "
        "could not fix; `check` runs the project on a simulated neuron device and reports CPU fallbacks, "
        "recompiles, float64 demotion and unsupported features; `rules` and `explain` document every rule."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
PROG_NAME = "neuron-port"  # also names the completion scripts' variable (_NEURON_PORT_COMPLETE)


def version_callback(value: bool) -> None:
    if value:
        out().print(f"neuron-port {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                                 help="Show the version and exit."),
) -> None:
    pass


def _settings(start: Path, config: Optional[Path], **cli) -> Settings:
    try:
        return load_settings(start, explicit=config).merged(**cli)
    except UsageError as exc:
        raise fail_usage(str(exc))


@app.command(cls=PathsAfterDashes)
def rewrite(
    paths: PathsArgument,
    diff: DiffOption = False,
    check: CheckOption = False,
    fix: FixOption = False,
    stdin_filename: StdinFilenameOption = None,
    unsafe_fixes: UnsafeFixesOption = None,
    select: SelectOption = None,
    ignore: IgnoreOption = None,
    extend_select: ExtendSelectOption = None,
    extend_ignore: ExtendIgnoreOption = None,
    target: TargetOption = None,
    output_format: FormatOption = OutputFormat.text,
    statistics: StatisticsOption = False,
    exit_zero: ExitZeroOption = False,
    jobs: JobsOption = None,
    exclude: ExcludeOption = None,
    fail_on: FailOnOption = None,
    max_file_size: MaxFileSizeOption = None,
    config: ConfigOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
    instance: InstanceOption = None,
    neuron_cores: NeuronCoresOption = None,
    cache: CacheOption = None,
) -> None:
    """Rewrite CUDA-specific code for Trainium in place and report what could not be rewritten.

    Findings are printed as `path:line:col CODE message`; `[*]` marks a fix that was not applied (use
    --unsafe-fixes for unsafe ones). Suppress a finding with `# neuron-port: ignore[NP101]` on its line.
    `neuron-port rewrite --fix --stdin-filename x.py -` rewrites stdin to stdout (for editors).
    """
    stdin = [str(p) for p in paths] == ["-"]
    if fix and (diff or check):
        raise fail_usage("--fix cannot be combined with --diff or --check")
    if not stdin and ("-" in map(str, paths) or stdin_filename is not None):
        raise fail_usage("`-` (stdin) must be the only path" if stdin_filename is None
                         else "--stdin-filename needs `-` as the only path")
    if statistics and output_format.value not in ("text", "json"):
        raise fail_usage(f"--statistics prints text or json, not {output_format.value}")
    missing_options = [p for p in map(str, paths) if p.startswith("-") and p != "-" and not os.path.lexists(p)]
    if missing_options:  # after `--` (the hooks' entry) an option is a path: say so
        raise fail_usage(f"{missing_options[0]}: no such file or directory (after `--` every word is a path: "
                         "options go before it, or in [tool.neuron-port] of pyproject.toml)")
    start = Path(stdin_filename) if stdin and stdin_filename else Path.cwd() if stdin else paths[0]
    settings = _settings(start, config, select=select, ignore=ignore, extend_select=extend_select,
                         extend_ignore=extend_ignore, exclude=exclude, target=target.value if target else None,
                         unsafe_fixes=unsafe_fixes, fail_on=fail_on.value if fail_on else None,
                         max_file_size=max_file_size)
    if stdin:
        from neuron_port.commands.stdin import rewrite_stdin

        try:
            raise typer.Exit(rewrite_stdin(stdin_filename, settings, fix=fix, diff=diff, check=check,
                                           output_format=output_format.value, statistics=statistics,
                                           exit_zero=exit_zero, verbose=verbose, quiet=quiet, instance=instance,
                                           neuron_cores=neuron_cores))
        except UsageError as exc:
            raise fail_usage(str(exc))
    try:  # SIGTERM stops the run like Ctrl-C (workers ended, each file old or new): exit 143
        with interrupts_as_exceptions(), \
                scan_progress(sys.stderr.isatty() and not quiet and output_format == OutputFormat.text) as progress:
            report = api.rewrite(paths, settings, write=not (diff or check), diff=diff, jobs=jobs,
                                 use_cache=cache, instance=instance, neuron_cores=neuron_cores, **progress)
    except UsageError as exc:
        raise fail_usage(str(exc))
    except KeyboardInterrupt as exc:  # typer would exit 130 silently: 130 for SIGINT, 143 for SIGTERM
        signum = getattr(exc, "signum", 2)
        err().print(f"neuron-port: interrupted ({'SIGTERM' if signum == 15 else 'Ctrl-C'}); every file is either "
                    "unchanged or completely rewritten", markup=False, highlight=False)
        raise typer.Exit(128 + signum)
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
    raise typer.Exit(code)


@app.command(cls=CommandAfterDashes, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@estimate.with_estimate_options
def check(
    ctx: typer.Context,
    path: FolderArgument,
    nproc: NprocOption = None,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_SECONDS,
    preview: PreviewOption = False,
    shape_only: ShapeOnlyOption = False,
    world_size: WorldSizeOption = None,
    size_rule: SizeRuleOption = None,
    unsafe_fixes: PreviewUnsafeFixesOption = None,
    output_format: FormatOption = OutputFormat.text,
    output: OutputOption = None,
    fail_on: FailOnOption = None,
    statistics: StatisticsOption = False,
    exit_zero: CheckExitZeroOption = False,
    select: SelectOption = None,
    ignore: IgnoreOption = None,
    extend_select: ExtendSelectOption = None,
    extend_ignore: ExtendIgnoreOption = None,
    target: TargetOption = None,
    config: ConfigOption = None,
    quiet: CheckQuietOption = False,
    no_cache: NoCacheOption = False,
    html: HtmlOption = None,
) -> None:
    """Run the project on the simulated neuron device and report what Trainium would do.

    Usage: neuron-port check PATH [OPTIONS] -- python train.py --steps 4

    The command after `--` (or `check-command` from [tool.neuron-port]) runs from PATH with the simulator
    switched on (`python` means the interpreter neuron-port runs in); a command not after `--` is an error.
    The report lists CPU fallbacks, shapes that recompile, torch.compile recompiles, float64 demotions,
    unsupported features and distributed constraints, each at the user line that caused it, plus the
    static findings for PATH, each checked against the run: one whose premise the run showed false says
    "not seen in this run" and counts as info. Exit code 0 when the command succeeded and no finding at
    or above --fail-on (default error) is left; 1 when the command failed (even with --exit-zero) or
    such findings are left; 2 for usage errors; 130 / 143 when interrupted by SIGINT / SIGTERM (the
    command's processes are ended and the report of what ran is still written). docs/check.md.
    """
    if not path.is_dir():
        raise fail_usage(f"{path}: not a folder")
    if statistics and output_format.value not in ("text", "json"):
        raise fail_usage(f"--statistics prints text or json, not {output_format.value}")
    if output is not None:  # before the command runs, not after
        from neuron_port.atomic import check_writable

        try:
            check_writable(output)
        except OSError as exc:
            raise fail_usage(f"--output {output}: cannot write the report there: {exc.strerror or exc}")
    settings = _settings(path, config, select=select, ignore=ignore, extend_select=extend_select,
                         extend_ignore=extend_ignore, target=target.value if target else None,
                         fail_on=fail_on.value if fail_on else None, unsafe_fixes=unsafe_fixes)
    try:
        command = command_after_dashes(ctx, settings.check_command)
        size_rules = parse_size_rules(size_rule or [])
    except UsageError as exc:
        raise fail_usage(str(exc))
    # the program's output shows as it would without `check`; stdout carries only the document of a
    # machine format, so there the program's stdout goes to stderr
    machine = output_format != OutputFormat.text
    on_output = None if quiet else program_output(stdout_to_stderr=machine)
    label = (f"running {shlex.join(command)} on the simulated neuron device"
             f"{' (shape-only)' if shape_only else ''}") if command else None
    try:
        with run_spinner(label if sys.stderr.isatty() and not quiet else None) as progress:
            report = api.check(path, command, settings, nproc=nproc, timeout=timeout, preview=preview,
                               shape_only=shape_only, size_rules=size_rules, world_size=world_size,
                               use_cache=not no_cache,
                               on_output=on_output, **progress)
    except UsageError as exc:
        raise fail_usage(str(exc))
    code = write_html(html, report, exit_code(report, settings.fail_on, pending_fails=False, exit_zero=exit_zero))
    if output is not None:
        from neuron_port.atomic import atomic_write
        from neuron_port.reporters.json_report import render

        try:
            atomic_write(output, render(report).encode())
        except OSError as exc:
            err().print(f"neuron-port: cannot write {output}: {exc.strerror or exc}", style="bold red", markup=False)
            code = 2
    context = RenderContext(exit_code=code, unsafe_fixes=settings.unsafe_fixes, folder=path, quiet=quiet)
    render_report(report, output_format.value, context, Streams(out=out(), err=err()), statistics)
    interrupted = report.runtime.status.interrupted if report.runtime else None
    if interrupted:  # as a shell reports a program ended by the signal: 130 (SIGINT), 143 (SIGTERM)
        from neuron_port.check.interrupts import shell_exit_code

        err().print(f"neuron-port: interrupted by {interrupted}: the command and the processes it started were "
                    "ended; the report covers what ran before", markup=False)
        code = shell_exit_code(interrupted)
    raise typer.Exit(code)


# the reference commands: the registry as text, and what the simulator needs
app.command("rules", cls=PlainHelpCommand)(reference.list_rules)
app.command(cls=PlainHelpCommand)(reference.explain)
app.command(cls=PlainHelpCommand)(reference.doctor)
app.command("estimate", cls=PlainHelpCommand)(estimate.estimate)


def main() -> None:
    for stream in (sys.stdout, sys.stderr):  # a file name that is not UTF-8 must not end the run at a print
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    try:
        if not run_plain_rewrite(sys.argv[1:], rewrite):  # a plain `rewrite` line runs without typer's dispatch
            app(prog_name=PROG_NAME)
    except KeyboardInterrupt:
        err().print("neuron-port: interrupted; every file is either unchanged or completely rewritten")
        sys.exit(130)
    except Exception as exc:  # never show users a traceback for our own bugs, unless they ask
        if os.environ.get("NEURON_PORT_DEBUG"):
            raise
        err().print(f"neuron-port: internal error: {type(exc).__name__}: {exc} "
                     "(set NEURON_PORT_DEBUG=1 for the traceback, and please report it)",
                     style="bold red", markup=False)
        sys.exit(1)


if __name__ == "__main__":
    main()
