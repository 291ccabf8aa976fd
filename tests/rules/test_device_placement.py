"""NP1xx beyond the per-rule examples: device strings with NP201 on the same line, aliases, multi-backend
chains (with every rule enabled too)."""

from __future__ import annotations

import textwrap

from neuron_port.rules.registry import all_rules
from rule_runs import rules_by_code as _rules, run_rules as _run


# -- device strings next to NP201 ------------------------------------------------------------------

def test_ternary_with_np201_neuron():
    out = _run("import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n", _rules("NP101", "NP201"))
    assert out.code == "import torch\ndevice = 'neuron' if torch.neuron.is_available() else 'cpu'\n"


def test_ternary_with_np201_accelerator():
    out = _run(
        "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n",
        _rules("NP101", "NP201"),
        target="accelerator",
    )
    assert out.code == (
        "import torch\ndevice = torch.accelerator.current_accelerator().type "
        "if torch.accelerator.is_available() else 'cpu'\n"
    )


def test_ternary_with_all_rules():
    out = _run("import torch as th\ndev = th.device('cuda' if th.cuda.is_available() else 'cpu')\n", all_rules())
    assert out.code == "import torch as th\ndev = th.device('neuron' if th.neuron.is_available() else 'cpu')\n"


# -- aliases ---------------------------------------------------------------------------------------

def test_alias_guard_from_import():
    src = "from torch.cuda import is_available\ndevice = 'cuda' if is_available() else 'cpu'\n"
    out = _run(src, _rules("NP101"), target="accelerator")
    assert "current_accelerator().type if is_available()" in out.code
    assert not any(f.fix.safety == "unsafe" for f in out.findings if f.code == "NP101")


def test_legacy_type_through_alias():
    out = _run("from torch import cuda\nx = cuda.FloatTensor([1.0])\n", _rules("NP105"))
    assert 'torch.tensor([1.0], dtype=torch.float32, device="neuron")' in out.code
    assert "import torch" in out.code


# -- multi-backend code ----------------------------------------------------------------------------

def test_multibackend_chain_untouched_by_all_rules():
    src = """\
    if device.type == 'cuda':
        a()
    elif device.type == 'neuron':
        b()
    """
    out = _run(src, all_rules())
    assert out.code == textwrap.dedent(src)
    assert any(f.code == "NP102" and not f.fix.applied for f in out.findings)


# -- issue 20: a fix that flips a device test is safe only when what the test decides is portable ------

_FP8_CONFIG = textwrap.dedent('''\
    import torch


    def configure(args):
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if device.type != "cuda":
            print("FP8 training requires CUDA, ignoring --fp8")
            args.fp8 = False
        if device.type == "cuda":
            torch.cuda.synchronize()
        return device
    ''')


def test_a_flip_of_a_test_deciding_an_fp8_warning_needs_unsafe_fixes(tmp_path, cli):
    """Through the CLI: the FP8 test stays CUDA's in a plain rewrite (its finding names the print), the
    portable test and the device choice are rewritten; `--unsafe-fixes` flips the FP8 test too."""
    path = tmp_path / "config.py"
    path.write_text(_FP8_CONFIG)
    out = cli("rewrite", str(path), cwd=tmp_path)
    text = path.read_text()
    assert 'if device.type != "cuda":' in text and 'if device.type == "neuron":' in text, text
    assert 'torch.device("neuron" if torch.neuron.is_available() else "cpu")' in text
    assert "[unsafe fix]" in out.stdout and "guards `print(\"FP8" in out.stdout
    cli("rewrite", "--unsafe-fixes", str(path), cwd=tmp_path)
    assert 'if device.type != "neuron":' in path.read_text()
