"""The options of the `neuron-port` commands as typer declares them (names, metavars, help) and the
usage-error exit; cli.py declares the commands with them.

The options of `rewrite` (and those `check` shares with it) are declared from the plain data of
option_specs.py; the options of `check` alone are declared here. Every option and argument names its
metavar (PATH, CODE, FORMAT, N, ...): without one, typer shows its own spelling of the type
(``{paths}...``, ``<list[str]>``), which changes between releases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer
from typing_extensions import Annotated

from neuron_port.check import DEFAULT_TIMEOUT_SECONDS
from neuron_port.commands import option_specs as spec
from neuron_port.commands.console import print_usage_error


def declared(option: spec.OptionSpec) -> Any:
    """typer's ``Annotated`` declaration of ``option``."""
    annotation: Any = option.kind
    if option.many:
        annotation = List[annotation]  # type: ignore[valid-type]
    if option.optional:
        annotation = Optional[annotation]
    settings: dict[str, Any] = {"help": option.help_text()}
    if option.metavar is not None:
        settings["metavar"] = option.metavar
    if option.min is not None:
        settings["min"] = option.min
    if option.argument:
        return Annotated[annotation, typer.Argument(show_default=False, **settings)]
    return Annotated[annotation, typer.Option(*option.declarations, **settings)]


# -- options rewrite and check share --------------------------------------------------------------------
SelectOption = declared(spec.SELECT)
IgnoreOption = declared(spec.IGNORE)
ExtendSelectOption = declared(spec.EXTEND_SELECT)
ExtendIgnoreOption = declared(spec.EXTEND_IGNORE)
TargetOption = declared(spec.TARGET)
FormatOption = declared(spec.FORMAT)
FailOnOption = declared(spec.FAIL_ON)
ConfigOption = declared(spec.CONFIG)
ExitZeroOption = declared(spec.EXIT_ZERO)
StatisticsOption = declared(spec.STATISTICS)
UnsafeFixesOption = declared(spec.UNSAFE_FIXES)
QuietOption = declared(spec.QUIET)

# -- rewrite --------------------------------------------------------------------------------------------
PathsArgument = declared(spec.PATHS)
DiffOption = declared(spec.DIFF)
CheckOption = declared(spec.CHECK)
FixOption = declared(spec.FIX)
StdinFilenameOption = declared(spec.STDIN_FILENAME)
JobsOption = declared(spec.JOBS)
ExcludeOption = declared(spec.EXCLUDE)
MaxFileSizeOption = declared(spec.MAX_FILE_SIZE)
VerboseOption = declared(spec.VERBOSE)
InstanceOption = declared(spec.INSTANCE)
NeuronCoresOption = declared(spec.NEURON_CORES)
CacheOption = declared(spec.CACHE)

# -- check ----------------------------------------------------------------------------------------------
FolderArgument = Annotated[Optional[Path], typer.Argument(
    metavar="PATH", show_default=False, help="The project folder; the command runs from here (not with --model).")]
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

# -- check --model (neuron_port/commands/check_models.py) ---------------------------------------------------
ModelOption = Annotated[Optional[list[str]], typer.Option(
    "--model", metavar="ID_OR_PATH",
    help="Instead of a command: one standard training step (AdamW, the task's loss, autocast at --precision) "
         "of the Hugging Face model built from this config.json (a folder, the file, or a hub ID through the "
         "HF cache or the hub; no weights read), shape-only. Repeatable: several models give one table.")]
TaskOption = Annotated[Optional[list[str]], typer.Option(
    "--task", metavar="TASK", help="With --model: causal-lm, seq2seq, masked-lm or image-classification "
                                   "(default: from the config's architectures). Once, or once per --model.")]
BatchOption = Annotated[Optional[int], typer.Option(
    "--batch", metavar="B", help="With --model: the batch per rank. Default: 8.")]
SeqOption = Annotated[Optional[int], typer.Option(
    "--seq", metavar="S", help="With --model: the sequence length. Default: 2048.")]
PrecisionOption = Annotated[Optional[str], typer.Option(
    "--precision", metavar="PRECISION", help="With --model: bf16 (default), fp16 (autocast) or fp32.")]
CompileModelOption = Annotated[bool, typer.Option(
    "--compile", help="With --model: each block compiled (torch.compile, backend neuron).")]
EngineOption = Annotated[Optional[str], typer.Option(
    "--engine", metavar="ENGINE", help="With several --model: local (a process pool, at most one worker per "
                                       "core) or ray (Ray tasks on RAY_ADDRESS's cluster or a local instance; "
                                       "the ray extra).")]


def fail_usage(message: str) -> "typer.Exit":
    print_usage_error(message)
    return typer.Exit(2)
