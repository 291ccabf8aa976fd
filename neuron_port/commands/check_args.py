"""The command that `neuron-port check` runs: only what follows `--` on the command line.

Without `--`, click would read the command's own options as neuron-port's (``check . python z.py
--steps 4 --timeout 5`` would take ``--timeout 5`` for neuron-port and run ``python z.py --steps 4``)
and any other word as part of the command. So the command line is kept as it was given (the parser
drops `--`) and a command that does not follow `--` is refused, with the fix in the message; a command
from ``check-command`` in [tool.neuron-port] needs no `--`.
"""

from __future__ import annotations

import shlex
from typing import Any, Optional

from neuron_port.commands.help import PlainHelpCommand
from neuron_port.errors import UsageError

ARGV_KEY = "neuron_port.argv"


class CommandAfterDashes(PlainHelpCommand):
    """A command whose extra arguments must follow `--`; its usage line says so."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta[ARGV_KEY] = list(args)
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return super().collect_usage_pieces(ctx) + ["[-- COMMAND...]"]


def command_after_dashes(ctx: Any, configured: Optional[str]) -> list[str]:
    """The command to run: the arguments after `--`, else ``configured`` (check-command) split into
    arguments, else []. UsageError for arguments that are not after `--`."""
    given = ctx.meta.get(ARGV_KEY, [])
    after = given[given.index("--") + 1:] if "--" in given else []
    extra = list(ctx.args)
    if extra != after:
        stray = shlex.join([arg for arg in extra if arg not in after] or extra)
        if "--" in given:
            raise UsageError(f"unexpected argument(s) before `--`: {stray} (not an option of `check`; the command "
                             "to run goes after `--`)")
        raise UsageError(f"unexpected argument(s) {stray}: put `--` before the command to run, as in "
                         "`neuron-port check PATH [OPTIONS] -- python train.py --steps 4` (without it, the "
                         "command's own options would be taken as neuron-port's)")
    if extra:
        return extra
    return shlex.split(configured) if configured else []


def parse_size_rules(rules: list[str]) -> dict[str, int]:
    """``--size-rule FILE:LINE=N`` values as {"FILE:LINE": N}; a malformed one is a usage error (that they
    need --shape-only is the session's check, for the API too)."""
    out: dict[str, int] = {}
    for rule in rules:
        where, eq, size = rule.rpartition("=")
        file, colon, line = where.rpartition(":")
        if not (eq and colon and file and line.isdigit() and int(line) > 0 and size.isdigit()):
            raise UsageError(f"--size-rule {rule!r}: expected FILE:LINE=N (e.g. train.py:57=128), N a whole number")
        out[f"{file}:{int(line)}"] = int(size)
    return out
