"""The text location format is flake8's and ruff's, `path:line:col: CODE message` (issue 38, item 2):
every line of the CLI's text output that names a place, and every problem-matcher regex the README and
docs/ give, match `^(.+):(\\d+):(\\d+): (NP\\d+) `, so GitHub problem matchers, reviewdog's
`%f:%l:%c: %m` and vim's errorformat read the findings at their line and column."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO

FLAKE8 = re.compile(r"^(.+):(\d+):(\d+): (NP\d+) ")
PLACE = re.compile(r"[^\s:]+(\[cell \d+\])?:\d+:\d+")  # a line that names a place
SOURCE = ('import torch\nx = torch.zeros(2).cuda()\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n'
          "major, _ = torch.cuda.get_device_capability()\n")
NOTEBOOK = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# explore"]},
                      {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                       "source": ["import torch\n", "y = torch.ones(1).cuda()\n"]}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _located(text: str) -> list[str]:
    return [line for line in text.splitlines() if PLACE.search(line) and not line.startswith(("+", "-", "@"))]


def test_text_output_and_documented_matchers_read_every_location(tmp_path: Path, cli) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(SOURCE)
    (tmp_path / "explore.ipynb").write_text(json.dumps(NOTEBOOK))
    (tmp_path / "run.sh").write_text("#!/bin/bash\nCUDA_VISIBLE_DEVICES=0 python train.py\n")
    hook = cli("rewrite", "--check", "--diff", "--verbose", "--", "train.py", "explore.ipynb", "run.sh",
               cwd=tmp_path)  # the pre-commit hook's line: findings on stderr
    plain = cli("rewrite", "--check", ".", cwd=tmp_path)
    stdin = subprocess.run([sys.executable, "-m", "neuron_port", "rewrite", "--check", "--stdin-filename", "train.py",
                            "-"], cwd=tmp_path, input=SOURCE, capture_output=True, text=True, timeout=120)
    matchers = [re.compile(m) for m in _documented_matchers()]
    assert matchers, "the README gives a problem matcher's regex"
    for result in (hook, plain, stdin):
        assert result.returncode == 1, result.stderr
        lines = _located(result.stdout + "\n" + result.stderr)
        assert len(lines) >= 4, result.stdout + result.stderr
        for line in lines:
            found = FLAKE8.match(line)
            assert found, line
            assert all(m.match(line) for m in matchers), line
            path, row, column, code = found.groups()
            assert path in ("train.py", "explore.ipynb[cell 2]", "run.sh") and int(row) >= 1 and int(column) >= 1
    assert any(line.startswith("explore.ipynb[cell 2]:2:") for line in _located(plain.stdout)), plain.stdout
    assert any(line.startswith("run.sh:2:1: NP5") for line in _located(plain.stdout)), plain.stdout


def _documented_matchers() -> list[str]:
    """Every backticked regex in the README and docs/ that captures a finding's code (`(NP\\d+)`)."""
    texts = [(REPO / "README.md").read_text()] + [p.read_text() for p in sorted((REPO / "docs").glob("*.md"))]
    return [m for text in texts for m in re.findall(r"`(\^[^`]*\(NP\\d\+\)[^`]*)`", text)]
