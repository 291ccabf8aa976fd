"""The HTML report on the command line: `check --html FILE`, and a saved JSON report rendered again
(`python -m neuron_port.commands.html REPORT.json --html FILE`). The page is the file format ``html`` of
neuron_port/reporters/ (``FILE_REPORTERS``), rendered from the JSON report document.

The option checks what it can before the command runs (matplotlib importable, the target writable), so a
long run never ends in a page that cannot be written. The page is written atomically. matplotlib and the
renderer are imported only when a page is asked for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from typing_extensions import Annotated

from neuron_port.commands.console import err

HTML_HELP = ("Also write the report as one self-contained HTML page (charts, no network needed) to this file. "
             "Needs matplotlib: pip install 'neuron-port[html]'.")


def _check_html_target(value: Optional[Path]) -> Optional[Path]:
    """Fail the option, before anything runs, when the page could not be drawn or written."""
    if value is None:
        return None
    from neuron_port.atomic import check_writable
    from neuron_port.reporters.html.charts import ChartsUnavailable, require_matplotlib

    try:
        require_matplotlib()
    except ChartsUnavailable as exc:
        raise typer.BadParameter(str(exc))
    if value.is_dir():
        raise typer.BadParameter(f"{value}: is a folder, not a file")
    try:
        check_writable(value)
    except OSError as exc:
        raise typer.BadParameter(f"{value}: cannot write the page there: {exc.strerror or exc}")
    return value


HtmlOption = Annotated[Optional[Path], typer.Option("--html", metavar="FILE", help=HTML_HELP,
                                                    callback=_check_html_target)]


def write_page(path: Path, document: dict[str, Any]) -> None:
    """Render ``document`` (a JSON report) and write it to ``path`` in one atomic write."""
    from neuron_port.atomic import atomic_write
    from neuron_port.reporters import file_reporter

    atomic_write(path, file_reporter("html")(document).encode("utf-8"))


def write_html(path: Optional[Path], report, code: int) -> int:
    """`check --html`: write the page of ``report`` when asked; the exit code, 2 when it could not be written."""
    if path is None:
        return code
    from neuron_port.reporters.json_report import to_document
    from neuron_port.reporters.protocol import printable_document

    try:
        write_page(path, printable_document(to_document(report)))
    except OSError as exc:
        err().print(f"neuron-port: cannot write {path}: {exc.strerror or exc}", style="bold red", markup=False)
        return 2
    return code


def _fail(message: str) -> typer.Exit:
    err().print(f"neuron-port: error: {message}", style="bold red", markup=False, highlight=False)
    return typer.Exit(2)


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command()
def render_saved(
    report: Path = typer.Argument(..., help="A JSON report written by `neuron-port check -o FILE` "
                                            "(or --output-format json)."),
    html: Path = typer.Option(..., "--html", metavar="FILE", callback=_check_html_target,
                              help="Write the page to this file (atomically). Needs matplotlib: "
                                   "pip install 'neuron-port[html]'."),
) -> None:
    """Render a saved JSON report of `neuron-port check` as the HTML page `check --html` writes."""
    from neuron_port.reporters.html.page import ReportInputError

    try:
        text = report.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(f"{report}: cannot read the report: {getattr(exc, 'strerror', None) or exc}")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(f"{report}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}")
    except RecursionError:  # the reader recurses per level of nesting
        raise _fail(f"{report}: not a JSON report: nested too deeply") from None
    except ValueError as exc:  # an integer beyond the digit limit; a NaN is read as a float (it is checked later)
        raise _fail(f"{report}: not a JSON report: {exc}") from None
    try:
        write_page(html, document)
    except ReportInputError as exc:
        raise _fail(f"{report}: {exc}")
    except RecursionError:
        raise _fail(f"{report}: the report is nested too deeply to draw") from None
    except OSError as exc:
        raise _fail(f"cannot write {html}: {exc.strerror or exc}")


def main() -> None:
    app(prog_name="python -m neuron_port.commands.html")


if __name__ == "__main__":
    main()
