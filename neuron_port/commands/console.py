"""What the command line shows while it works, and where: the stdout and stderr consoles, the scan's
progress bar, the spinner of a `check` run and the program's own output passed on live."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, Optional

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

# rich is imported when a console is first made, not when the CLI loads.
#
# Every console prints text as it is: no emoji codes (rich would turn the `:100:` of `t.py:100:5` into an
# emoji), no markup (a path or message with `[red]` in it), no highlighting. A renderable that wants
# styles carries them itself (rich.text.Text, Text.from_markup(..., emoji=False) of escaped text).
PLAIN = {"emoji": False, "markup": False, "highlight": False}

REFRESH_SECONDS = 0.1


def out() -> "Console":
    from rich.console import Console

    return Console(soft_wrap=True, **PLAIN)


def err() -> "Console":
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True, **PLAIN)


_interrupt_said: list[bool] = [False]


def say_interrupted(message: str) -> None:
    """The one line an interrupted command prints on stderr (usage_errors.run_app prints a generic one
    when a command exits 130 without having said why: typer turns a KeyboardInterrupt outside a command's
    own handling, e.g. Ctrl-C while `rewrite -` waits for its input, into a silent exit 130)."""
    _interrupt_said[0] = True
    err().print(message, markup=False, highlight=False)


def interrupt_said() -> bool:
    return _interrupt_said[0]


def print_usage_error(message: str) -> None:
    """A usage error's line on stderr (the caller exits 2)."""
    err().print(f"neuron-port: error: {message}", style="bold red", markup=False)


@contextmanager
def scan_progress(enabled: bool) -> Iterator[dict]:
    """The progress callbacks of api.rewrite: a bar on stderr while more than one file is scanned."""
    if not enabled:
        yield {}
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # No refresh thread (auto_refresh=False): the scan forks its worker pool while the bar is shown, and
    # fork() in a process with a second thread may deadlock the child (Python 3.12+ warns). The bar is
    # redrawn from the main thread as results arrive, at most every REFRESH_SECONDS.
    with Progress(TextColumn("scanning"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err(), transient=True, auto_refresh=False) as bar:
        task = bar.add_task("scan", total=None, visible=False)
        last_refresh = [0.0]

        def on_files(count: int) -> None:
            bar.update(task, total=count, visible=count > 1, refresh=True)

        def on_result(_result) -> None:
            bar.advance(task)
            now = time.monotonic()
            if now - last_refresh[0] >= REFRESH_SECONDS:
                last_refresh[0] = now
                bar.refresh()

        yield {"on_files": on_files, "on_result": on_result}


def program_output(stdout_to_stderr: bool) -> Callable[[str, str], None]:
    """Where `check` passes the program's output on: its stderr to stderr, its stdout to stdout (or to
    stderr, when stdout carries a JSON/SARIF document). The streams are looked up at each write, so a
    spinner that redirects them keeps its line below the output."""
    def write(stream: str, text: str) -> None:
        target = sys.stderr if stream == "stderr" or stdout_to_stderr else sys.stdout
        target.write(text)
        target.flush()

    return write


@contextmanager
def run_spinner(label: Optional[str]) -> Iterator[dict]:
    """The on_tick callback of api.check: a spinner with the elapsed time on stderr (no label: none)."""
    if label is None:
        yield {}
        return
    with err().status(label) as spinner:
        yield {"on_tick": lambda seconds: spinner.update(f"{label} ({seconds:.0f} s)")}
