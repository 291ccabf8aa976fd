"""`neuron-port rewrite ...` read without typer, for the plain command lines a pre-commit hook and most
users type; anything else goes to typer as before.

typer 0.29 coerces every parameter through a pydantic ``TypeAdapter`` that it builds on each run (pydantic
imported and ~15 adapters built, about 0.08 s of a one-file hook), and importing typer with its vendored
click costs another ~0.015 s. The words are read here from the plain data both readers are built from
(option_specs.py: the options of `rewrite`, in cli.py's order, with their defaults), and only in the
forms whose meaning is plain: flags, ``--x/--no-x`` switches, short flags alone (``-q``), an option's
value as the next word (a value that starts with ``-``, or that is not plainly valid for its type, is
typer's to judge), paths, and ``--`` (every word after it is a path, `-` too: dash_named_files). Help, ``--opt=value``, ``-j4``,
bundled short flags, an unknown or repeated option, no path, an option-looking word that names a file
(``option_named_files``) and shell completion return None: typer then answers exactly as it always did,
error messages included. tests/rewrite/test_rewrite_argv.py holds the values equal to those typer
passes, over every option, and cli.py's declaration of `rewrite` equal to the data.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, Optional

from neuron_port.commands.option_specs import REWRITE_PARAMETERS, OptionSpec

# A value of these types is read only in its plainest spelling, which every coercion reads the same.
_PLAIN_NUMBER = {int: re.compile(r"[1-9][0-9]{0,17}"), float: re.compile(r"(0|[1-9][0-9]{0,17})(\.[0-9]{1,17})?")}
# typer's shell completion runs through its own dispatch
_COMPLETION_VARIABLE = "_NEURON_PORT_COMPLETE"


def option_named_files(args: list[str]) -> list[str]:
    """The words before `--` that start with `-` (not `-` itself, stdin) and name an existing path
    (option_paths.py refuses them on typer's path)."""
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


class _Parameter:
    """One option of the command: its name, value type, option words and bounds."""

    __slots__ = ("name", "kind", "many", "words", "off_words", "minimum", "default")

    def __init__(self, name: str, option: OptionSpec, default: Any) -> None:
        self.name, self.kind, self.many, self.minimum, self.default = \
            name, option.kind, option.many, option.min, default
        self.words = tuple(declaration.partition("/")[0] for declaration in option.declarations)
        self.off_words = tuple(declaration.partition("/")[2] for declaration in option.declarations
                               if "/" in declaration)


def _declarations() -> tuple[list[_Parameter], str]:
    """`rewrite`'s options and the name of its one path argument."""
    options = [_Parameter(name, option, default) for name, option, default in REWRITE_PARAMETERS
               if not option.argument]
    (argument,) = [name for name, option, _ in REWRITE_PARAMETERS if option.argument]
    return options, argument


def _value(parameter: _Parameter, word: str) -> Any:
    """The typed value of an option's word, or raises ValueError when it is not in its plainest form."""
    if not word or word.startswith("-"):
        raise ValueError(word)
    kind = parameter.kind
    if kind in _PLAIN_NUMBER:
        if not _PLAIN_NUMBER[kind].fullmatch(word):
            raise ValueError(word)
        value = kind(word)
        if parameter.minimum is not None and value < parameter.minimum:
            raise ValueError(word)
        return value
    if parameter.minimum is not None:
        raise ValueError(word)
    return kind(word)  # an Enum: ValueError when it names no choice (typer's choices are case-sensitive here)


def direct_arguments(args: list[str]) -> Optional[dict[str, Any]]:
    """The keyword arguments typer would call cli.py's ``rewrite`` with for ``rewrite`` followed by
    ``args[1:]``, or None when ``args`` is not such a plain command line (typer then dispatches it)."""
    if not args or args[0] != "rewrite" or os.environ.get(_COMPLETION_VARIABLE):
        return None
    words = dash_named_files(args[1:])
    if option_named_files(words):
        return None
    options, argument = _declarations()
    by_word: dict[str, tuple[_Parameter, bool]] = {}
    for parameter in options:
        by_word.update((word, (parameter, True)) for word in parameter.words)
        by_word.update((word, (parameter, False)) for word in parameter.off_words)
    values: dict[str, Any] = {}
    paths: list[Path] = []
    position = 0
    while position < len(words):
        word = words[position]
        position += 1
        if word == "--":
            paths.extend(Path(rest) for rest in words[position:])
            break
        if not word:
            return None
        if not word.startswith("-") or word == "-":
            paths.append(Path(word))
            continue
        if word not in by_word:
            return None
        parameter, on = by_word[word]
        if parameter.kind is bool:
            if parameter.name in values and values[parameter.name] != on:
                return None
            values[parameter.name] = on
            continue
        if position == len(words) or (parameter.name in values and not parameter.many):
            return None
        try:
            value = _value(parameter, words[position])
        except ValueError:
            return None
        position += 1
        if parameter.many:
            values.setdefault(parameter.name, []).append(value)
        else:
            values[parameter.name] = value
    if not paths:
        return None
    arguments = {parameter.name: values.get(parameter.name, parameter.default) for parameter in options}
    arguments[argument] = paths
    return arguments


def run_plain_rewrite(args: list[str]) -> bool:
    """Run `rewrite` with the arguments of a plain ``rewrite`` command line and exit as typer would (the
    command's exit code; 130 on Ctrl-C, as typer 0.29); False, without running anything, for any other
    line."""
    arguments = direct_arguments(args)
    if arguments is None:
        return False
    from neuron_port.commands.rewrite_run import run_rewrite

    try:
        code = run_rewrite(**arguments)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(code)
