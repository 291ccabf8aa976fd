"""How the commands' help shows arguments: by their metavar (PATH..., CODE), with no type.

typer's own rendering of arguments changes between releases (``{paths}...``, ``PATH... <list[Path]>``
in the usage line and the Arguments section); this class writes both from the metavar alone, so the help
reads the same under every typer in the tested range. Options keep typer's rendering (their metavars
are set in commands/options.py).
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand


class PlainHelpCommand(TyperCommand):
    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        return pieces + [_metavar(p) for p in self.get_params(ctx) if _is_argument(p)]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        params = self.get_params(ctx)
        arguments = [(_metavar(p), (getattr(p, "help", None) or "") + ("  [required]" if p.required else ""))
                     for p in params if _is_argument(p)]
        options = [record for p in params if not _is_argument(p)
                   for record in [p.get_help_record(ctx)] if record is not None]
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _is_argument(param: Any) -> bool:
    # by name, not class: recent typer releases vendor their own click (typer._click), older ones use click
    return getattr(param, "param_type_name", None) == "argument"


def _metavar(argument: Any) -> str:
    return argument.metavar or (argument.name or "").upper()
