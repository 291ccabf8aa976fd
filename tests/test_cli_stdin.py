"""`neuron-port rewrite -` (ruff's stdin convention) through the real CLI: the rewritten source on stdout
with --fix, findings only without it, the kind, configuration and excludes taken from --stdin-filename,
encodings and newlines kept byte for byte, and the input given back unchanged when it cannot be rewritten."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = b'import torch\nx = torch.zeros(2).cuda()\nmajor, _ = torch.cuda.get_device_capability()\n'
FIXED = b'import torch\nx = torch.zeros(2).to("neuron")\nmajor, _ = torch.cuda.get_device_capability()\n'


def stdin_cli(data: bytes, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NEURON_PORT_SIMULATE"}
    return subprocess.run([sys.executable, "-m", "neuron_port", "rewrite", *args], input=data, cwd=cwd, env=env,
                          capture_output=True, timeout=300)


@pytest.fixture
def project(tmp_path):
    (tmp_path / ".git").mkdir()
    return tmp_path


def test_fix_prints_the_rewritten_source_and_the_findings_on_stderr(project):
    result = stdin_cli(SOURCE, "--fix", "--stdin-filename", "train.py", "-", cwd=project)
    assert result.returncode == 0, result.stderr  # NP202 is a warning; NP103 was fixed
    assert result.stdout == FIXED
    assert b"train.py:3:12: NP202" in result.stderr and b"NP103" not in result.stderr
    again = stdin_cli(result.stdout, "--fix", "--stdin-filename", "train.py", "-", cwd=project)
    assert again.stdout == FIXED  # a second run changes nothing
    assert list(project.iterdir()) == [project / ".git"]  # nothing written to disk


def test_without_fix_only_the_findings(project):
    result = stdin_cli(SOURCE, "--stdin-filename", "train.py", "-", cwd=project)
    assert result.returncode == 1  # the NP103 error is left
    assert result.stdout.startswith(b"train.py:2:5: NP103 [*]") and b"import torch" not in result.stdout
    unnamed = stdin_cli(SOURCE, "-", cwd=project)
    assert unnamed.stdout.startswith(b"-:2:5: NP103")
    as_json = stdin_cli(SOURCE, "--output-format", "json", "--stdin-filename", "t.py", "-", cwd=project)
    assert {f["code"] for f in json.loads(as_json.stdout)["findings"]} == {"NP103", "NP202"}
    fixed_json = stdin_cli(SOURCE, "--fix", "--output-format", "json", "--stdin-filename", "t.py", "-", cwd=project)
    assert fixed_json.stdout == FIXED and json.loads(fixed_json.stderr)["summary"]["fixes_applied"] == 1
    stats = stdin_cli(SOURCE, "--statistics", "--exit-zero", "--stdin-filename", "t.py", "-", cwd=project)
    assert (stats.returncode, stats.stdout) == (
        0, b"1\tNP103\t[*] cuda-method-call\n1\tNP202\t[ ] cuda-api-no-equivalent\n")


def test_diff_prints_the_patch(project):
    result = stdin_cli(SOURCE, "--diff", "--stdin-filename", "src/train.py", "-", cwd=project)
    assert result.returncode == 1
    assert result.stdout.startswith(b"--- a/src/train.py\n+++ b/src/train.py\n")
    assert b'+x = torch.zeros(2).to("neuron")' in result.stdout and b"NP103" in result.stderr


def test_encoding_and_newlines_are_kept(project):
    latin = "# -*- coding: latin-1 -*-\r\nname = 'café'\r\nx = y.cuda()\r\n".encode("latin-1")
    result = stdin_cli(latin, "--fix", "--stdin-filename", "old.py", "-", cwd=project)
    assert result.stdout == latin.replace(b"y.cuda()", b'y.to("neuron")')


def test_the_name_decides_the_kind(project):
    notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# GPU"]},
                          {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                           "source": ["x = y.cuda()\n"]}],
                "metadata": {"kernelspec": {"language": "python", "name": "python3"}}, "nbformat": 4,
                "nbformat_minor": 5}
    text = json.dumps(notebook, indent=1).encode()
    result = stdin_cli(text, "--fix", "--stdin-filename", "explore.ipynb", "-", cwd=project)
    assert json.loads(result.stdout)["cells"][1]["source"] == ['x = y.to("neuron")\n']
    findings = stdin_cli(text, "--stdin-filename", "explore.ipynb", "-", cwd=project)
    assert b"explore.ipynb[cell 2]:1:5: NP103" in findings.stdout
    launch = b"torchrun --nproc_per_node=8 train.py --backend nccl\n"
    shell = stdin_cli(launch, "--fix", "--stdin-filename", "launch.sh", "-", cwd=project)
    assert shell.stdout == b"torchrun --nproc_per_node=8 train.py --backend neuron\n"
    assert b"launch.sh:1:10: NP521" in shell.stderr
    as_python = stdin_cli(launch, "--fix", "--stdin-filename", "launch.py", "-", cwd=project)
    # read as Python it does not parse: an error, and the input is given back
    assert (as_python.returncode, as_python.stdout) == (1, launch) and b"launch.py:1:" in as_python.stderr


def test_configuration_and_excludes_follow_the_name(project):
    sub = project / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[tool.neuron-port]\nselect = ["NP2"]\nexclude = ["gen_*.py"]\n')
    code = b"import torch\nx = y.cuda()\ntorch.cuda.synchronize()\n"
    inside = stdin_cli(code, "--fix", "--stdin-filename", "sub/train.py", "-", cwd=project)
    assert inside.stdout == b"import torch\nx = y.cuda()\ntorch.neuron.synchronize()\n"  # NP1 is not selected there
    outside = stdin_cli(code, "--fix", "--stdin-filename", "train.py", "-", cwd=project)
    assert outside.stdout == b'import torch\nx = y.to("neuron")\ntorch.neuron.synchronize()\n'
    excluded = stdin_cli(code, "--fix", "--stdin-filename", "sub/gen_model.py", "-", cwd=sub.parent)
    assert (excluded.returncode, excluded.stdout, excluded.stderr) == (0, code, b"")
    cli_selected = stdin_cli(code, "--fix", "--ignore", "NP201", "--stdin-filename", "sub/train.py", "-", cwd=project)
    assert cli_selected.stdout == code


def test_input_that_cannot_be_rewritten_is_given_back(project):
    broken = b"x = y.cuda(\n"
    result = stdin_cli(broken, "--fix", "--exit-zero", "--stdin-filename", "b.py", "-", cwd=project)
    assert result.returncode == 1  # an error, even with --exit-zero
    assert result.stdout == broken and b"b.py:1:1: syntax error" in result.stderr
    binary = b"x = y.cuda()\0\n"
    result = stdin_cli(binary, "--fix", "--stdin-filename", "bin.py", "-", cwd=project)
    assert (result.returncode, result.stdout) == (1, binary) and b"not a text file" in result.stderr


@pytest.mark.parametrize("args, message", [
    (("--stdin-filename", "x.py", "a.py"), b"--stdin-filename needs `-`"),
    (("-", "a.py"), b"`-` (stdin) must be the only path"),
    (("--fix", "--check", "-"), b"--fix cannot be combined"),
    (("--fix", "--diff", "-"), b"--fix cannot be combined"),
])
def test_usage_errors(project, args, message):
    (project / "a.py").write_bytes(SOURCE)
    result = stdin_cli(SOURCE, *args, cwd=project)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stdout == b"" and (project / "a.py").read_bytes() == SOURCE


def _reading_stdin(pid: int) -> bool:
    """The process waits in read(2) on its stdin (Linux's /proc/PID/syscall: number 0 = read, first arg 0)."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return fields[:2] == ["0", "0x0"]


@pytest.mark.skipif(not Path("/proc/self/syscall").exists(), reason="needs Linux's /proc/PID/syscall")
def test_ctrl_c_while_waiting_for_input_says_so(project):
    """`neuron-port rewrite -` typed by mistake, then Ctrl-C while it waits for its input: one line that says
    it was interrupted and exit 130, as a Ctrl-C during a run (typer turned it into a silent 130)."""
    import signal
    import time

    env = {k: v for k, v in os.environ.items() if k != "NEURON_PORT_SIMULATE"}
    proc = subprocess.Popen([sys.executable, "-m", "neuron_port", "rewrite", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=project, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while not _reading_stdin(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends Ctrl-C: to the process group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.decode().count("neuron-port: interrupted") == 1, err
    assert b"Traceback" not in err and out == b""
