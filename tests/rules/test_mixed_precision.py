"""NP3xx beyond the per-rule examples: autocast and GradScaler spellings, NP301 + NP302 on one call, and
NP306 (torch.cuda.amp imports) following the rewritten calls with every rule enabled."""

from __future__ import annotations

import json

import pytest

from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rules.registry import all_rules, rule_by_code, select_rules
from rule_runs import findings_of as codes, rewrite_twice as run
from rule_runs import rules_by_code as _rules, run_rules as _run, settled as _settled


# -- import spellings ------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "source, expected",
    [
        (
            "from torch.cuda import amp\nwith amp.autocast(dtype=torch.bfloat16):\n    pass\n",
            "from torch.cuda import amp\nimport torch\n\n"
            'with torch.autocast(device_type="neuron", dtype=torch.bfloat16):\n    pass\n',
        ),
        (
            "from torch.cuda.amp import autocast as ac\nwith ac(enabled=False):\n    pass\n",
            "from torch.cuda.amp import autocast as ac\nimport torch\n\n"
            'with torch.autocast(device_type="neuron", enabled=False):\n    pass\n',
        ),
        (
            "from torch.amp import autocast\nwith autocast('cuda', dtype=torch.bfloat16):\n    pass\n",
            "from torch.amp import autocast\nwith autocast('neuron', dtype=torch.bfloat16):\n    pass\n",
        ),
        (
            "from torch import autocast\nwith autocast(device_type=\"cuda\", dtype=torch.float16):\n    pass\n",
            "from torch import autocast\nwith autocast(device_type=\"neuron\", dtype=torch.float16):\n    pass\n",
        ),
        (
            "import torch as th\nwith th.cuda.amp.autocast(True, th.bfloat16, False):\n    pass\n",
            'import torch as th\nwith th.autocast(device_type="neuron", enabled=True, dtype=th.bfloat16, '
            "cache_enabled=False):\n    pass\n",
        ),
        (
            "import torch as th\nwith th.amp.autocast('cuda'):\n    pass\n",
            "import torch as th\nwith th.amp.autocast('neuron'):\n    pass\n",
        ),
    ],
)
def test_autocast_spellings(source, expected):
    out = _settled(source, _rules("NP301"))
    assert out.code == expected


@pytest.mark.parametrize(
    "source, expected",
    [
        (
            "from torch.cuda import amp\nscaler = amp.GradScaler()\n",
            'from torch.cuda import amp\nimport torch\n\nscaler = torch.amp.GradScaler("neuron")\n',
        ),
        (
            "import torch as th\nscaler = th.cuda.amp.GradScaler(enabled=use_amp)\n",
            'import torch as th\nscaler = th.amp.GradScaler("neuron", enabled=use_amp)\n',
        ),
        (
            "import torch\nscaler = torch.GradScaler('cuda', enabled=use_amp)\n",
            "import torch\nscaler = torch.GradScaler('neuron', enabled=use_amp)\n",
        ),
        (
            "from torch.amp import GradScaler\nscaler = GradScaler(device='cuda')\n",
            "from torch.amp import GradScaler\nscaler = GradScaler(device='neuron')\n",
        ),
    ],
)
def test_grad_scaler_spellings(source, expected):
    assert _settled(source, _rules("NP303")).code == expected


# -- NP301 + NP302 on one call ---------------------------------------------------------------------

def test_autocast_safe_then_unsafe_dtype():
    source = "import torch\nwith torch.cuda.amp.autocast():\n    pass\n"
    safe = _settled(source, _rules("NP301", "NP302"))
    assert safe.code == 'import torch\nwith torch.autocast(device_type="neuron"):\n    pass\n'
    assert {f.code: f.fix.applied for f in safe.findings} == {"NP301": True, "NP302": False}
    unsafe = _settled(source, _rules("NP301", "NP302"), unsafe_fixes=True)
    assert unsafe.code == 'import torch\nwith torch.autocast(device_type="neuron", dtype=torch.bfloat16):\n    pass\n'


def test_autocast_variable_device_left_to_device_rules():
    source = "import torch\nctx = torch.amp.autocast(device_type=device_type, dtype=ptdtype)\n"
    out = _run(source, select_rules(select=["NP3"]), unsafe_fixes=True)
    assert out.code == source and out.findings == []


# -- NP304 -----------------------------------------------------------------------------------------

def test_grad_scaler_bf16_advice():
    source = """
        import torch
        scaler = torch.cuda.amp.GradScaler()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            pass
        """
    out = _settled(source, select_rules(select=["NP3"]))
    codes = sorted(f.code for f in out.findings)
    assert codes == ["NP301", "NP303", "NP304"]
    assert 'torch.amp.GradScaler("neuron")' in out.code


# -- NP306: torch.cuda.amp imports -----------------------------------------------------------------

def test_module_level_import_goes_with_its_ported_calls():
    code, findings = run(
        "import torch\nfrom torch.cuda.amp import GradScaler, autocast\n\n"
        "scaler = GradScaler()\nwith autocast(dtype=torch.bfloat16):\n    loss = model(x)\n")
    assert code == ('import torch\n\nscaler = torch.amp.GradScaler("neuron")\n'
                    'with torch.autocast(device_type="neuron", dtype=torch.bfloat16):\n    loss = model(x)\n')
    [finding] = codes(findings, "NP306")
    assert finding.fix.applied and finding.fix.safety == "safe" and "ported" in finding.message


def test_function_level_and_module_alias_imports_go():
    code, _ = run(
        "import torch\n\n\ndef evaluate(model, x):\n    from torch.cuda.amp import autocast as ac\n"
        "    with ac(dtype=torch.bfloat16):\n        return model(x)\n\n\n"
        "def train(model, x):\n    from torch.cuda import amp\n    with amp.autocast(enabled=True, dtype=torch.bfloat16):\n"
        "        return model(x)\n")
    assert "cuda" not in code
    assert code.count('torch.autocast(device_type="neuron"') == 2


@pytest.mark.parametrize("guard", [
    "try:\n    from torch.amp import GradScaler\nexcept ImportError:  # PyTorch < 2.3\n"
    "    from torch.cuda.amp import GradScaler\n",
    "if TORCH_VERSION >= (2, 3):\n    from torch.amp import GradScaler\nelse:\n    from torch.cuda.amp import GradScaler\n",
])
def test_a_version_guarded_import_whose_name_is_no_longer_used_goes_whole(guard):
    code, findings = run("import torch\n" + guard + "\nscaler = GradScaler(enabled=use_fp16)\n")
    assert code == 'import torch\n\nscaler = torch.amp.GradScaler("neuron", enabled=use_fp16)\n'
    [finding] = codes(findings, "NP306")
    assert finding.fix.applied and "goes whole" in finding.message


def test_a_guarded_import_the_rewritten_calls_still_use_points_at_torch_amp():
    # the tracker binds GradScaler to the last import (torch.amp): NP303 keeps the name and adds the device
    code, findings = run("if OLD_TORCH:\n    from torch.cuda.amp import GradScaler\nelse:\n"
                         "    from torch.amp import GradScaler\nscaler = GradScaler()\n")
    assert code == 'from torch.amp import GradScaler\nscaler = GradScaler("neuron")\n'
    assert codes(findings, "NP306")[0].fix.applied


def test_an_import_with_a_use_no_rule_ports_stays_and_is_reported():
    source = "from torch.cuda.amp import autocast\nctx = autocast if use_amp else nullcontext\n"
    code, findings = run(source)
    assert code == source
    [finding] = codes(findings, "NP306")
    assert not finding.fix.available and "still used" in finding.message
    assert codes(findings, "NP301")  # the use itself


def test_a_partly_ported_import_keeps_the_names_still_used():
    code, _ = run("import torch\nfrom torch.cuda.amp import GradScaler, autocast\n"
                  "scaler = GradScaler()\nctx = autocast if use_amp else nullcontext\n")
    assert code.startswith("import torch\nfrom torch.cuda.amp import autocast\n")


def test_accelerator_target_takes_the_unsafe_safety_of_the_call_rewrites():
    source = "import torch\nfrom torch.cuda.amp import GradScaler\nscaler = GradScaler()\n"
    code, findings = run(source, target="accelerator")
    assert code == source and codes(findings, "NP306")[0].fix.safety == "unsafe"
    code, _ = run(source, target="accelerator", unsafe=True)
    assert "torch.cuda.amp" not in code and "current_accelerator" in code


def test_a_suppressed_use_keeps_the_import():
    source = ("import torch\nfrom torch.cuda.amp import GradScaler\n"
              "scaler = GradScaler()  # neuron-port: ignore[NP303]\n")
    code, findings = run(source)
    assert code == source and not codes(findings, "NP306")[0].fix.applied


def test_selecting_only_np306_never_removes_a_used_import():
    source = "import torch\nfrom torch.cuda.amp import GradScaler\nscaler = GradScaler()\n"
    outcome = transform_source(source, [rule_by_code("NP306")], EngineOptions())
    assert outcome.code == source


def test_a_comment_above_keeps_the_import():
    source = "import torch\n# mixed precision\nfrom torch.cuda.amp import GradScaler\nscaler = GradScaler()\n"
    code, findings = run(source)
    assert code.startswith("import torch\n# mixed precision\nfrom torch.cuda.amp import GradScaler\n")
    assert "comment above" in codes(findings, "NP306")[0].message


def test_an_import_alone_in_its_block_leaves_pass():
    code, _ = run("import torch\nif HAVE_AMP:\n    from torch.cuda.amp import autocast\n"
                  "with autocast(dtype=torch.bfloat16):\n    pass\n")
    assert code.startswith("import torch\nif HAVE_AMP:\n    pass\n")


def test_notebook_cells_are_reported_without_a_fix():
    source = "import torch\nfrom torch.cuda.amp import GradScaler\nscaler = GradScaler()\n"
    outcome = transform_source(source, list(all_rules()), EngineOptions(), path="nb.ipynb")
    assert "from torch.cuda.amp import GradScaler" in outcome.code
    assert "notebook" in codes(outcome.findings, "NP306")[0].message


def test_disabled_autocast_region_is_neither_reported_nor_given_a_dtype(tmp_path, cli):
    """`autocast(..., enabled=False)` runs in full precision: NP302 has no dtype to ask for, and
    `--unsafe-fixes` must not add one to the disabled region (the device type still moves, NP301)."""
    script = tmp_path / "train.py"
    script.write_text("import torch\n\n\ndef loss_fp32(model, x):\n"
                      "    with torch.autocast('cuda', enabled=False):\n        return model(x.float())\n\n\n"
                      "@torch.cuda.amp.autocast(enabled=False)\ndef head(x):\n    return x\n")
    result = cli("rewrite", "--unsafe-fixes", "--output-format", "json", str(script))
    assert result.returncode in (0, 1), result.stderr
    codes = [f["code"] for f in json.loads(result.stdout)["findings"]]
    assert "NP302" not in codes and "NP301" in codes
    text = script.read_text()
    assert "with torch.autocast('neuron', enabled=False):" in text
    assert '@torch.autocast(device_type="neuron", enabled=False)' in text
    assert "bfloat16" not in text
