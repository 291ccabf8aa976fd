"""Usage errors in one line, in neuron-port's words (issue 38 item 2).

typer (0.29) checks each value through a pydantic ``TypeAdapter`` and click prints a usage error as four
lines (usage, a hint, a blank line, ``Error: Invalid value for '--jobs' / '-j': Input should be greater
than or equal to 1``). entry.py runs the typer app with ``standalone_mode=False`` and hands every
``click.UsageError`` here: one line ``neuron-port: error: --option: why (`neuron-port COMMAND -h` lists the options)``
on stderr and exit 2, as the errors the commands raise themselves (console.print_usage_error). A value
error is worded from the pydantic error under it (its type and bounds), never from pydantic's text.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

# pydantic's error types -> our words (ctx fields in braces); the rest keep click's or typer's message
_WORDS = {
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be more than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "int_parsing": "not a whole number",
    "int_from_float": "not a whole number",
    "float_parsing": "not a number",
    "bool_parsing": "not a yes/no value (true, false, 1, 0)",
    "missing": "a value is needed",
}


def _number(value: Any) -> str:
    return format(value, "g") if isinstance(value, float) else str(value)


def value_words(cause: Optional[BaseException], fallback: str) -> str:
    """Why a value was refused: from the pydantic ``ValidationError`` typer raised it from, else
    ``fallback`` (the message of a check typer or click made itself) without pydantic's prefix."""
    errors = getattr(cause, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
        except Exception:  # not pydantic's ValidationError after all
            first = None
        if first is not None:
            kind, ctx, given = first.get("type"), first.get("ctx") or {}, first.get("input")
            shown = f" (got {given!r})" if isinstance(given, str) else ""
            if kind in _WORDS:
                return _WORDS[kind].format(**{k: _number(v) for k, v in ctx.items()}) + shown
            if kind == "value_error" and "error" in ctx:
                return str(ctx["error"]).rstrip(".")
    text = fallback.rstrip(".")
    return text.split(", ", 1)[1] if text.startswith("Value error, ") else text


def _click_exceptions() -> Any:
    """click's exceptions module as typer raises them: typer 0.29 vendors click (typer._click), older
    releases in pyproject's range use click itself."""
    try:
        from typer._click import exceptions
    except ImportError:
        from click import exceptions  # type: ignore[no-redef]
    return exceptions


def _abort() -> type:
    try:
        from typer.exceptions import Abort
    except ImportError:
        from click.exceptions import Abort  # type: ignore[no-redef]
    return Abort


def one_line(exc: Any) -> str:
    """The message of a ``click.UsageError`` as one line: the option and why, and the command's help."""
    exceptions = _click_exceptions()
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "neuron-port"
    if isinstance(exc, exceptions.BadParameter) and not isinstance(exc, exceptions.MissingParameter):
        param = exc.param
        words = [w for w in (getattr(param, "opts", None) or []) if w.startswith("--")] if param else []
        name = words[0] if words else (exc.param_hint or getattr(param, "name", None) or "value")
        message = f"{name}: {value_words(exc.__cause__, exc.message)}"
    else:  # click's own words: 'No such option: --bogus', "Missing argument 'PATH...'", ...
        message = " ".join(exc.format_message().split()).rstrip(".")
    return f"{message} (`{command} -h` lists the options)"


def run_app(app: Any, prog_name: str) -> int:
    """Run the typer app as click's standalone mode does, but with usage errors in one line; the exit code."""
    from neuron_port.commands.typer_coercion import install

    install()  # the options' values read without pydantic
    click_exceptions = _click_exceptions()

    try:
        code = app(prog_name=prog_name, standalone_mode=False)
    except click_exceptions.NoArgsIsHelpError as exc:  # `neuron-port` alone (no_args_is_help): the help
        exc.show()
        return exc.exit_code
    except click_exceptions.UsageError as exc:
        from neuron_port.commands.console import print_usage_error

        print_usage_error(one_line(exc))
        return 2
    except click_exceptions.ClickException as exc:  # e.g. a file click could not open
        exc.show()
        return exc.exit_code
    except _abort():
        print("Aborted!", file=sys.stderr)
        return 1
    code = code if isinstance(code, int) else 0
    if code == 130:
        from neuron_port.commands.console import interrupt_said, say_interrupted

        if not interrupt_said():  # typer's own exit for a KeyboardInterrupt the command did not handle
            say_interrupted("neuron-port: interrupted (Ctrl-C)")  # before or after the command's work
    return code
