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
