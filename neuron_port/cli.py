"""The `neuron-port` command line: options, rendering and exit codes over neuron_port.api. The one module
that declares the commands; their pieces are in neuron_port/commands/ (options, `check`'s `--`, stdin, the
reference commands, the estimate, --html, the consoles), the formats in neuron_port/reporters/. The console
script starts in commands/entry.py, which hands every line to ``app`` here: typer is the one parser, its
option values read without pydantic (commands/typer_coercion.py), its usage errors in one line
(commands/usage_errors.py).

Exit codes: 0 nothing at or above --fail-on was left (and, with --check, nothing would change);
1 findings at or above it, pending changes under --check (neither with --exit-zero), files that could
not be processed or, for `check`, a command that failed; 2 usage or configuration errors; 130 / 143
interrupted by SIGINT / SIGTERM.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

from neuron_port import __version__, api
from neuron_port.check import DEFAULT_TIMEOUT_SECONDS
from neuron_port.commands import estimate, reference
from neuron_port.commands.check_args import CommandAfterDashes, command_after_dashes, parse_size_rules
from neuron_port.commands.check_models import (
    model_runs_of, one_model_report, one_model_table, path_with_model, refuse_without_model, several_models_exit,
    several_models_options)
from neuron_port.commands.console import err, out, program_output, run_spinner
from neuron_port.commands.help import PlainHelpCommand
from neuron_port.commands.html import HtmlOption, write_html
from neuron_port.commands.option_paths import PathsAfterDashes
from neuron_port.commands.options import (
    CacheOption, CheckExitZeroOption, CheckOption, CheckQuietOption, ConfigOption, DiffOption, ExcludeOption,
    ExitZeroOption, ExtendIgnoreOption, ExtendSelectOption, FailOnOption, FixOption, FolderArgument, FormatOption,
    IgnoreOption, InstanceOption, JobsOption, MaxFileSizeOption, NeuronCoresOption, NoCacheOption, NprocOption,
    BatchOption, CompileModelOption, EngineOption, ModelOption, PrecisionOption, SeqOption, TaskOption,
    OutputOption, PathsArgument, PreviewOption, PreviewUnsafeFixesOption, QuietOption, SelectOption,
    ShapeOnlyOption, SizeRuleOption, StatisticsOption, WorldSizeOption, StdinFilenameOption, TargetOption,
    TimeoutOption, UnsafeFixesOption, VerboseOption, fail_usage)
from neuron_port.commands.exit_codes import exit_code
from neuron_port.commands.option_specs import OutputFormat
from neuron_port.commands.rewrite_run import command_settings, run_rewrite
from neuron_port.config import Settings
from neuron_port.errors import UsageError
from neuron_port.reporters import RenderContext, Streams, render_report
from neuron_port.server.command import server as language_server

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
        return command_settings(start, config, **cli)
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

    Findings are printed as `path:line:col: CODE message`; `[*]` marks a fix that was not applied (use
    --unsafe-fixes for unsafe ones). Suppress a finding with `# neuron-port: ignore[NP101]` on its line.
    `neuron-port rewrite --fix --stdin-filename x.py -` rewrites stdin to stdout (for editors).
    """
    raise typer.Exit(run_rewrite(
        paths, diff=diff, check=check, fix=fix, stdin_filename=stdin_filename, unsafe_fixes=unsafe_fixes,
        select=select, ignore=ignore, extend_select=extend_select, extend_ignore=extend_ignore, target=target,
        output_format=output_format, statistics=statistics, exit_zero=exit_zero, jobs=jobs, exclude=exclude,
        fail_on=fail_on, max_file_size=max_file_size, config=config, quiet=quiet, verbose=verbose,
        instance=instance, neuron_cores=neuron_cores, cache=cache))


@app.command(cls=CommandAfterDashes, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@estimate.with_estimate_options
def check(
    ctx: typer.Context,
    path: FolderArgument = None,
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
    model: ModelOption = None,
    task: TaskOption = None,
    batch: BatchOption = None,
    seq: SeqOption = None,
    precision: PrecisionOption = None,
    compile: CompileModelOption = False,
    engine: EngineOption = None,
) -> None:
    """Run the project on the simulated neuron device and report what Trainium would do.

    Usage: neuron-port check PATH [OPTIONS] -- python train.py --steps 4

    Or, without PATH and command: neuron-port check --model ID_OR_PATH --batch 8 --seq 2048 --world-size 64
    (one training step of a Hugging Face model built from its config.json, shape-only; several --model give
    one table; docs/shape-only.md).

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
    model_options = {"--task": task, "--batch": batch, "--seq": seq, "--precision": precision,
                     "--compile": compile, "--engine": engine}
    if model:  # a generated step of each model (neuron_port/commands/check_models.py)
        if path is not None:
            try:
                path_with_model(ctx, path)
            except UsageError as exc:
                raise fail_usage(str(exc))
        path, shape_only = Path("."), True
    elif path is None:
        raise fail_usage("Missing argument 'PATH' (the project folder), or --model ID_OR_PATH")
    else:
        try:
            refuse_without_model(model_options)
        except UsageError as exc:
            raise fail_usage(str(exc))
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
        command = command_after_dashes(ctx, None if model else settings.check_command)
        size_rules = parse_size_rules(size_rule or [])
    except UsageError as exc:
        raise fail_usage(str(exc))
    # the program's output shows as it would without `check`; stdout carries only the document of a
    # machine format, so there the program's stdout goes to stderr
    machine = output_format != OutputFormat.text
    on_output = None if quiet else program_output(stdout_to_stderr=machine)
    label = (f"running {shlex.join(command)} on the simulated neuron device"
             f"{' (shape-only)' if shape_only else ''}") if command else None
    runs = None
    if model:
        try:
            runs = model_runs_of(model, command=command, nproc=nproc, preview=preview, size_rules=size_rules,
                                 tasks=task or [], batch=batch, seq=seq, precision=precision, world_size=world_size,
                                 compile=compile, engine=engine)
            if len(runs) > 1:
                several_models_options(html=html, statistics=statistics)
                raise typer.Exit(several_models_exit(runs, engine, timeout, output_format.value, output, quiet,
                                                     exit_zero))
        except UsageError as exc:
            raise fail_usage(str(exc))
        label = f"one training step of {model[0]} (shape-only)"
    try:
        with run_spinner(label if sys.stderr.isatty() and not quiet else None) as progress:
            report = one_model_report(runs[0], timeout, on_output) if runs else api.check(
                path, command, settings, nproc=nproc, timeout=timeout, preview=preview,
                shape_only=shape_only, size_rules=size_rules, world_size=world_size, use_cache=not no_cache,
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
    if runs:
        one_model_table(report, runs[0], output_format.value, quiet)
    interrupted = report.runtime.status.interrupted if report.runtime else None
    if interrupted:  # as a shell reports a program ended by the signal: 130 (SIGINT), 143 (SIGTERM)
        from neuron_port.check.interrupts import shell_exit_code

        from neuron_port.commands.console import say_interrupted

        say_interrupted(f"neuron-port: interrupted by {interrupted}: the command and the processes it started "
                        "were ended; the report covers what ran before")
        code = shell_exit_code(interrupted)
    raise typer.Exit(code)


# the reference commands: the registry as text, and what the simulator needs
app.command("rules", cls=PlainHelpCommand)(reference.list_rules)
app.command(cls=PlainHelpCommand)(reference.explain)
app.command(cls=PlainHelpCommand)(reference.doctor)
app.command("estimate", cls=PlainHelpCommand)(estimate.estimate)
# the language server (the lsp extra: pygls is imported when it runs; neuron_port/server/)
app.command("server", cls=PlainHelpCommand)(language_server)
