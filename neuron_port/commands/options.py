"""The options of the `neuron-port` commands (names, metavars, help) and the exit-code rule; cli.py
declares the commands with them.

Every option and argument names its metavar (PATH, CODE, FORMAT, N, ...): without one, typer shows
its own spelling of the type (``{paths}...``, ``<list[str]>``), which changes between releases.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from typing_extensions import Annotated

from neuron_port.check import DEFAULT_TIMEOUT_SECONDS
from neuron_port.commands.console import err
from neuron_port.report import Report
from neuron_port.reporters import FORMATS
from neuron_port.results import SEVERITY_RANK
from neuron_port.rules.instances import INSTANCE_HELP
from neuron_port.rules.vocabulary import TARGETS

# The choices of --output-format, --target and --fail-on (str enums: typer lists and validates them).
OutputFormat = Enum("OutputFormat", {name: name for name in FORMATS}, type=str)  # type: ignore[misc]
TargetChoice = Enum("TargetChoice", {name: name for name in TARGETS}, type=str)  # type: ignore[misc]
FailOn = Enum("FailOn", {name: name for name in ("error", "warning", "info", "never")}, type=str)  # type: ignore[misc]

# -- options rewrite and check share --------------------------------------------------------------------
SelectOption = Annotated[Optional[List[str]], typer.Option(
    "--select", metavar="CODE", help="Only these rule codes, prefixes or names (NP1, NP201, ALL), instead of "
                                     "the configured selection; comma-separated or repeated.")]
IgnoreOption = Annotated[Optional[List[str]], typer.Option(
    "--ignore", metavar="CODE", help="Skip these rule codes, prefixes or names (on top of the configuration); "
                                     "comma-separated or repeated.")]
ExtendSelectOption = Annotated[Optional[List[str]], typer.Option(
    "--extend-select", metavar="CODE", help="Add these rule codes, prefixes or names to the selection (more "
                                            "specific selectors win: --ignore NP1 --extend-select NP101 "
                                            "keeps NP101).")]
ExtendIgnoreOption = Annotated[Optional[List[str]], typer.Option(
    "--extend-ignore", metavar="CODE", help="Skip these too (the same as --ignore, as in ruff).")]
TargetOption = Annotated[Optional[TargetChoice], typer.Option(
    "--target", metavar="TARGET", help="neuron: rewrite to the 'neuron' device and torch.neuron (default). "
                                       "accelerator: rewrite to torch.accelerator, so the result runs on CUDA "
                                       "and Trainium alike.")]
FormatOption = Annotated[OutputFormat, typer.Option(
    "--output-format", metavar="FORMAT", help="text, json, sarif (SARIF 2.1.0) or github (Actions "
                                              "annotations); on stdout.")]
FailOnOption = Annotated[Optional[FailOn], typer.Option(
    "--fail-on", metavar="SEVERITY", help="Lowest severity that makes the exit code 1 (error, warning, info, "
                                          "never). Default: error.")]
ConfigOption = Annotated[Optional[Path], typer.Option(
    "--config", metavar="FILE", help="TOML file to read [tool.neuron-port] from (a pyproject.toml or "
                                     "neuron-port.toml; it must have that table). Default: the closest "
                                     "pyproject.toml above the path with that table, up to the repository "
                                     "root or, outside one, the working directory.")]
ExitZeroOption = Annotated[bool, typer.Option(
    "--exit-zero", help="Exit 0 even when findings are left (or, with --check, changes are pending). Files "
                        "that could not be processed, a failed command, usage errors and interrupts still "
                        "exit non-zero.")]
StatisticsOption = Annotated[bool, typer.Option(
    "--statistics", help="Instead of the findings, print one line per code left: count, code, "
                         "[*] when fixable, name (ruff's format); with --output-format json, a JSON array.")]
UnsafeFixesOption = Annotated[Optional[bool], typer.Option(
    "--unsafe-fixes/--no-unsafe-fixes", help="Also apply fixes marked unsafe (they may change behaviour on "
                                             "CUDA, or need review).")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Print only findings and errors.")]

# -- rewrite --------------------------------------------------------------------------------------------
PathsArgument = Annotated[List[Path], typer.Argument(
    metavar="PATH...", help="Files or folders to rewrite (.gitignore is honoured); `-` reads one file from "
                            "stdin (see --stdin-filename).", show_default=False)]
DiffOption = Annotated[bool, typer.Option("--diff", help="Print a unified diff of the fixes to stdout; write "
                                                         "nothing.")]
CheckOption = Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 if a file would change or a "
                                                           "finding at or above --fail-on remains.")]
FixOption = Annotated[bool, typer.Option(
    "--fix", help="With `-`: print the rewritten source on stdout and the findings on stderr (without it, "
                  "only the findings). Files are fixed in place without it.")]
StdinFilenameOption = Annotated[Optional[str], typer.Option(
    "--stdin-filename", metavar="NAME", help="With `-`: the name of the file on stdin. It decides the kind "
                                             "(.ipynb, .sh, ...), the configuration, the excludes, and names "
                                             "the findings.")]
JobsOption = Annotated[Optional[int], typer.Option("--jobs", "-j", min=1, metavar="N",
                                                   help="Worker processes (default: all cores).")]
ExcludeOption = Annotated[Optional[List[str]], typer.Option("--exclude", metavar="GLOB",
                                                            help="Glob of paths to skip (repeatable).")]
MaxFileSizeOption = Annotated[Optional[float], typer.Option(
    "--max-file-size", min=0, metavar="MB", help="Skip (and report) files larger than this many MB (at most "
                                                 "10000); 0 = no limit. Default: 2.")]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Also list fixed findings and skipped "
                                                                     "paths.")]
InstanceOption = Annotated[Optional[str], typer.Option("--instance", metavar="NAME", help=INSTANCE_HELP)]
NeuronCoresOption = Annotated[Optional[int], typer.Option(
    "--neuron-cores", min=1, metavar="N", help="Logical NeuronCores per node, instead of --instance.")]
CacheOption = Annotated[Optional[bool], typer.Option(
    "--cache/--no-cache", help="Use the result cache (.neuron-port-cache/ in each project root: the folder with "
                               "pyproject.toml or .git). Default: on when writing files, off under --check "
                               "and --diff (they write nothing); --cache turns it on there too.")]

# -- check ----------------------------------------------------------------------------------------------
FolderArgument = Annotated[Path, typer.Argument(metavar="PATH", show_default=False,
                                                help="The project folder; the command runs from here.")]
NprocOption = Annotated[Optional[int], typer.Option(
    "--nproc", min=1, metavar="N", help="Run the command under torchrun with N processes (one per NeuronCore).")]
TimeoutOption = Annotated[float, typer.Option(
    "--timeout", min=1, metavar="SECONDS", help="Seconds before the command is stopped (SIGTERM, then SIGKILL). "
                                                f"Default: {DEFAULT_TIMEOUT_SECONDS} (30 minutes).",
    show_default=False)]
ShapeOnlyOption = Annotated[bool, typer.Option(
    "--shape-only", help="Run with every neuron tensor fake (shapes and dtypes, no storage, no compute): the same "
                         "findings, memory and estimate at sizes this machine cannot compute. Values the program "
                         "reads from the device are placeholders (0, 0.0, False), each site listed.")]
WorldSizeOption = Annotated[Optional[int], typer.Option(
    "--world-size", min=1, metavar="N",
    help="With --shape-only: run one process as rank 0 of an N-rank job over a fake process group (FSDP "
         "shards, collectives and per-rank memory of an N-rank job; rank 0 on its own NeuronCore).")]
SizeRuleOption = Annotated[Optional[list[str]], typer.Option(
    "--size-rule", metavar="FILE:LINE=N",
    help="With --shape-only: the size of a data-dependent dimension (nonzero, boolean mask, unique) at that line "
         "(default: the upper bound, every element selected). Repeatable.")]
PreviewOption = Annotated[bool, typer.Option(
    "--preview", help="Run on a temporary rewritten copy (safe fixes applied); the project is not changed. "
                      "Without it the tree runs as it is.")]
PreviewUnsafeFixesOption = Annotated[Optional[bool], typer.Option(
    "--unsafe-fixes/--no-unsafe-fixes", help="With --preview: also apply unsafe fixes in the copy.")]
OutputOption = Annotated[Optional[Path], typer.Option("--output", "-o", metavar="FILE",
                                                      help="Also write the JSON report to this file.")]
CheckExitZeroOption = Annotated[bool, typer.Option(
    "--exit-zero", help="Exit 0 even when findings are left. Files that could not be processed, a failed "
                        "command, usage errors and interrupts still exit non-zero.")]
CheckQuietOption = Annotated[bool, typer.Option(
    "--quiet", "-q", help="Hide the program's output and the tables: only the findings and one summary line.")]
NoCacheOption = Annotated[bool, typer.Option(
    "--no-cache", help="Do not read or write the result cache of the static scan (.neuron-port-cache/ in the "
                       "project root); every file is processed.")]


def fail_usage(message: str) -> "typer.Exit":
    err().print(f"neuron-port: error: {message}", style="bold red", markup=False)
    return typer.Exit(2)


def exit_code(report: Report, fail_on: str, pending_fails: bool, exit_zero: bool = False) -> int:
    """1 for files that could not be processed or a failed command (even with --exit-zero, as ruff exits
    non-zero on errors), then 1 for pending changes (``pending_fails``) or findings at or above
    ``fail_on`` unless ``exit_zero``; else 0."""
    if report.errors or (report.runtime is not None and not report.runtime.status.succeeded):
        return 1
    if exit_zero:
        return 0
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
