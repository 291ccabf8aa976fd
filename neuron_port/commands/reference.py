"""The reference commands: `rules` (the registry), `explain CODE` (a rule's page) and `doctor` (what the
simulator needs). Registered on the app by cli.py."""

from __future__ import annotations

import sys
from enum import Enum

import typer
from neuron_port.commands.console import err, out

# rules/docs.py and the registry's rule classes (LibCST, every rule module) are imported inside the commands:
# cli.py imports this module on every run, `rewrite` included.


ListFormat = Enum("ListFormat", {"text": "text", "json": "json"}, type=str)  # type: ignore[misc]


def list_rules(
    output_format: ListFormat = typer.Option("text", "--output-format", metavar="FORMAT", help="text or json."),
) -> None:
    """List every rule: code, name, severity, fix availability and safety, effort, scope."""
    from neuron_port.rules import docs
    from neuron_port.rules.registry import all_rules

    render = docs.rules_json if output_format.value == "json" else docs.rules_text
    sys.stdout.write(render(all_rules()))


def explain(code: str = typer.Argument(..., metavar="CODE", help="A rule code (NP101) or name.")) -> None:
    """Print a rule's documentation: what it does, why, an example, fix safety, references."""
    from neuron_port.rules import docs
    from neuron_port.rules.registry import UnknownCodeError, rule_by_code

    from neuron_port.reporters.rule_pages import markdown

    try:
        page = markdown(docs.explain_markdown(rule_by_code(code)))  # Markdown's `code`, not reST's ``code``
    except UnknownCodeError as exc:
        err().print(f"neuron-port: error: {exc}", style="bold red", markup=False)
        raise typer.Exit(2)
    console = out()
    if console.is_terminal:
        from rich.markdown import Markdown

        console.print(Markdown(page))
    else:
        sys.stdout.write(page + "\n")


def doctor(
    build: bool = typer.Option(False, "--build", help="Build (or rebuild with --force) the simulator's C++ extension now."),
    force: bool = typer.Option(False, "--force", help="With --build: rebuild even if a cached build exists."),
) -> None:
    """Check what the simulator needs (torch, a C++ compiler, ninja) and optionally prebuild it."""
    from neuron_port.doctor import core_status_line, real_trainium_notes, requirements

    console = out()
    found = requirements()
    for line in [r.line() for r in found] + real_trainium_notes():
        console.print(line, markup=False)
    ok = all(r.found for r in found)
    if not build:
        console.print(core_status_line(), markup=False)
    if build and ok:
        from neuron_backend import build as backend_build

        try:
            console.print(f"simulator extension: {backend_build.build(force=force)}", markup=False)
        except Exception as exc:  # build errors carry their own explanation (BuildError: the compiler's output too)
            details = getattr(exc, "details", None) or str(exc)
            err().print(f"neuron-port: simulator build failed: {details}", style="bold red", markup=False)
            raise typer.Exit(1)
    raise typer.Exit(0 if ok else 1)
