"""`rewrite`'s guard against file names that read as options (issue 22).

pre-commit appends the staged file names after a hook's entry; the shipped hooks end their entry with `--`,
after which every word is a path. A hook written without it (a `repo: local` entry, an old copy) would take
a committed file named `--exclude=*.py` or `--config=evil.toml` for an option and scan nothing. So a word
before `--` that looks like an option and names an existing file is refused (exit 2), with the fix in the
message; an option never names a file in normal use, so nothing else changes.
"""

from __future__ import annotations

from typing import Any

from neuron_port.commands.help import PlainHelpCommand
from neuron_port.commands.options import fail_usage
from neuron_port.commands.rewrite_argv import dash_named_files, option_named_files


class PathsAfterDashes(PlainHelpCommand):
    """A command whose paths may follow `--`; an option-looking word that names a file must."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        clashes = option_named_files(list(args))
        if clashes:
            raise fail_usage(f"{clashes[0]!r} reads as an option but is also a file here; put file names after "
                             "`--` (neuron-port rewrite [OPTIONS] -- PATH...), so that every word after it is "
                             "a path")
        return super().parse_args(ctx, dash_named_files(list(args)))
