"""`neuron-port rewrite ...` read without typer's dispatch, for the plain command lines a pre-commit hook
and most users type; anything else goes to typer as before.

typer 0.29 coerces every parameter through a pydantic ``TypeAdapter`` that it builds on each run: pydantic
imported and ~15 adapters built, about 0.08 s of a one-file hook's ~1 s. The words are read here from the
command's own declarations (the ``Annotated`` options of the function cli.py declares ``rewrite`` with,
commands/options.py), not from a second list of options, and only in the forms whose meaning is plain:
flags, ``--x/--no-x`` switches, short flags alone (``-q``), an option's value as the next word (a
value that starts with ``-``, or that is not plainly valid for its type, is typer's to judge), paths, and
``--`` (every word after it is a path). Help, ``--opt=value``, ``-j4``, bundled short flags, an unknown or
repeated option, no path, an option-looking word that names a file (option_paths) and any declaration
with more than this knows (a callback, an environment variable, a custom parser) return None: typer then
answers exactly as it always did, error messages included. tests/rewrite/test_rewrite_argv.py holds the values
equal to those typer passes, over every option.
"""

from __future__ import annotations

import inspect
import os
import sys
import re
import typing
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Optional

from neuron_port.commands.option_paths import option_named_files

# A value of these types is read only in its plainest spelling, which every coercion reads the same.
_PLAIN_NUMBER = {int: re.compile(r"[1-9][0-9]{0,17}"), float: re.compile(r"(0|[1-9][0-9]{0,17})(\.[0-9]{1,17})?")}
# the declaration attributes this reader understands, with the value that means "not used"
_UNUSED = {"callback": None, "envvar": None, "parser": None, "click_type": None, "is_eager": False,
           "expose_value": True, "prompt": False, "count": False, "is_flag": None, "flag_value": None,
           "max": None, "clamp": False, "hide_input": False, "confirmation_prompt": False}
# typer's shell completion runs through its own dispatch
_COMPLETION_VARIABLE = "_NEURON_PORT_COMPLETE"


class _Parameter:
    """One parameter of the command: its name, value type, option words and bounds."""

    __slots__ = ("name", "kind", "many", "optional", "words", "off_words", "minimum", "default")

    def __init__(self, name: str, kind: type, many: bool, optional: bool, words: tuple[str, ...],
                 off_words: tuple[str, ...], minimum: Any, default: Any) -> None:
        self.name, self.kind, self.many, self.optional = name, kind, many, optional
        self.words, self.off_words, self.minimum, self.default = words, off_words, minimum, default


def _unwrap(annotation: Any) -> tuple[type, bool, bool]:
    """(element type, is a list, is Optional) of ``Optional[List[T]]``-style annotations; raises
    ValueError for anything else."""
    optional = False
    if typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise ValueError(annotation)
        annotation, optional = args[0], True
    many = typing.get_origin(annotation) is list
    if many:
        (annotation,) = typing.get_args(annotation)
    if not isinstance(annotation, type) or not (annotation in (bool, int, float, str, Path)
                                                or issubclass(annotation, Enum)):
        raise ValueError(annotation)
    return annotation, many, optional


def _declarations(command: Callable[..., Any]) -> Optional[tuple[list[_Parameter], Optional[_Parameter]]]:
    """The command's options and its one path argument, or None when a declaration uses more than this
    module reads."""
    hints = typing.get_type_hints(command, include_extras=True)
    options: list[_Parameter] = []
    argument: Optional[_Parameter] = None
    for name, parameter in inspect.signature(command).parameters.items():
        hint = hints.get(name)
        if typing.get_origin(hint) is not typing.Annotated:
            return None
        annotation, info = typing.get_args(hint)[:2]
        try:
            kind, many, optional = _unwrap(annotation)
        except ValueError:
            return None
        if any(getattr(info, attribute, unused) != unused for attribute, unused in _UNUSED.items()):
            return None
        default = None if parameter.default is inspect.Parameter.empty else parameter.default
        declared = tuple(getattr(info, "param_decls", None) or ())
        if type(info).__name__ == "OptionInfo" and getattr(info, "default", ...) is not ...:
            # in Annotated, an Option's first positional word is its first name (typer's get_params_from_function)
            if not isinstance(info.default, str):
                return None
            declared = (info.default, *declared)
        if type(info).__name__ == "ArgumentInfo":
            if argument is not None or not many or kind is not Path or declared or default is not None:
                return None
            argument = _Parameter(name, kind, many, optional, (), (), None, None)
            continue
        if type(info).__name__ != "OptionInfo" or not declared:
            return None
        words: list[str] = []
        off_words: list[str] = []
        for declaration in declared:
            on, _, off = declaration.partition("/")
            words.append(on)
            if off:
                if kind is not bool:
                    return None
                off_words.append(off)
        if not all(re.fullmatch(r"--[a-z][a-z0-9-]*|-[a-zA-Z]", w) for w in (*words, *off_words)):
            return None
        if kind is bool and (many or default not in (False, None) or (off_words and not optional)):
            return None
        options.append(_Parameter(name, kind, many, optional, tuple(words), tuple(off_words),
                                  getattr(info, "min", None), default))
    return (options, argument) if argument is not None else None


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


def direct_arguments(args: list[str], command: Callable[..., Any]) -> Optional[dict[str, Any]]:
    """The keyword arguments typer would call ``command`` with for ``rewrite`` followed by ``args[1:]``,
    or None when ``args`` is not such a plain command line (typer then dispatches it)."""
    if not args or args[0] != "rewrite" or os.environ.get(_COMPLETION_VARIABLE):
        return None
    words = args[1:]
    if option_named_files(words):
        return None
    declared = _declarations(command)
    if declared is None:
        return None
    options, argument = declared
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
    arguments[argument.name] = paths
    return arguments


def run_plain_rewrite(args: list[str], command: Callable[..., Any]) -> bool:
    """Run ``command`` with the arguments of a plain ``rewrite`` command line and exit as typer would (its
    typer.Exit code; 130 on Ctrl-C, as typer 0.29); False, without running anything, for any other line."""
    import typer

    arguments = direct_arguments(args, command)
    if arguments is None:
        return False
    try:
        command(**arguments)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(0)
