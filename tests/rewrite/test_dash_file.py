"""A file named `-` after `--` is a file, not stdin (issue 33, item 3): the hooks' entry ends with `--` and
pre-commit appends the staged names after it, so a committed script named `-` was read as stdin (empty
under pre-commit) and passed unchecked. Through the real CLI, the hook's line as written and with an option
as `--opt=value`; the hook itself: tests/rewrite/test_precommit.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = "#!/usr/bin/env python3\nimport torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"
FIXED = '#!/usr/bin/env python3\nimport torch\nmodel = torch.nn.Linear(2, 2).to("neuron")\n'
STDIN_TEXT = "import torch\ntorch.cuda.synchronize()\n"  # what stdin holds: it must not be read

# the hook's line as written, and with an option in the `--opt=value` form (one parser reads both)
READERS = {"plain": [], "typer": ["--fail-on=error"]}


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "NEURON_PORT_SIMULATE"}


def _rewrite(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "neuron_port", "rewrite", *args], cwd=cwd, env=_env(),
                          input=STDIN_TEXT, capture_output=True, text=True, timeout=300)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "-").write_text(SCRIPT)
    (tmp_path / "-").chmod(0o755)
    (tmp_path / "clean.py").write_text("import torch\n")
    return tmp_path


@pytest.mark.parametrize("reader", sorted(READERS))
def test_dash_after_dashes_is_the_file(project, reader):
    result = _rewrite(project, "--check", "--diff", *READERS[reader], "--", "-", "clean.py")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "-:3:9: NP103" in result.stderr, result.stderr  # the file's finding, shown as `-`
    assert "2 file(s) scanned" in result.stderr, result.stderr
    assert "NP201" not in result.stdout + result.stderr  # stdin was not read
    assert '+model = torch.nn.Linear(2, 2).to("neuron")' in result.stdout


@pytest.mark.parametrize("reader", sorted(READERS))
def test_the_fix_hook_form_rewrites_the_file(project, reader):
    result = _rewrite(project, *READERS[reader], "--", "-")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (project / "-").read_text() == FIXED
    assert "torch.cuda.synchronize" not in result.stdout  # nothing of stdin echoed


def test_dash_alone_before_dashes_is_still_stdin(project):
    result = _rewrite(project, "--check", "-")
    assert result.returncode == 1 and "-:2:1: NP201" in result.stdout, result.stdout + result.stderr
    assert (project / "-").read_text() == SCRIPT


def test_a_missing_dash_file_is_a_usage_error(tmp_path):
    result = _rewrite(tmp_path, "--check", "--", "-")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().endswith("-: no such file or directory"), result.stderr
    assert "Traceback" not in result.stderr
