"""typer made cheap: the values of neuron-port's options coerced without pydantic.

typer 0.29 coerces each parameter through a pydantic ``TypeAdapter`` that it builds on the run (pydantic
imported and an adapter built per parameter: ~0.08 s of a one-file hook, bench/README.md). neuron-port's
options have plain types only (str, int, float, bool, Path, a str Enum of choices, lists of those; a lower
bound), so ``install`` gives typer's parameter a coercion of its own for exactly those: the same values
typer's adapters give, refusals worded as neuron-port words them (usage_errors.py). A parameter of any
other type (a parser, a file, a tuple, ...) keeps typer's coercion. Installed by ``usage_errors.run_app``
before the app runs; a typer without this hook (``_TyperParameter.get_runtime_param``) is left as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Optional, get_args, get_origin

_INTEGER = re.compile(r"\s*[+-]?[0-9](?:_?[0-9])*(?:\.0+)?\s*")  # pydantic's lax int: `2.00` is 2, `2.` is not
_TRUE = {"true", "1", "yes", "y", "on", "t"}
_FALSE = {"false", "0", "no", "n", "off", "f"}
_installed = False
typer_get_runtime_param: Any = None  # typer's own, once install() replaced it


def _bounded(kind: type, minimum: Optional[float], maximum: Optional[float]) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        if isinstance(value, kind) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and kind is int:
            if not _INTEGER.fullmatch(value):
                raise ValueError(f"not a whole number (got {value!r})")
            number = int(value.strip().split(".")[0])
        elif isinstance(value, (str, int)) and kind is float and not isinstance(value, bool):
            try:
                if not str(value).isascii():  # float() reads other scripts' digits, pydantic does not
                    raise ValueError
                number = float(value)
            except ValueError:
                raise ValueError(f"not a number (got {value!r})") from None
        else:
            raise ValueError(f"not a {'whole number' if kind is int else 'number'} (got {value!r})")
        shown = value if isinstance(value, str) else str(value)
        if minimum is not None and number < minimum:
            raise ValueError(f"must be at least {format(minimum, 'g')} (got {shown!r})")
        if maximum is not None and number > maximum:
            raise ValueError(f"must be at most {format(maximum, 'g')} (got {shown!r})")
        return number
    return read


def _choice(kind: type[Enum]) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        try:
            return kind(value)
        except ValueError:
            names = ", ".join(repr(member.value) for member in kind)
            raise ValueError(f"{value!r} is not one of {names}") from None
    return read


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"not a yes/no value (got {value!r})")


def _leaf(annotation: Any, info: Any) -> Optional[Callable[[Any], Any]]:
    """The reader of one value of ``annotation``, or None when it is not one of the plain types."""
    if getattr(info, "parser", None) is not None or getattr(info, "click_type", None) is not None:
        return None
    if annotation is bool:
        return _flag
    if annotation in (int, float):
        return _bounded(annotation, info.min, info.max)
    if getattr(info, "min", None) is not None or getattr(info, "max", None) is not None:
        return None
    if annotation is str:
        return lambda value: value if isinstance(value, str) else str(value)
    if annotation is Path:
        if any(getattr(info, flag, None) for flag in ("exists", "resolve_path", "writable")) \
                or getattr(info, "file_okay", True) is False or getattr(info, "dir_okay", True) is False \
                or getattr(info, "path_type", None) not in (None, Path):
            return None  # typer's path checks (`readable` is only checked with `exists`)
        return lambda value: value if isinstance(value, Path) else Path(value)
    if isinstance(annotation, type) and issubclass(annotation, Enum) and issubclass(annotation, str) \
            and getattr(info, "case_sensitive", True):
        return _choice(annotation)
    return None


def install() -> bool:
    """Give typer's parameters the plain coercion where their type allows; whether typer has the hook."""
    global _installed
    if _installed:
        return True
    try:
        from typer import core
        from typer._coercion import RuntimeParam
        BadParameter = core._click.exceptions.BadParameter
        original = core._TyperParameter.get_runtime_param
    except (ImportError, AttributeError):
        return False

    @dataclass(frozen=True)
    class PlainRuntimeParam(RuntimeParam):  # type: ignore[misc, valid-type]
        read: Callable[[Any], Any]
        many: bool

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                if self.many:
                    return [self.read(item) for item in (value if isinstance(value, (list, tuple)) else [value])]
                return self.read(value)
            except ValueError as exc:
                raise BadParameter(str(exc), ctx=ctx, param=param) from None

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            descriptor = self.type_descriptor
            annotation, many = descriptor.annotation, False
            if get_origin(annotation) is list and len(get_args(annotation)) == 1:
                annotation, many = get_args(annotation)[0], True
            read = None if descriptor.file_annotation is not None else _leaf(annotation, descriptor.parameter_info)
            if read is None:
                return original(self)
            self._runtime_param = PlainRuntimeParam(parameter_info=descriptor.parameter_info,
                                                    annotation=descriptor.annotation, read=read, many=many)
        return self._runtime_param

    global typer_get_runtime_param
    typer_get_runtime_param = original
    core._TyperParameter.get_runtime_param = get_runtime_param
    _installed = True
    return True
