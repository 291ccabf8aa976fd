"""Legacy tensor-type aliases (``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``) are a
device choice tied to their flag (rules/device_placement/legacy_aliases.py, NP105): ported whole with the
flag, or kept whole with it (issue 34, the PyTorch-GAN projects of the real-project scoreboard)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap

from conftest import FIXTURES, run_cli, simulator_env
from neuron_port.api import Settings, rewrite_source

LOSSES = re.compile(r"\[D loss: ([\d.]+)\] \[G loss: ([\d.]+)\] on (\w+)")


def test_a_gan_with_legacy_tensor_types_trains_on_the_device_after_the_default_rewrite(tmp_path, sim_build):
    work = tmp_path / "legacy_tensor_gan"
    shutil.copytree(FIXTURES / "legacy_tensor_gan", work)
    (work / ".git").mkdir()
    original = subprocess.run([sys.executable, "train.py"], cwd=work, capture_output=True, text=True,
                              env=simulator_env(), timeout=120)
    assert original.returncode == 0, original.stderr[-2000:]
    rewritten = run_cli("rewrite", ".", cwd=work)
    assert rewritten.returncode == 0, rewritten.stdout + rewritten.stderr  # nothing left to port
    code = (work / "train.py").read_text().split('"""', 2)[2]  # the code after the module docstring
    assert "torch.cuda" not in code and "Tensor =" not in code, code
    checked = run_cli("check", ".", "--output-format", "json", "--", "python", "train.py", cwd=work,
                      env=simulator_env())
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    report = json.loads(checked.stdout)
    assert report["runtime"]["ops"]["calls"] > 0
    before = LOSSES.findall(original.stdout)
    after = LOSSES.findall(checked.stderr)  # the program's output (stdout carries the JSON report)
    assert len(before) == 3 and {d for *_, d in before} == {"cpu"}
    assert [(d, g) for d, g, _ in after] == [(d, g) for d, g, _ in before]  # the same numbers, on the device
    assert {d for *_, d in after} == {"neuron"}


def _rewrite(source: str) -> tuple[str, list]:
    return rewrite_source(textwrap.dedent(source).lstrip("\n"), path="train.py", settings=Settings())


def test_an_alias_with_a_use_that_has_no_portable_spelling_is_kept_whole_with_its_flag():
    source = """
        import numpy as np
        import torch
        cuda = torch.cuda.is_available()
        Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
        x = Tensor(np.ones((2, 3)))
        ok = isinstance(x, Tensor)
        """
    code, findings = _rewrite(source)
    assert code == textwrap.dedent(source).lstrip("\n")  # nothing half-ported: flag, alias and uses kept
    assert {f.line for f in findings if f.code == "NP105" and not f.fix.applied} == {4, 5, 6}
    assert any("no portable meaning" in f.message for f in findings if f.line == 6)


def test_an_alias_is_kept_with_a_flag_kept_for_another_reason():
    source = """
        import torch
        cuda = torch.cuda.is_available()
        Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
        x = Tensor(2, 3).fill_(1.0)
        if cuda:
            import pynvml
        """
    code, findings = _rewrite(source)
    assert code == textwrap.dedent(source).lstrip("\n")
    assert {f.line for f in findings if f.code == "NP105" and f.fix.available and not f.fix.applied} == {3, 4}


def test_a_flag_assigned_twice_keeps_the_alias():
    code, findings = _rewrite("""
        import torch
        cuda = torch.cuda.is_available()
        Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
        cuda = False
        x = Tensor(2, 3)
        """)
    assert "Tensor(2, 3)" in code and any("assigned more than once" in f.message for f in findings)


def test_a_class_attribute_alias_is_not_removed():
    code, findings = _rewrite("""
        import torch
        cuda = torch.cuda.is_available()
        class Trainer:
            Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
            def noise(self):
                return self.Tensor(2, 3)
        """)
    assert "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor" in code
    assert any(f.code == "NP105" and f.line == 4 and not f.fix.applied for f in findings)


def test_an_alias_named_like_the_torch_class_is_ported():
    code, _ = _rewrite("""
        import torch
        cuda = torch.cuda.is_available()
        FloatTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
        x = FloatTensor(2, 3)
        """)
    assert "FloatTensor" not in code and 'torch.empty(2, 3, dtype=torch.float32, device="neuron" if cuda' in code
