"""The `neuron-port` console script and `python -m neuron_port`: every command line goes to the typer app
cli.py declares (one parser: help, completion and every command), whose option values typer_coercion.py
reads without pydantic and whose usage errors usage_errors.py prints in one line. An interrupt exits 130
and an internal error prints one line instead of a traceback."""

from __future__ import annotations

import gc
import os
import sys

gc.set_threshold(5_000, 1_000, 1_000)  # LibCST's trees live per file: don't re-scan them (bench/README.md, Issue 20)


def main() -> None:
    from neuron_port.commands.console import err

    for stream in (sys.stdout, sys.stderr):  # a file name that is not UTF-8 must not end the run at a print
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    try:
        from neuron_port.cli import PROG_NAME, app
        from neuron_port.commands.usage_errors import run_app

        sys.exit(run_app(app, PROG_NAME))  # values read without pydantic, usage errors in one line
    except KeyboardInterrupt:
        err().print("neuron-port: interrupted; every file is either unchanged or completely rewritten")
        sys.exit(130)
    except Exception as exc:  # never show users a traceback for our own bugs, unless they ask
        if os.environ.get("NEURON_PORT_DEBUG"):
            raise
        err().print(f"neuron-port: internal error: {type(exc).__name__}: {exc} "
                    "(set NEURON_PORT_DEBUG=1 for the traceback, and please report it)",
                    style="bold red", markup=False)
        sys.exit(1)


if __name__ == "__main__":
    main()
