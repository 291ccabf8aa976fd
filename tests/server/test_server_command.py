"""The `server` command itself, as a user meets it: its help, the one-line error without the lsp extra,
and a static path that never imports torch."""

from __future__ import annotations

import subprocess
import sys

from conftest import run_cli

# the console entry point, run with pygls made unimportable (what an install without the lsp extra has)
WITHOUT_PYGLS = ("import runpy, sys; sys.modules['pygls'] = None; sys.argv = ['neuron-port', 'server']; "
                 "runpy.run_module('neuron_port', run_name='__main__')")
# the server's modules and one analysis of a CUDA buffer, then the modules that were imported
STATIC = ("import sys; from neuron_port.config import Settings; import neuron_port.server.protocol; "
          "from neuron_port.server.analysis import analyse; "
          "a = analyse('import torch\\nx = torch.ones(2).cuda()\\n', 'train.py', Settings()); "
          "print([p.code for p in a.problems], 'torch' in sys.modules)")


def test_server_help_explains_itself():
    result = run_cli("server", "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "Language Server Protocol over stdin/stdout" in text
    assert "docs/editors.md" in text and "pip install 'neuron-port[lsp]'" in text


def test_without_pygls_one_line_says_what_to_install():
    result = subprocess.run([sys.executable, "-c", WITHOUT_PYGLS], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "pip install 'neuron-port[lsp]'" in result.stderr


def test_the_server_analysis_never_imports_torch():
    result = subprocess.run([sys.executable, "-c", STATIC], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["['NP103']", "False"]
