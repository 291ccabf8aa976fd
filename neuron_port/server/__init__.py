"""`neuron-port server`: the rewrite's findings in the editor, as a language server (LSP over stdio).

command.py: the command (imported on every run of the CLI: typer only); protocol.py: the pygls server;
analysis.py: one buffer's findings, errors and fixes (pure static, no pygls); edits.py: a rewrite as
text edits; links.py: a rule's page. docs/editors.md sets editors up.
"""
