"""The `server` command, registered on the app by cli.py. Imported on every run of the CLI: nothing but
typer here; pygls (the `lsp` extra) is imported when the command runs."""

from __future__ import annotations

import sys

import typer

INSTALL_HINT = "neuron-port: error: `neuron-port server` needs pygls 2 (the lsp extra): pip install 'neuron-port[lsp]'"


def server(
    stdio: bool = typer.Option(False, "--stdio", help="Talk LSP over stdin/stdout (the default and only "
                                                     "transport; accepted because LSP clients pass it)."),
) -> None:
    """Run the language server: the rewrite's findings as diagnostics while you edit.

    Speaks the Language Server Protocol over stdin/stdout; an editor starts it (docs/editors.md: VS Code,
    Neovim, Helix). Each open buffer is checked as `neuron-port rewrite --check` checks the file, on open,
    on save and shortly after each edit, with the project's [tool.neuron-port] (its excludes included).
    Diagnostics carry the rule code, severity and a link to the rule's page; code actions apply each
    safe fix, all safe fixes of the file, or an unsafe fix (labelled unsafe). The rules stay loaded between
    edits. Needs the lsp extra: pip install 'neuron-port[lsp]'.
    """
    del stdio  # stdio is the only transport
    try:
        from pygls.lsp.server import LanguageServer  # noqa: F401  (pygls 2: the server class lives here)
    except ImportError:
        sys.stderr.write(INSTALL_HINT + "\n")
        raise typer.Exit(2)
    from neuron_port.server.protocol import serve

    serve()
