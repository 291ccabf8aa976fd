"""The options of `rewrite` (and those `check` shares with it) as plain data, without typer: their words,
value types, metavars, bounds and help, and the choices of --output-format, --target and --fail-on.
options.py makes typer's declarations of them (what cli.py declares the commands with); typer, the one
parser of the command line, reads their values through typer_coercion.py (no pydantic).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Callable, Optional, Union

from neuron_port.reporters import FORMATS
from neuron_port.rules.vocabulary import TARGETS

# The choices of --output-format, --target and --fail-on (str enums: typer lists and validates them).
OutputFormat = Enum("OutputFormat", {name: name for name in FORMATS}, type=str)  # type: ignore[misc]
TargetChoice = Enum("TargetChoice", {name: name for name in TARGETS}, type=str)  # type: ignore[misc]
FailOn = Enum("FailOn", {name: name for name in ("error", "warning", "info", "never")}, type=str)  # type: ignore[misc]


def _instance_help() -> str:
    from neuron_port.rules.instances import INSTANCE_HELP  # reads instances.toml: only for typer's help

    return INSTANCE_HELP


@dataclass(frozen=True)
class OptionSpec:
    """One option (or the argument) of a command. ``declarations`` as typer takes them (``--cache/--no-cache``
    declares both switches); ``kind`` the type of one value; ``many``: repeatable (a list); ``optional``:
    None when not given; ``help`` a text, or a function that makes it (read only when typer needs it)."""

    declarations: tuple[str, ...]
    kind: type
    help: Union[str, Callable[[], str]]
    many: bool = False
    optional: bool = False
    metavar: Optional[str] = None
    min: Optional[float] = None
    argument: bool = False

    def help_text(self) -> str:
        return self.help if isinstance(self.help, str) else self.help()


# -- options rewrite and check share --------------------------------------------------------------------
SELECT = OptionSpec(("--select",), str, many=True, optional=True, metavar="CODE", help=(
    "Only these rule codes, prefixes or names (NP1, NP201, ALL), instead of the configured selection; "
    "comma-separated or repeated."))
IGNORE = OptionSpec(("--ignore",), str, many=True, optional=True, metavar="CODE", help=(
    "Skip these rule codes, prefixes or names (on top of the configuration); comma-separated or repeated."))
EXTEND_SELECT = OptionSpec(("--extend-select",), str, many=True, optional=True, metavar="CODE", help=(
    "Add these rule codes, prefixes or names to the selection (more specific selectors win: --ignore NP1 "
    "--extend-select NP101 keeps NP101)."))
EXTEND_IGNORE = OptionSpec(("--extend-ignore",), str, many=True, optional=True, metavar="CODE",
                           help="Skip these too (the same as --ignore, as in ruff).")
TARGET = OptionSpec(("--target",), TargetChoice, optional=True, metavar="TARGET", help=(
    "neuron: rewrite to the 'neuron' device and torch.neuron (default). accelerator: rewrite to "
    "torch.accelerator, so the result runs on CUDA and Trainium alike."))
FORMAT = OptionSpec(("--output-format",), OutputFormat, metavar="FORMAT", help=(
    "text, json, sarif (SARIF 2.1.0), github (Actions annotations) or gitlab (Code Quality); on stdout."))
FAIL_ON = OptionSpec(("--fail-on",), FailOn, optional=True, metavar="SEVERITY", help=(
    "Lowest severity that makes the exit code 1 (error, warning, info, never). Default: error."))
CONFIG = OptionSpec(("--config",), Path, optional=True, metavar="FILE", help=(
    "TOML file to read [tool.neuron-port] from (a pyproject.toml or neuron-port.toml; it must have that "
    "table). Default: the closest pyproject.toml above the path with that table, up to the repository "
    "root or, outside one, the working directory."))
EXIT_ZERO = OptionSpec(("--exit-zero",), bool, help=(
    "Exit 0 even when findings are left (or, with --check, changes are pending). Files that could not be "
    "processed, a failed command, usage errors and interrupts still exit non-zero."))
STATISTICS = OptionSpec(("--statistics",), bool, help=(
    "Instead of the findings, print one line per code left: count, code, [*] when fixable, name (ruff's "
    "format); with --output-format json, a JSON array."))
UNSAFE_FIXES = OptionSpec(("--unsafe-fixes/--no-unsafe-fixes",), bool, optional=True, help=(
    "Also apply fixes marked unsafe (they may change behaviour on CUDA, or need review)."))
QUIET = OptionSpec(("--quiet", "-q"), bool, help="Print only findings and errors.")

# -- rewrite --------------------------------------------------------------------------------------------
PATHS = OptionSpec((), Path, many=True, argument=True, metavar="PATH...", help=(
    "Files or folders to rewrite (.gitignore is honoured); `-` reads one file from stdin (see "
    "--stdin-filename)."))
DIFF = OptionSpec(("--diff",), bool, help="Print a unified diff of the fixes to stdout; write nothing.")
CHECK = OptionSpec(("--check",), bool, help=(
    "Write nothing; exit 1 if a file would change or a finding at or above --fail-on remains."))
FIX = OptionSpec(("--fix",), bool, help=(
    "With `-`: print the rewritten source on stdout and the findings on stderr (without it, only the "
    "findings). Files are fixed in place without it."))
STDIN_FILENAME = OptionSpec(("--stdin-filename",), str, optional=True, metavar="NAME", help=(
    "With `-`: the name of the file on stdin. It decides the kind (.ipynb, .sh, ...), the configuration, "
    "the excludes, and names the findings."))
JOBS = OptionSpec(("--jobs", "-j"), int, optional=True, min=1, metavar="N",
                  help="Worker processes (default: all cores).")
EXCLUDE = OptionSpec(("--exclude",), str, many=True, optional=True, metavar="GLOB",
                     help="Glob of paths to skip (repeatable).")
MAX_FILE_SIZE = OptionSpec(("--max-file-size",), float, optional=True, min=0, metavar="MB", help=(
    "Skip (and report) files larger than this many MB (at most 10000); 0 = no limit. Default: 2."))
VERBOSE = OptionSpec(("--verbose", "-v"), bool, help="Also list fixed findings and skipped paths.")
INSTANCE = OptionSpec(("--instance",), str, optional=True, metavar="NAME", help=_instance_help)
NEURON_CORES = OptionSpec(("--neuron-cores",), int, optional=True, min=1, metavar="N",
                          help="Logical NeuronCores per node, instead of --instance.")
CACHE = OptionSpec(("--cache/--no-cache",), bool, optional=True, help=(
    "Use the result cache (.neuron-port-cache/ in each project root: the folder with pyproject.toml or "
    ".git). Default: on when writing files, off under --check and --diff (they write nothing); --cache "
    "turns it on there too."))
