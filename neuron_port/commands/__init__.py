"""The pieces of the `neuron-port` command line, one module per command or concern (as ruff's
crates/ruff/src/commands/); neuron_port/cli.py declares the commands with them and stays the only module
that does.

- ``entry.py``: the console script (and ``python -m neuron_port``): every line goes to cli.py's typer app,
  the one parser of the command line
- ``typer_coercion.py``: typer made cheap: option values read without pydantic; ``usage_errors.py``:
  usage errors in one line, in our words
- ``option_specs.py``: the options of `rewrite` (and those `check` shares) as plain data; ``options.py``
  declares them to typer from it; ``rewrite_run.py`` runs `rewrite`; ``exit_codes.py``: the exit-code rule
- ``options.py``: the option and argument types as typer declares them (names, metavars, help)
- ``check_args.py``: `check`'s `--` (only what follows it is the command to run)
- ``help.py``: how the help shows arguments (by metavar, the same under every typer in the tested range)
- ``console.py``: the stdout and stderr consoles, the scan's progress bar, `check`'s spinner and the
  program's output passed on live
- ``stdin.py``: `rewrite -` (one file from stdin, for editors)
- ``reference.py``: `rules`, `explain` and `doctor`
- ``estimate.py``: `estimate REPORT.json` and `check`'s --price, --cores and --tokens-per-step
- ``html.py``: `check --html FILE` and `python -m neuron_port.commands.html` (a saved report as a page)

The output formats themselves are neuron_port/reporters/. Import nothing here: cli.py loads the modules
it needs, and `rewrite` never loads what only another command needs.
"""
