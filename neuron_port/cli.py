"""The `neuron-port` command line. The only module that prints and decides exit codes.

Exit codes: 0 nothing at or above --fail-on was left (and, with --check, nothing would change);
1 findings at or above it, pending changes under --check, or files that could not be processed;
2 usage or configuration errors.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from neuron_port import __version__
from neuron_port.config import ConfigError, Settings, load_settings
from neuron_port.atomic import atomic_write
from neuron_port.rewrite.discovery import discover
from neuron_port.rewrite.sources import SourceError, check_writable, file_kind
from neuron_port.rules.instances import InstanceError, resolve_instance
from neuron_port.reporters import github, json_report, sarif, text
from neuron_port.results import SEVERITY_RANK, FileError, Report
from neuron_port.rules.registry import (
    UnknownCodeError,
    all_rules,
    is_selected,
    rule_by_code,
    select_rules,
    validate_patterns,
)
from neuron_port.check.runner import DEFAULT_TIMEOUT_SECONDS
from neuron_port.rewrite.runner import RunOptions, run_files

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
    out: list[str] = []
    for value in values:
        out.extend(v.strip() for v in value.split(",") if v.strip())
    return tuple(out)


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


def load_project_settings(paths: List[Path], config: Optional[Path]) -> Settings:
    start = paths[0] if paths else Path.cwd()
    try:
        return load_settings(start, explicit=config)
    except ConfigError as exc:
        raise _fail_usage(str(exc))


def run_static(
    paths: List[Path],
    settings: Settings,
    *,
    command: str,
    write: bool,
    want_diff: bool,
    jobs: Optional[int],
    progress: bool,
    relative_to: Optional[Path] = None,
    instance: Optional[str] = None,
    neuron_cores: Optional[int] = None,
    use_cache: bool = True,
) -> Report:
    """Discover, run the engine in workers, write results atomically when ``write``. Shared with `check`.

    With ``use_cache``, results of unchanged files come from the content cache (neuron_port/rewrite/cache.py);
    its hit/miss counts are left on the report as ``cache_stats`` (shown by --verbose)."""
    try:
        validate_patterns(settings.select + settings.ignore)
    except UnknownCodeError as exc:
        raise _fail_usage(str(exc))
    rules = select_rules(settings.select or None, settings.ignore or None, settings.target)
    if relative_to is not None:  # `check`: every path in the report is relative to the checked folder
        files, problems = discover([str(relative_to.resolve())], exclude=settings.exclude,
                                   cwd=relative_to.resolve())
    else:
        files, problems = discover([str(p) for p in paths], exclude=settings.exclude)
    missing = [p for p, reason in problems if reason == "no such file or directory"]
    if missing:
        raise _fail_usage(f"{missing[0]}: no such file or directory")
    report = Report(command=command, target=settings.target)
    for path, reason in problems:
        report.errors.append(FileError(path=path, message=f"{path}: {reason}"))
    options = RunOptions(
        rule_codes=tuple(r.CODE for r in rules),
        target=settings.target,
        unsafe_fixes=settings.unsafe_fixes,
        want_diff=want_diff,
        max_bytes=int(settings.max_file_size * 2**20),
        instance=instance,
        neuron_cores=neuron_cores,
    )

    cache = None
    if use_cache:
        from neuron_port.rewrite.cache import ResultCache
        from neuron_port.config import find_pyproject

        roots = [relative_to] if relative_to is not None else list(paths)
        pyproject = settings.source or (find_pyproject(roots[0]) if roots and roots[0].exists() else None)
        cache = ResultCache.for_run(roots, str(pyproject) if pyproject else None, options)
    if progress and len(files) > 1:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("scanning"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=_err(), transient=True) as bar:
            task = bar.add_task("scan", total=len(files))
            results = run_files(files, options, jobs=jobs, on_result=lambda _r: bar.advance(task), cache=cache)
    else:
        results = run_files(files, options, jobs=jobs, cache=cache)
    report.cache_stats = cache.stats if cache is not None else None  # type: ignore[attr-defined]

    for result in results:
        if result.error:
            report.errors.append(FileError(path=result.path, message=result.error))
        if result.changed and write:
            try:
                check_writable(Path(result.real_path), result.path)
                atomic_write(Path(result.real_path), result.new_bytes or b"", durable=True)
            except (SourceError, OSError) as exc:
                message = str(exc) if isinstance(exc, SourceError) else f"{result.path}: cannot write: {exc}"
                report.errors.append(FileError(path=result.path, message=message))
                result.new_bytes = None
                result.fixes_applied = 0
                result.findings = [dataclasses.replace(f, fix=dataclasses.replace(f.fix, applied=False))
                                   for f in result.findings]
        elif not write:
            result.findings = [dataclasses.replace(f, fix=dataclasses.replace(f.fix, applied=False))
                               for f in result.findings]
    # scripts and configs that mention nothing CUDA-like are not part of the report (a tree has many)
    report.files = [r for r in results if not (r.skipped and file_kind(r.path) not in ("python", "notebook"))]
    return report


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
    settings = load_project_settings(paths, config).merged(
        select=_split_codes(select),
        ignore=_split_codes(ignore),
        exclude=exclude,
        target=target.value if target else None,
        unsafe_fixes=unsafe_fixes,
        fail_on=fail_on.value if fail_on else None,
        max_file_size=max_file_size,
    )
    write = not (diff or check)
    try:
        resolve_instance(instance, neuron_cores)
    except InstanceError as exc:
        raise _fail_usage(str(exc))
    show_progress = sys.stderr.isatty() and not quiet and output_format == OutputFormat.text
    report = run_static(paths, settings, command="rewrite", write=write, want_diff=diff, jobs=jobs,
                        progress=show_progress, instance=instance, neuron_cores=neuron_cores,
                        use_cache=not no_cache)
    code = exit_code(report, settings.fail_on, pending_fails=check)
    stats = getattr(report, "cache_stats", None)
    if verbose and stats is not None:
        _err().print(f"cache: {stats.hits} hit(s), {stats.misses} miss(es), {stats.stored} stored, "
                     f"{stats.discarded} discarded", markup=False, highlight=False)

    if output_format != OutputFormat.text:
        if output_format == OutputFormat.sarif:
            sys.stdout.write(sarif.render(report, wrote=write, unsafe_fixes=settings.unsafe_fixes, exit_code=code))
        elif output_format == OutputFormat.github:
            sys.stdout.write(github.render(report))
        else:
            sys.stdout.write(json_report.render(report, wrote=write))
        if diff:
            for result in report.files:
                if result.diff:
                    sys.stderr.write(result.diff)
        raise typer.Exit(code)

    out = _out()
    info = _err() if diff else out  # with --diff, stdout carries only the patch
    if diff:
        for result in report.files:
            if result.diff:
                sys.stdout.write(result.diff)
        sys.stdout.flush()
    text.render_errors(_err(), report)
    text.render_findings(info, report, include_fixed=verbose)
    if not quiet:
        text.render_summary(info, report, mode="write" if write else ("diff" if diff else "check"))
    raise typer.Exit(code)


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
    import shlex
    import shutil
    import tempfile

    from neuron_port.check.runner import CommandError, build_command, run_command
    from neuron_port.check.preview import make_preview
    from neuron_port.reporters import check_text
    from neuron_port.check.events import read_events
    from neuron_port.check.runtime import build_runtime
    from neuron_port.check.sites import SiteMapper

    if not path.is_dir():
        raise _fail_usage(f"{path}: not a folder")
    settings = load_project_settings([path], config).merged(
        select=_split_codes(select), ignore=_split_codes(ignore),
        target=target.value if target else None, fail_on=fail_on.value if fail_on else None,
        unsafe_fixes=unsafe_fixes)
    command = list(ctx.args)
    if not command and settings.check_command:
        command = shlex.split(settings.check_command)
    if not command:
        raise _fail_usage("no command to run: give one after `--` (neuron-port check PATH -- python train.py) "
                          "or set check-command in [tool.neuron-port]")
    try:
        argv = build_command(command, nproc)
    except CommandError as exc:
        raise _fail_usage(str(exc))

    static: list[Report] = []

    def scan() -> None:
        static.append(run_static([path], settings, command="check", write=False, want_diff=False, jobs=None,
                                 progress=False, relative_to=path, use_cache=not no_cache))

    scratch = Path(tempfile.mkdtemp(prefix="neuron-port-check-"))
    try:
        tree = None
        cwd = path.resolve()
        if preview:  # the copy needs the rewrites first
            scan()
            rewritten = {Path(r.real_path): r.new_bytes for r in static[0].files if r.changed and r.new_bytes}
            tree = make_preview(path, rewritten, scratch / "tree")
            cwd = tree.root
        events_dir = scratch / "events"
        events_dir.mkdir()
        overlap = None if preview else scan  # otherwise the static scan runs while the command starts up
        err = _err()
        if sys.stderr.isatty() and not quiet:
            with err.status(f"running {shlex.join(command)} on the simulated neuron device") as spinner:
                status = run_command(argv, cwd, events_dir, timeout, while_running=overlap, on_tick=lambda t: spinner.update(
                    f"running {shlex.join(command)} on the simulated neuron device ({t:.0f} s)"))
        else:
            status = run_command(argv, cwd, events_dir, timeout, while_running=overlap)
        report = static[0]
        shown = command[1:] if command[0] in ("python", "python3") else command
        status.command = command if not nproc else ["torchrun", f"--nproc_per_node={nproc}", *shown]
        processes = read_events(events_dir)
        runtime, findings = build_runtime(processes, status, SiteMapper(path, tree))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report.runtime = runtime
    report.runtime_findings = [f for f in findings if is_selected(f.code, settings.select, settings.ignore)]

    document = json_report.render(report, wrote=False)
    if output is not None:
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(output, document.encode())
        except OSError as exc:
            _err().print(f"neuron-port: cannot write {output}: {exc}", style="bold red", markup=False)
    code = exit_code(report, settings.fail_on, pending_fails=False)
    if not status.succeeded:
        code = 1
    if output_format == OutputFormat.json:
        sys.stdout.write(document)
        raise typer.Exit(code)
    if output_format == OutputFormat.sarif:
        sys.stdout.write(sarif.render(report, wrote=False, unsafe_fixes=settings.unsafe_fixes, folder=path,
                                      exit_code=code))
        raise typer.Exit(code)
    if output_format == OutputFormat.github:
        sys.stdout.write(github.render(report, folder=path))
        raise typer.Exit(code)
    console = _out()
    text.render_errors(_err(), report)
    check_text.render_check(Console(highlight=False), report)  # wraps, unlike the findings console
    if not quiet:
        text.render_findings(console, report)
    raise typer.Exit(code)


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
