"""One parser for the command line (issue 38 item 2): typer reads every line, and neuron-port's option
values are read without pydantic (neuron_port/commands/typer_coercion.py). Over the lines the pre-commit hook
and users type, each option alone and in pairs, the command gets exactly the arguments typer's own
(pydantic) coercion gives it, of the same types; a value typer refuses is refused too; and the hook's line
imports no pydantic."""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest
import typer
from typer import core

from neuron_port import cli
from neuron_port.commands import typer_coercion
from neuron_port.commands.option_paths import PathsAfterDashes

typer_coercion.install()
PLAIN = core._TyperParameter.get_runtime_param
TYPERS_OWN = typer_coercion.typer_get_runtime_param


def _arguments(args: list[str], reader) -> object:
    """What typer calls cli.rewrite with for `rewrite ARGS`, values read by ``reader`` (a recorder with
    its signature, declared the way cli.py declares rewrite); the exception when the line is refused."""
    seen: dict = {}

    @functools.wraps(cli.rewrite)
    def record(**kwargs) -> None:
        seen.update(kwargs)

    app = typer.Typer(pretty_exceptions_enable=False, rich_markup_mode=None)
    app.callback()(lambda: None)
    app.command("rewrite", cls=PathsAfterDashes)(record)
    saved = core._TyperParameter.get_runtime_param
    core._TyperParameter.get_runtime_param = reader
    try:
        app(["rewrite", *args], prog_name="neuron-port", standalone_mode=False)
    except Exception as exc:  # click's UsageError (BadParameter, NoSuchOption, ...)
        return "refused"
    finally:
        core._TyperParameter.get_runtime_param = saved
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
    # each option beside the next of another parameter (values are read one by one: pairs of every kind of
    # value suffice, not every pair), and a repeated option of a list
    words = SINGLE_WORDS + WITH_VALUES
    lines += [a + b + ["x.py"] for a, b in zip(words, words[3:] + words[:3]) if _parameter(a[0]) != _parameter(b[0])]
    lines += [a + a + ["x.py"] for a in WITH_VALUES if a[0] in MULTIPLE]
    lines += [["x.py", "--check", "--diff", "-q", "--no-cache"], ["--check", "--diff", "--", "x.py", "y.py"],
              ["x.py", "--select", "NP1", "y.py", "--check"]]
    return lines


@pytest.mark.parametrize("args", _lines(), ids=" ".join)
def test_a_line_gets_the_arguments_typers_own_coercion_gives(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no word names a file here (an option-looking file name is refused)
    plain, expected = _arguments(args, PLAIN), _arguments(args, TYPERS_OWN)
    assert plain == expected and plain != "refused"
    assert {name: type(value) for name, value in plain.items()} == \
        {name: type(value) for name, value in expected.items()}


@pytest.mark.parametrize("args", [
    ["--jobs", "02", "a.py"], ["--jobs", " 2", "a.py"], ["--jobs", "+3", "a.py"], ["--max-file-size", "1e3", "a.py"],
    ["--max-file-size", ".5", "a.py"], ["-j", "0", "a.py"], ["--jobs", "-1", "a.py"], ["--jobs", "2.0", "a.py"], ["--jobs", "2.", "a.py"],
    ["--jobs", "1_000", "a.py"], ["--jobs", "1e3", "a.py"], ["--jobs", "\u0663", "a.py"], ["--max-file-size", "1_0", "a.py"],
    ["--max-file-size", "\u0663", "a.py"], ["--max-file-size", "inf", "a.py"],
    ["--jobs", "x", "a.py"], ["--max-file-size", "-1", "a.py"], ["--max-file-size", "abc", "a.py"],
    ["--target", "NEURON", "a.py"], ["--output-format", "xml", "a.py"], ["--fail-on", "", "a.py"],
    ["--select", "", "a.py"], ["", "a.py"], ["--neuron-cores", "0", "a.py"],
])
def test_an_odd_or_bad_value_is_read_or_refused_as_typer_does(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _arguments(args, PLAIN) == _arguments(args, TYPERS_OWN)


def test_the_hook_line_does_not_import_pydantic(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "neuron_port", "rewrite", "--check", "--diff",
                           "-q", "--no-cache", "--jobs=1", "--", "train.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stdout.startswith("--- a/train.py")
    modules = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "neuron_port.commands.entry" in modules and "neuron_port.cli" in modules  # typer reads it
    assert not {m for m in modules if m.split(".")[0] == "pydantic"}
