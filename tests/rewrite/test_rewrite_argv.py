"""The plain `rewrite` command lines read without typer (neuron_port/commands/rewrite_argv.py) give the
command exactly the arguments typer gives it, and every other line is left to typer."""

from __future__ import annotations

import functools
import inspect
import itertools
import subprocess
import sys
import typing

import pytest
import typer

from neuron_port import cli
from neuron_port.commands.option_paths import PathsAfterDashes
from neuron_port.commands.option_specs import REWRITE_PARAMETERS
from neuron_port.commands.options import declared
from neuron_port.commands.rewrite_argv import direct_arguments


def _typer_arguments(args: list[str]) -> dict:
    """What typer calls cli.rewrite with for `rewrite ARGS` (a recorder with its signature, declared the
    way cli.py declares rewrite)."""
    seen: dict = {}

    @functools.wraps(cli.rewrite)
    def record(**kwargs) -> None:
        seen.update(kwargs)

    app = typer.Typer(pretty_exceptions_enable=False, rich_markup_mode=None)
    app.callback()(lambda: None)
    app.command("rewrite", cls=PathsAfterDashes)(record)
    app(["rewrite", *args], prog_name="neuron-port", standalone_mode=False)
    return seen


SINGLE_WORDS = [["--diff"], ["--check"], ["--fix"], ["--statistics"], ["--exit-zero"], ["--quiet"], ["-q"],
                ["--verbose"], ["-v"], ["--cache"], ["--no-cache"], ["--unsafe-fixes"], ["--no-unsafe-fixes"]]
WITH_VALUES = [["--select", "NP1"], ["--select", "NP101,NP2", "--select", "ALL"], ["--ignore", "NP7"],
               ["--extend-select", "NP103"], ["--extend-ignore", "NP8", "--extend-ignore", "NP9"],
               ["--target", "accelerator"], ["--target", "neuron"], ["--output-format", "json"],
               ["--output-format", "github"], ["--jobs", "3"], ["-j", "1"], ["--exclude", "build/*"],
               ["--fail-on", "never"], ["--fail-on", "warning"], ["--max-file-size", "0"],
               ["--max-file-size", "2.5"], ["--max-file-size", "10"], ["--config", "conf/pyproject.toml"],
               ["--instance", "trn1.32xlarge"], ["--neuron-cores", "8"], ["--stdin-filename", "x.py"]]
PATHS = [["a.py"], ["src", "b.py"], ["-"], ["--", "a.py", "--exclude=*.py"], ["a.py", "--", "-q"], ["--", "-", "a.py"]]


SAME = {"-q": "--quiet", "-v": "--verbose", "-j": "--jobs", "--no-cache": "--cache",
        "--no-unsafe-fixes": "--unsafe-fixes"}
MULTIPLE = {"--select", "--ignore", "--extend-select", "--extend-ignore", "--exclude"}


def _parameter(word: str) -> str:
    return SAME.get(word, word)


def _lines() -> list[list[str]]:
    lines = [words + paths for words in SINGLE_WORDS + WITH_VALUES for paths in PATHS[:2]]
    lines += [paths for paths in PATHS]
    # two options of different parameters (the same one twice, repeated or switched, is typer's case)
    lines += [a + b + ["x.py"] for a, b in itertools.combinations(SINGLE_WORDS + WITH_VALUES, 2)
              if _parameter(a[0]) != _parameter(b[0]) or (a[0] == b[0] and a[0] in MULTIPLE)]
    lines += [["x.py", "--check", "--diff", "-q", "--no-cache"], ["--check", "--diff", "--", "x.py", "y.py"],
              ["x.py", "--select", "NP1", "y.py", "--check"]]
    return lines


@pytest.mark.parametrize("args", _lines(), ids=" ".join)
def test_a_plain_line_gets_the_arguments_typer_gives(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no word names a file here (an option-looking file name is typer's case)
    direct = direct_arguments(["rewrite", *args])
    assert direct is not None
    expected = _typer_arguments(args)
    assert direct == expected
    assert {name: type(value) for name, value in direct.items()} == \
        {name: type(value) for name, value in expected.items()}


@pytest.mark.parametrize("args", [
    [], ["--check"], ["--help"], ["-h"], ["--select=NP1", "a.py"], ["-j4", "a.py"], ["-qv", "a.py"],
    ["-j", "0", "a.py"], ["--jobs", "02", "a.py"], ["--jobs", "-1", "a.py"], ["--jobs", " 2", "a.py"],
    ["--max-file-size", "1e3", "a.py"], ["--max-file-size", "-1", "a.py"], ["--target", "NEURON", "a.py"],
    ["--output-format", "xml", "a.py"], ["--bogus", "a.py"], ["-j", "2", "-j", "3", "a.py"],
    ["--cache", "--no-cache", "a.py"], ["--select", "--check", "a.py"], ["a.py", "--select"], ["", "a.py"],
    ["--select", "", "a.py"], ["--version"],
])
def test_any_other_line_is_left_to_typer(args):
    assert direct_arguments(["rewrite", *args]) is None


def test_other_commands_and_completion_are_left_to_typer(monkeypatch):
    assert direct_arguments(["check", "."]) is None
    assert direct_arguments(["--version"]) is None
    monkeypatch.setenv("_NEURON_PORT_COMPLETE", "bash_complete")
    assert direct_arguments(["rewrite", "a.py"]) is None


def test_an_option_named_file_before_dashes_is_left_to_typer(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "--check").write_text("x = 1\n")
    assert direct_arguments(["rewrite", "--check", "a.py"]) is None
    assert direct_arguments(["rewrite", "a.py", "--", "--check"]) is not None


def test_cli_declares_rewrite_from_the_plain_data():
    """cli.py's `rewrite` has option_specs' parameters, in its order, with its defaults, each declared as
    options.declared makes it from the data (so typer and the plain reader read the same options)."""
    hints = typing.get_type_hints(cli.rewrite, include_extras=True)
    parameters = list(inspect.signature(cli.rewrite).parameters.values())
    assert [p.name for p in parameters] == [name for name, _, _ in REWRITE_PARAMETERS]
    for parameter, (name, option, default) in zip(parameters, REWRITE_PARAMETERS):
        expected = declared(option)
        assert typing.get_args(hints[name])[0] == typing.get_args(expected)[0], name
        info, made = typing.get_args(hints[name])[1], typing.get_args(expected)[1]
        assert type(info) is type(made) and vars(info) == vars(made), name
        assert parameter.default == (inspect.Parameter.empty if option.argument else default), name


def test_the_hook_line_does_not_import_pydantic(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "neuron_port", "rewrite", "--check", "--diff",
                           "-q", "--no-cache", "--", "train.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stdout.startswith("--- a/train.py")
    modules = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "neuron_port.commands.entry" in modules and "neuron_port.api" in modules
    assert not {m for m in modules if m.split(".")[0] in ("pydantic", "typer", "click")}
    assert "neuron_port.cli" not in modules
