"""`rewrite`'s guard against file names that read as options (issue 22).

pre-commit appends the staged file names after a hook's entry; the shipped hooks end their entry with `--`,
after which every word is a path. A hook written without it (a `repo: local` entry, an old copy) would take
a committed file named `--exclude=*.py` or `--config=evil.toml` for an option and scan nothing. So a word
before `--` that looks like an option and names an existing file is refused (exit 2), with the fix in the
message; an option never names a file in normal use, so nothing else changes.
"""

from __future__ import annotations

import os
from typing import Any

from neuron_port.commands.help import PlainHelpCommand
from neuron_port.commands.options import fail_usage


def option_named_files(args: list[str]) -> list[str]:
    """The words before `--` that start with `-` (not `-` itself, stdin) and name an existing path."""
    before = args[:args.index("--")] if "--" in args else args
    return [word for word in before if word.startswith("-") and word != "-" and os.path.lexists(word)]


def dash_named_files(words: list[str]) -> list[str]:
    """``words`` with each `-` after `--` spelled as the file `-` of the working folder (an absolute path,
    which the report still shows as `-`): after `--` every word is a path, and the hooks' entry ends with
    `--`, so a committed file named `-` must be read, not stdin (issue 33). `-` before `--` is stdin."""
    if "--" not in words:
        return words
    after = words.index("--") + 1
    return words[:after] + [os.path.join(os.getcwd(), word) if word == "-" else word for word in words[after:]]


class PathsAfterDashes(PlainHelpCommand):
    """A command whose paths may follow `--`; an option-looking word that names a file must."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        clashes = option_named_files(list(args))
        if clashes:
            raise fail_usage(f"{clashes[0]!r} reads as an option but is also a file here; put file names after "
                             "`--` (neuron-port rewrite [OPTIONS] -- PATH...), so that every word after it is "
                             "a path")
        return super().parse_args(ctx, dash_named_files(list(args)))
