"""Scripts without a suffix (what pre-commit hands over for an executable `bin/launch`) are read by their
shebang: a bash script gets the launch-file rules, a Python one the Python rules; through the real CLI,
by path and on stdin, and the shebang parser on its own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from neuron_port.rewrite.sources import file_kind, shebang_kind

LAUNCH = "torchrun --nproc_per_node=8 train.py --backend nccl\n"


@pytest.mark.parametrize("head, kind", [
    ("#!/bin/bash\n", "shell"), ("#!/bin/sh -e\n", "shell"), ("#!/usr/bin/env bash\n", "shell"),
    ("#!/usr/bin/env -S bash -eu\n", "shell"), ("#!/usr/bin/env FOO=1 zsh\n", "shell"), ("#! /bin/dash\n", "shell"),
    ("#!/usr/bin/python3.12\n", "python"), ("#!/usr/bin/env python3 -u\n", "python"), ("#!/usr/bin/make -f\n", "make"),
    ("#!/usr/bin/perl\n", None), ("import torch\n", None), ("#!\n", None), ("", None),
])
def test_shebang_kind(head, kind):
    assert shebang_kind(head) == kind


def test_the_suffix_wins_over_the_shebang(tmp_path):
    script = tmp_path / "tool.py"
    script.write_text("#!/bin/bash\n")
    assert file_kind(str(script)) == "python"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert file_kind(str(fifo)) == "python"  # not opened for reading: a FIFO would wait for a writer
    assert file_kind("missing") == "python"


def test_suffix_less_scripts_given_by_path(tmp_path, cli):
    (tmp_path / ".git").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "launch").write_text("#!/usr/bin/env bash\nset -e\n" + LAUNCH)
    (bin_dir / "train").write_text("#!/usr/bin/env python3\nimport torch\nx = torch.ones(2).cuda()\n")
    (bin_dir / "plain").write_text("import torch\nx = torch.ones(2).cuda()\n")
    result = cli("rewrite", "bin/launch", "bin/train", "bin/plain", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (bin_dir / "launch").read_text() == "#!/usr/bin/env bash\nset -e\n" + LAUNCH.replace("nccl", "neuron")
    assert (bin_dir / "train").read_text().endswith('x = torch.ones(2).to("neuron")\n')
    assert (bin_dir / "plain").read_text().endswith('x = torch.ones(2).to("neuron")\n')
    assert "bin/launch:3:10: NP521" in result.stdout  # the launch rules ran on it
    again = cli("rewrite", "--check", "--select", "NP103,NP523", "bin/launch", "bin/train", cwd=tmp_path)
    assert again.returncode == 0, again.stdout  # a second run changes nothing


def test_suffix_less_script_on_stdin(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NEURON_PORT_SIMULATE"}
    script = ("#!/bin/bash\n" + LAUNCH).encode()
    result = subprocess.run([sys.executable, "-m", "neuron_port", "rewrite", "--fix", "--stdin-filename", "launch",
                             "-"], input=script, cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert result.stdout == script.replace(b"nccl", b"neuron"), result.stderr
