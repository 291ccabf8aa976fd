"""The `neuron-port` command line: options, rendering and exit codes over neuron_port.api. The only module
that prints and decides exit codes.

Exit codes: 0 nothing at or above --fail-on was left (and, with --check, nothing would change);
1 findings at or above it, pending changes under --check, or files that could not be processed;
2 usage or configuration errors.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from neuron_port import __version__, api
from neuron_port.check.runner import DEFAULT_TIMEOUT_SECONDS
from neuron_port.config import Settings, load_settings
from neuron_port.errors import UsageError
from neuron_port.reporters import RenderContext, Streams, reporter
from neuron_port.results import SEVERITY_RANK, Report
from neuron_port.rules.registry import UnknownCodeError, all_rules, rule_by_code

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


class OutputFormat(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"


class TargetChoice(str, Enum):
    neuron = "neuron"
    accelerator = "accelerator"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


def _out() -> Console:
    return Console(soft_wrap=True, highlight=False)


def _err() -> Console:
    return Console(stderr=True, soft_wrap=True, highlight=False)


def _fail_usage(message: str) -> "typer.Exit":
    _err().print(f"neuron-port: error: {message}", style="bold red", markup=False)
    return typer.Exit(2)


def _split_codes(values: Optional[List[str]]) -> Optional[tuple[str, ...]]:
    if values is None:
        return None
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def version_callback(value: bool) -> None:
    if value:
        _out().print(f"neuron-port {__version__}")
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
    if report.errors:
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


def _emit(report: Report, output_format: OutputFormat, context: RenderContext, text_out: Console) -> None:
    reporter(output_format.value)(report, context, Streams(out=text_out if output_format == OutputFormat.text
                                                           else _out(), err=_err()))


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
    select: Optional[List[str]] = typer.Option(None, "--select", help="Only these codes or prefixes (NP1, NP201, ALL); comma-separated or repeated."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Skip these codes or prefixes."),
    target: Optional[TargetChoice] = typer.Option(None, "--target",
                                                  help="neuron: rewrite to the 'neuron' device and torch.neuron "
                                                       "(default). accelerator: rewrite to torch.accelerator, so "
                                                       "the result runs on CUDA and Trainium alike."),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--output-format",
                                               help="text, json, sarif (SARIF 2.1.0) or github (Actions "
                                                    "annotations); on stdout."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Worker processes (default: all cores)."),
    exclude: Optional[List[str]] = typer.Option(None, "--exclude", help="Glob of paths to skip (repeatable)."),
    fail_on: Optional[FailOn] = typer.Option(None, "--fail-on", help="Lowest severity that makes the exit code 1 "
                                                                     "(error, warning, info, never). Default: error."),
    max_file_size: Optional[float] = typer.Option(None, "--max-file-size", min=0,
                                                  help="Skip (and report) files larger than this many MB; "
                                                       "0 = no limit. Default: 2."),
    config: Optional[Path] = typer.Option(None, "--config", help="pyproject.toml to read [tool.neuron-port] from "
                                                                 "(default: the nearest one above the first path)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only findings and errors."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also list fixed findings and skipped paths."),
    instance: Optional[str] = typer.Option(None, "--instance",
                                           help="Trainium instance the launch scripts are for (trn2.3xlarge, "
                                                "trn2.48xlarge, trn2u.48xlarge, trn3-ultraserver-gen1, "
                                                "trn3-ultraserver-gen2): GPU counts such as torchrun "
                                                "--nproc_per_node become its logical NeuronCore count "
                                                "(unsafe fix)."),
    neuron_cores: Optional[int] = typer.Option(None, "--neuron-cores", min=1,
                                               help="Logical NeuronCores per node, instead of --instance."),
    no_cache: bool = typer.Option(False, "--no-cache",
                                  help="Do not read or write the result cache (.neuron-port-cache/ next to "
                                       "pyproject.toml); every file is processed."),
) -> None:
    """Rewrite CUDA-specific code for Trainium in place and report what could not be rewritten.

    Findings are printed as `path:line:col CODE message`; `[*]` marks a fix that was not applied (use
    --unsafe-fixes for unsafe ones). Suppress a finding with `# neuron-port: ignore[NP101]` on its line.
    """
    settings = _settings(paths[0] if paths else Path.cwd(), config, select=_split_codes(select),
                         ignore=_split_codes(ignore), exclude=exclude, target=target.value if target else None,
                         unsafe_fixes=unsafe_fixes, fail_on=fail_on.value if fail_on else None,
                         max_file_size=max_file_size)
    show_progress = sys.stderr.isatty() and not quiet and output_format == OutputFormat.text
    try:
        if show_progress:
            report = _rewrite_with_progress(paths, settings, diff=diff, check=check, jobs=jobs, instance=instance,
                                            neuron_cores=neuron_cores, no_cache=no_cache)
        else:
            report = api.rewrite(paths, settings, write=not (diff or check), diff=diff, jobs=jobs,
                                 use_cache=not no_cache, instance=instance, neuron_cores=neuron_cores)
    except UsageError as exc:
        raise _fail_usage(str(exc))
    code = exit_code(report, settings.fail_on, pending_fails=check)
    stats = report.cache_stats
    if verbose and stats is not None:
        _err().print(f"cache: {stats.hits} hit(s), {stats.misses} miss(es), {stats.stored} stored, "
                     f"{stats.discarded} discarded", markup=False, highlight=False)
    patches = "".join(r.diff for r in report.files if r.diff) if diff else ""
    machine = output_format != OutputFormat.text
    # with --diff, stdout carries only the patch (text) or only the document (other formats)
    if patches and not machine:
        sys.stdout.write(patches)
        sys.stdout.flush()
    context = RenderContext(exit_code=code, unsafe_fixes=settings.unsafe_fixes, diff=diff, verbose=verbose,
                            quiet=quiet)
    _emit(report, output_format, context, text_out=_err() if diff else _out())
    if patches and machine:
        sys.stderr.write(patches)
    raise typer.Exit(code)


def _rewrite_with_progress(paths: List[Path], settings: Settings, *, diff: bool, check: bool, jobs: Optional[int],
                           instance: Optional[str], neuron_cores: Optional[int], no_cache: bool) -> Report:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("scanning"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=_err(), transient=True) as bar:
        task = bar.add_task("scan", total=None, visible=False)

        def on_files(count: int) -> None:
            bar.update(task, total=count, visible=count > 1)

        return api.rewrite(paths, settings, write=not (diff or check), diff=diff, jobs=jobs, use_cache=not no_cache,
                           instance=instance, neuron_cores=neuron_cores, on_files=on_files,
                           on_result=lambda _r: bar.advance(task))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
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
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--output-format",
                                               help="text, json, sarif or github (stdout)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the JSON report to this file."),
    fail_on: Optional[FailOn] = typer.Option(None, "--fail-on", help="Lowest severity that makes the exit code 1."),
    select: Optional[List[str]] = typer.Option(None, "--select", help="Only these codes or prefixes."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Skip these codes or prefixes."),
    target: Optional[TargetChoice] = typer.Option(None, "--target", help="neuron (default) or accelerator."),
    config: Optional[Path] = typer.Option(None, "--config", help="pyproject.toml to read [tool.neuron-port] from."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the summary panel and errors."),
    no_cache: bool = typer.Option(False, "--no-cache",
                                  help="Do not read or write the result cache of the static scan."),
) -> None:
    """Run the project on the simulated neuron device and report what Trainium would do.

    Usage: neuron-port check PATH [OPTIONS] -- python train.py --steps 4

    The command after `--` (or `check-command` from [tool.neuron-port]) runs from PATH with the simulator
    switched on (`python` means the interpreter neuron-port runs in). The report lists CPU fallbacks,
    shapes that recompile, torch.compile recompiles, float64 demotions, unsupported features and
    distributed constraints, each at the user line that caused it, plus the static findings for PATH.
    Exit code 0 when the command succeeded and nothing at or above --fail-on was found; 1 otherwise;
    2 for usage errors.
    """
    if not path.is_dir():
        raise _fail_usage(f"{path}: not a folder")
    settings = _settings(path, config, select=_split_codes(select), ignore=_split_codes(ignore),
                         target=target.value if target else None, fail_on=fail_on.value if fail_on else None,
                         unsafe_fixes=unsafe_fixes)
    command = list(ctx.args) or (shlex.split(settings.check_command) if settings.check_command else [])
    err = _err()
    try:
        if sys.stderr.isatty() and not quiet and command:
            label = f"running {shlex.join(command)} on the simulated neuron device"
            with err.status(label) as spinner:
                report = api.check(path, command, settings, nproc=nproc, timeout=timeout, preview=preview,
                                   use_cache=not no_cache, on_tick=lambda t: spinner.update(f"{label} ({t:.0f} s)"))
        else:
            report = api.check(path, command, settings, nproc=nproc, timeout=timeout, preview=preview,
                               use_cache=not no_cache)
    except UsageError as exc:
        raise _fail_usage(str(exc))
    if output is not None:
        from neuron_port.atomic import atomic_write
        from neuron_port.reporters.json_report import render

        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(output, render(report).encode())
        except OSError as exc:
            err.print(f"neuron-port: cannot write {output}: {exc}", style="bold red", markup=False)
    code = exit_code(report, settings.fail_on, pending_fails=False)
    if not _command_succeeded(report):
        code = 1
    context = RenderContext(exit_code=code, unsafe_fixes=settings.unsafe_fixes, folder=path, quiet=quiet)
    _emit(report, output_format, context, text_out=_out())
    raise typer.Exit(code)


def _command_succeeded(report: Report) -> bool:
    return report.runtime is not None and report.runtime.status.succeeded


@app.command("rules")
def list_rules(
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--output-format", help="text or json."),
) -> None:
    """List every rule: code, name, severity, fix safety and message."""
    rules = all_rules()
    if output_format == OutputFormat.json:
        sys.stdout.write(json.dumps([r.summary() for r in rules], indent=2) + "\n")
        return
    width = max(len(r.NAME) for r in rules)
    lines = [f"{'code':<6} {'name':<{width}} {'severity':<8} {'fix':<16} {'effort':<6} scope"]
    for r in rules:
        scope = "runtime (check)" if r.KIND == "runtime" else ",".join(r.TARGETS)
        if r.KIND == "line":
            scope += " (scripts, configs)"
        lines.append(f"{r.CODE:<6} {r.NAME:<{width}} {r.SEVERITY:<8} {r.fix_label():<16} {r.EFFORT or '-':<6} {scope}")
    lines.append(f"{len(rules)} rules. `neuron-port explain CODE` shows a rule's documentation.")
    sys.stdout.write("\n".join(lines) + "\n")


@app.command()
def explain(code: str = typer.Argument(..., help="A rule code (NP101) or name.")) -> None:
    """Print a rule's documentation: what it does, why, an example, fix safety, references."""
    try:
        rule = rule_by_code(code)
    except UnknownCodeError as exc:
        raise _fail_usage(str(exc))
    console = _out()
    header = rule.docs_header()
    if console.is_terminal:
        from rich.markdown import Markdown

        console.print(Markdown(header + rule.docs()))
    else:
        sys.stdout.write(header + rule.docs() + "\n")


@app.command()
def doctor(
    build: bool = typer.Option(False, "--build", help="Build (or rebuild with --force) the simulator's C++ extension now."),
    force: bool = typer.Option(False, "--force", help="With --build: rebuild even if a cached build exists."),
) -> None:
    """Check what the simulator needs (torch, a C++ compiler, ninja) and optionally prebuild it."""
    import importlib.util
    import shutil

    console = _out()
    ok = True
    torch_spec = importlib.util.find_spec("torch")
    console.print(f"torch: {'found' if torch_spec else 'missing: pip install torch==2.13.0 (the `sim` extra)'}")
    ok &= torch_spec is not None
    for tool, hint in (("g++", "install a C++ compiler (e.g. apt-get install g++)"), ("ninja", "pip install ninja")):
        path = shutil.which(tool) or (shutil.which(tool, path=os.path.dirname(sys.executable)))
        console.print(f"{tool}: {path or 'missing: ' + hint}")
        ok &= path is not None
    if importlib.util.find_spec("torch_neuronx") is not None:
        console.print("torch_neuronx: installed: this is a real Trainium setup; the simulator will not register")
    if build:
        if not ok:
            raise typer.Exit(1)
        from neuron_backend import build as backend_build

        try:
            path = backend_build.build(force=force)
        except Exception as exc:  # build errors carry their own explanation
            _err().print(f"neuron-port: simulator build failed: {exc}", style="bold red", markup=False)
            raise typer.Exit(1)
        console.print(f"simulator extension: {path}")
    raise typer.Exit(0 if ok else 1)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        _err().print("neuron-port: interrupted; every file is either unchanged or completely rewritten")
        sys.exit(130)
    except Exception as exc:  # never show users a traceback for our own bugs, unless they ask
        if os.environ.get("NEURON_PORT_DEBUG"):
            raise
        _err().print(f"neuron-port: internal error: {type(exc).__name__}: {exc} "
                     "(set NEURON_PORT_DEBUG=1 for the traceback, and please report it)",
                     style="bold red", markup=False)
        sys.exit(1)


if __name__ == "__main__":
    main()
