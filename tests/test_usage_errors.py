"""Usage errors in one line, in neuron-port's words, exit 2 (issue 38 item 2): a table of bad options for
every command, run through the real console entry point. typer 0.29 checks values through pydantic and
click prints four lines (usage, hint, blank, `Error: Invalid value for '--jobs' / '-j': Input should be
greater than or equal to 1`); none of that wording may reach a user."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from neuron_port.commands.usage_errors import value_words

# (command line, words the one line must hold)
BAD = [
    (["rewrite", "--output-format", "xml", "."], ["--output-format", "'xml'", "'sarif'"]),
    (["rewrite", "--jobs", "0", "."], ["--jobs", "at least 1"]),
    (["rewrite", "--max-file-size", "-1", "."], ["--max-file-size", "at least 0"]),
    (["rewrite", "--fail-on=bad", "."], ["--fail-on", "'bad'", "'never'"]),
    (["rewrite", "--bogus", "."], ["--bogus"]),
    (["rewrite"], ["PATH"]),
    (["check", ".", "--nproc", "0", "--", "python", "x.py"], ["--nproc", "at least 1"]),
    (["check", ".", "--timeout", "soon", "--", "python", "x.py"], ["--timeout", "not a number"]),
    (["check", ".", "--output-format", "xml", "--", "python", "x.py"], ["--output-format", "'xml'"]),
    (["rules", "--output-format", "yaml"], ["--output-format", "'yaml'"]),
    (["explain"], ["CODE"]),
    (["explain", "NP101", "NP103"], ["NP103"]),
    (["doctor", "--bogus"], ["--bogus"]),
    (["estimate"], ["REPORT"]),
    (["server", "--bogus"], ["--bogus"]),
    (["bogus"], ["bogus"]),
]
FOREIGN = ("Value error", "Input should", "Invalid value for", "Usage:", "Try '", "pydantic", "Traceback")


def test_every_commands_bad_options_are_one_line_in_our_words(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NEURON_PORT_SIMULATE")}
    runs = [subprocess.Popen([sys.executable, "-m", "neuron_port", *args], cwd=tmp_path, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for args, _ in BAD]
    for (args, words), run in zip(BAD, runs):
        out, err = run.communicate(timeout=120)
        lines = err.splitlines()
        assert (run.returncode, out, len(lines)) == (2, "", 1), (args, out, err)
        assert lines[0].startswith("neuron-port: error: "), (args, err)
        assert all(word in lines[0] for word in words), (args, err)
        assert not any(foreign in lines[0] for foreign in FOREIGN), (args, err)
        if args[0] != "bogus":
            assert f"neuron-port {args[0]} -h" in lines[0], (args, err)


@pytest.mark.parametrize("kind, ctx, given, words", [
    ("greater_than_equal", {"ge": 1}, "0", "must be at least 1 (got '0')"),
    ("less_than_equal", {"le": 10000.0}, "20000", "must be at most 10000 (got '20000')"),
    ("int_parsing", {}, "4.5", "not a whole number (got '4.5')"),
    ("value_error", {"error": ValueError("'xml' is not one of 'text', 'json'.")}, "xml",
     "'xml' is not one of 'text', 'json'"),
])
def test_a_refused_value_is_worded_from_pydantics_error_type(kind, ctx, given, words):
    class Refusal(Exception):  # the shape of pydantic's ValidationError, as typer raises BadParameter from it
        def errors(self):
            return [{"type": kind, "ctx": ctx, "input": given, "msg": "Input should be something pydantic says"}]

    assert value_words(Refusal(), "Input should be something pydantic says") == words
