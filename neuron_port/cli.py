"""The `neuron-port` command line: options, rendering and exit codes over neuron_port.api. The only module
that prints and decides exit codes.

Exit codes: 0 nothing at or above --fail-on was left (and, with --check, nothing would change);
1 findings at or above it, pending changes under --check, or files that could not be processed;
2 usage or configuration errors; 130 / 143 interrupted by SIGINT / SIGTERM.
"""

from __future__ import annotations

import os
import shlex
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from typing_extensions import Annotated

from neuron_port import __version__, api, cli_estimate, cli_reference
from neuron_port.cli_console import err, out, program_output, run_spinner, scan_progress
from neuron_port.check import DEFAULT_TIMEOUT_SECONDS
from neuron_port.config import Settings, load_settings
from neuron_port.errors import UsageError
from neuron_port.reporters import FORMATS, RenderContext, Streams, reporter
from neuron_port.results import SEVERITY_RANK
from neuron_port.report import Report
from neuron_port.rewrite.runner import interrupts_as_exceptions
from neuron_port.rules.instances import INSTANCE_HELP
from neuron_port.rules.vocabulary import TARGETS

app = typer.Typer(
    name="neuron-port",
    help=(
        "Move a PyTorch project from NVIDIA GPUs to AWS Trainium (TorchNeuron, device 'neuron').\n\n"
        "`rewrite` fixes CUDA-specific code in place (safe fixes only by default) and lists what it "
        "could not fix; `check` runs the project on a simulated neuron device and reports CPU fallbacks, "
        "recompiles, float64 demotion and unsupported features; `rules` and `explain` document every rule."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


# The choices of --output-format, --target and --fail-on (str enums: typer lists and validates them).
OutputFormat = Enum("OutputFormat", {name: name for name in FORMATS}, type=str)  # type: ignore[misc]
TargetChoice = Enum("TargetChoice", {name: name for name in TARGETS}, type=str)  # type: ignore[misc]
FailOn = Enum("FailOn", {name: name for name in ("error", "warning", "info", "never")}, type=str)  # type: ignore[misc]


# -- options rewrite and check share --------------------------------------------------------------------
SelectOption = Annotated[Optional[List[str]], typer.Option(
    "--select", help="Only these rule codes, prefixes or names (NP1, NP201, ALL); comma-separated or repeated.")]
IgnoreOption = Annotated[Optional[List[str]], typer.Option(
    "--ignore", help="Skip these rule codes, prefixes or names; comma-separated or repeated.")]
TargetOption = Annotated[Optional[TargetChoice], typer.Option(
    "--target", help="neuron: rewrite to the 'neuron' device and torch.neuron (default). accelerator: rewrite to "
                     "torch.accelerator, so the result runs on CUDA and Trainium alike.")]
FormatOption = Annotated[OutputFormat, typer.Option(
    "--output-format", help="text, json, sarif (SARIF 2.1.0) or github (Actions annotations); on stdout.")]
FailOnOption = Annotated[Optional[FailOn], typer.Option(
    "--fail-on", help="Lowest severity that makes the exit code 1 (error, warning, info, never). Default: error.")]
ConfigOption = Annotated[Optional[Path], typer.Option(
    "--config", help="pyproject.toml to read [tool.neuron-port] from (default: the closest one above the path "
                     "with that table, up to the repository root or, outside one, the working directory).")]
NoCacheOption = Annotated[bool, typer.Option(
    "--no-cache", help="Do not read or write the result cache of the static scan (.neuron-port-cache/ in the "
                       "project root); every file is processed.")]
CacheOption = Annotated[Optional[bool], typer.Option(
    "--cache/--no-cache", help="Use the result cache (.neuron-port-cache/ in each project root: the folder with "
                               "pyproject.toml or .git). Default: on when writing files, off under --check "
                               "and --diff (they write nothing); --cache turns it on there too.")]


def _fail_usage(message: str) -> "typer.Exit":
    err().print(f"neuron-port: error: {message}", style="bold red", markup=False)
    return typer.Exit(2)


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
        raise _fail_usage(str(exc))


def exit_code(report: Report, fail_on: str, pending_fails: bool) -> int:
    if report.errors or (report.runtime is not None and not report.runtime.status.succeeded):
        return 1
    if pending_fails and any(r.changed for r in report.files):
        return 1
    if fail_on == "never":
        return 0
    threshold = SEVERITY_RANK[fail_on]
    for f in report.findings:
        if not f.fix.applied and SEVERITY_RANK[f.severity] >= threshold:
            # under --check, a finding whose safe fix is merely pending still counts
            return 1
    return 0


@app.command()
def rewrite(
    paths: List[Path] = typer.Argument(..., help="Files or folders to rewrite (.py files; .gitignore is honoured)."),
    diff: bool = typer.Option(False, "--diff", help="Print a unified diff of the fixes to stdout; write nothing."),
    check: bool = typer.Option(False, "--check",
                               help="Write nothing; exit 1 if a file would change or a finding at or above "
                                    "--fail-on remains."),
    unsafe_fixes: Optional[bool] = typer.Option(None, "--unsafe-fixes/--no-unsafe-fixes",
                                             help="Also apply fixes marked unsafe (they may change behaviour "
                                                  "on CUDA, or need review)."),
    select: SelectOption = None,
    ignore: IgnoreOption = None,
    target: TargetOption = None,
    output_format: FormatOption = OutputFormat.text,
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Worker processes (default: all cores)."),
    exclude: Optional[List[str]] = typer.Option(None, "--exclude", help="Glob of paths to skip (repeatable)."),
    fail_on: FailOnOption = None,
    max_file_size: Optional[float] = typer.Option(None, "--max-file-size", min=0,
                                                  help="Skip (and report) files larger than this many MB "
                                                       "(at most 10000); 0 = no limit. Default: 2."),
    config: ConfigOption = None,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only findings and errors."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also list fixed findings and skipped paths."),
    instance: Optional[str] = typer.Option(None, "--instance", help=INSTANCE_HELP),
    neuron_cores: Optional[int] = typer.Option(None, "--neuron-cores", min=1,
                                               help="Logical NeuronCores per node, instead of --instance."),
    cache: CacheOption = None,
) -> None:
    """Rewrite CUDA-specific code for Trainium in place and report what could not be rewritten.

    Findings are printed as `path:line:col CODE message`; `[*]` marks a fix that was not applied (use
    --unsafe-fixes for unsafe ones). Suppress a finding with `# neuron-port: ignore[NP101]` on its line.
    """
    settings = _settings(paths[0] if paths else Path.cwd(), config, select=select,
                         ignore=ignore, exclude=exclude, target=target.value if target else None,
                         unsafe_fixes=unsafe_fixes, fail_on=fail_on.value if fail_on else None,
                         max_file_size=max_file_size)
    try:  # SIGTERM stops the run like Ctrl-C (workers ended, each file old or new): exit 143
        with interrupts_as_exceptions(), \
                scan_progress(sys.stderr.isatty() and not quiet and output_format == OutputFormat.text) as progress:
            report = api.rewrite(paths, settings, write=not (diff or check), diff=diff, jobs=jobs,
                                 use_cache=cache, instance=instance, neuron_cores=neuron_cores, **progress)
    except UsageError as exc:
        raise _fail_usage(str(exc))
    except KeyboardInterrupt as exc:  # typer would exit 130 silently: 130 for SIGINT, 143 for SIGTERM
        signum = getattr(exc, "signum", 2)
        err().print(f"neuron-port: interrupted ({'SIGTERM' if signum == 15 else 'Ctrl-C'}); every file is either "
                    "unchanged or completely rewritten", markup=False, highlight=False)
        raise typer.Exit(128 + signum)
    code = exit_code(report, settings.fail_on, pending_fails=check)
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
    reporter(output_format.value)(report, context, Streams(out=err() if diff and not machine else out(),
                                                           err=err()))
    if patches and machine:
        sys.stderr.write(patches)
    raise typer.Exit(code)


@cli_estimate.check_command(app, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def check(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="The project folder; the command runs from here."),
    nproc: Optional[int] = typer.Option(None, "--nproc", min=1,
                                        help="Run the command under torchrun with N processes (one per NeuronCore)."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT_SECONDS, "--timeout", min=1,
                                  help="Seconds before the command is stopped (SIGTERM, then SIGKILL). "
                                       f"Default: {DEFAULT_TIMEOUT_SECONDS} (30 minutes)."),
    preview: bool = typer.Option(False, "--preview",
                                 help="Run on a temporary rewritten copy (safe fixes applied); the project is "
                                      "not changed. Without it the tree runs as it is."),
    unsafe_fixes: Optional[bool] = typer.Option(None, "--unsafe-fixes/--no-unsafe-fixes",
                                             help="With --preview: also apply unsafe fixes in the copy."),
    output_format: FormatOption = OutputFormat.text,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the JSON report to this file."),
    fail_on: FailOnOption = None,
    select: SelectOption = None,
    ignore: IgnoreOption = None,
    target: TargetOption = None,
    config: ConfigOption = None,
    quiet: bool = typer.Option(False, "--quiet", "-q",
                               help="Hide the program's output and the tables: only the findings and one summary line."),
    no_cache: NoCacheOption = False,
) -> None:
    """Run the project on the simulated neuron device and report what Trainium would do.

    Usage: neuron-port check PATH [OPTIONS] -- python train.py --steps 4

    The command after `--` (or `check-command` from [tool.neuron-port]) runs from PATH with the simulator
    switched on (`python` means the interpreter neuron-port runs in). The report lists CPU fallbacks,
    shapes that recompile, torch.compile recompiles, float64 demotions, unsupported features and
    distributed constraints, each at the user line that caused it, plus the static findings for PATH.
    Exit code 0 when the command succeeded and nothing at or above --fail-on was found; 1 otherwise;
    2 for usage errors; 130 / 143 when interrupted by SIGINT / SIGTERM (the command's processes are
    ended and the report of what ran is still written).
    """
    if not path.is_dir():
        raise _fail_usage(f"{path}: not a folder")
    if output is not None:  # before the command runs, not after
        from neuron_port.atomic import check_writable

        try:
            check_writable(output)
        except OSError as exc:
            raise _fail_usage(f"--output {output}: cannot write the report there: {exc.strerror or exc}")
    settings = _settings(path, config, select=select, ignore=ignore,
                         target=target.value if target else None, fail_on=fail_on.value if fail_on else None,
                         unsafe_fixes=unsafe_fixes)
    command = list(ctx.args) or (shlex.split(settings.check_command) if settings.check_command else [])
    # the program's output shows as it would without `check`; stdout carries only the document of a
    # machine format, so there the program's stdout goes to stderr
    machine = output_format != OutputFormat.text
    on_output = None if quiet else program_output(stdout_to_stderr=machine)
    label = f"running {shlex.join(command)} on the simulated neuron device" if command else None
    try:
        with run_spinner(label if sys.stderr.isatty() and not quiet else None) as progress:
            report = api.check(path, command, settings, nproc=nproc, timeout=timeout, preview=preview,
                               use_cache=not no_cache, on_output=on_output, **progress)
    except UsageError as exc:
        raise _fail_usage(str(exc))
    code = exit_code(report, settings.fail_on, pending_fails=False)
    if output is not None:
        from neuron_port.atomic import atomic_write
        from neuron_port.reporters.json_report import render

        try:
            atomic_write(output, render(report).encode())
        except OSError as exc:
            err().print(f"neuron-port: cannot write {output}: {exc.strerror or exc}", style="bold red", markup=False)
            code = 2
    context = RenderContext(exit_code=code, unsafe_fixes=settings.unsafe_fixes, folder=path, quiet=quiet)
    reporter(output_format.value)(report, context, Streams(out=out(), err=err()))
    interrupted = report.runtime.status.interrupted if report.runtime else None
    if interrupted:  # as a shell reports a program ended by the signal: 130 (SIGINT), 143 (SIGTERM)
        from neuron_port.check.interrupts import shell_exit_code

        err().print(f"neuron-port: interrupted by {interrupted}: the command and the processes it started were "
                    "ended; the report covers what ran before", markup=False)
        code = shell_exit_code(interrupted)
    raise typer.Exit(code)


# the reference commands: the registry as text, and what the simulator needs
app.command("rules")(cli_reference.list_rules)
app.command()(cli_reference.explain)
app.command()(cli_reference.doctor)


def main() -> None:
    for stream in (sys.stdout, sys.stderr):  # a file name that is not UTF-8 must not end the run at a print
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    try:
        app()
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
