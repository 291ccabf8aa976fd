"""NP3xx / NP4xx beyond the per-rule examples: import spellings, interplay with the other families
(all_rules()), statement removal, suppression, and idempotency on a realistic training loop."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst
import pytest

from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rules.helpers.calls import insert_arg, keyword_arg
from neuron_port.rules.registry import all_rules, rule_by_code, select_rules


def _rules(*codes):
    return [rule_by_code(c) for c in codes]


def _src(code: str) -> str:
    code = textwrap.dedent(code)
    return code[1:] if code.startswith("\n") else code


def _run(source, rules, **options):
    return transform_source(_src(source), rules, EngineOptions(**options))


def _settled(source, rules, **options):
    """Rewrite, then check the output parses and a second run changes nothing."""
    out = _run(source, rules, **options)
    ast.parse(out.code)
    again = transform_source(out.code, rules, EngineOptions(**options))
    assert again.code == out.code
    assert not any(f.fix.applied for f in again.findings)
    return out


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


def test_compile_alias_and_decorators():
    source = """
        import torch as th
        from torch import compile as tcompile

        @th.compile
        def f(x):
            return x

        @tcompile(mode="max-autotune")
        def g(x):
            return x

        h = th.compile(model, backend="inductor", dynamic=True)
        """
    out = _settled(source, _rules("NP401", "NP402", "NP403", "NP404"), unsafe_fixes=True)
    assert out.code == _src("""
        import torch as th
        from torch import compile as tcompile

        @th.compile(backend="neuron")
        def f(x):
            return x

        @tcompile(backend="neuron")
        def g(x):
            return x

        h = th.compile(model, backend="neuron", dynamic=False)
        """)


def test_non_torch_compile_and_autocast_untouched():
    source = """
        import re
        from mylib import autocast, GradScaler
        pattern = re.compile(r"\\d+")
        with autocast("cuda"):
            pass
        scaler = GradScaler()
        model.compile()
        """
    out = _run(source, select_rules(select=["NP3", "NP4"]), unsafe_fixes=True)
    assert out.code == _src(source)
    assert out.findings == []


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


# -- statement removal -----------------------------------------------------------------------------

def test_flag_removal_keeps_blocks_valid_and_comments():
    source = """
        import torch

        def setup(cfg):
            if cfg.fast:
                torch.backends.cudnn.benchmark = True
            # keep this comment: determinism
            torch.backends.cudnn.deterministic = True
            seed = 1; torch.backends.cuda.matmul.allow_tf32 = True
            return seed
        """
    out = _settled(source, _rules("NP407"), unsafe_fixes=True)
    assert out.code == _src("""
        import torch

        def setup(cfg):
            if cfg.fast:
                pass
            # keep this comment: determinism
            torch.backends.cudnn.deterministic = True
            seed = 1
            return seed
        """)
    kept = [f for f in out.findings if not f.fix.applied]
    assert [f.line for f in kept] == [7] and "comment" in kept[0].message


def test_flag_removal_not_offered_on_accelerator_target():
    out = _run("import torch\ntorch.backends.cudnn.benchmark = True\n", select_rules(target="accelerator"),
               target="accelerator", unsafe_fixes=True)
    assert out.code == "import torch\ntorch.backends.cudnn.benchmark = True\n"


def test_suppression_comment():
    source = "import torch\ntorch.backends.cudnn.benchmark = True  # neuron-port: ignore[NP407]\n"
    out = _run(source, _rules("NP407"), unsafe_fixes=True)
    assert out.code == source and out.findings == []


def test_finding_positions_point_at_the_statement():
    source = "import torch\n\n\ntorch.set_float32_matmul_precision('high')\n"
    out = _run(source, _rules("NP407"))
    assert [(f.line, f.column) for f in out.findings] == [(4, 1)]


# -- helpers ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "source, index, expected",
    [
        ("f()", 0, "f(v)"),
        ("f(a)", 1, "f(a, v)"),
        ("f(a)", 0, "f(v, a)"),
        ("f(a,)", 1, "f(a, v,)"),
        ("f(\n    a,\n    b,\n)", 2, "f(\n    a,\n    b,\n    v,\n)"),
        ("f(\n    a,\n    b\n)", 2, "f(\n    a,\n    b,\n    v\n)"),
        ("f(\n    a,\n)", 0, "f(\n    v,\n    a,\n)"),
        ("f(\n    a=1, b=2)", 0, "f(\n    v, a=1, b=2)"),
    ],
)
def test_insert_arg_layout(source, index, expected):
    call = cst.parse_expression(source)
    assert isinstance(call, cst.Call)
    new = insert_arg(call, index, cst.Arg(value=cst.Name("v")))
    assert cst.Module(body=[]).code_for_node(new) == expected


def test_keyword_arg_appended_after_trailing_comma():
    call = cst.parse_expression("f(\n    a=1,\n)")
    assert isinstance(call, cst.Call)
    new = insert_arg(call, 1, keyword_arg("k", cst.Name("v")))
    assert cst.Module(body=[]).code_for_node(new) == "f(\n    a=1,\n    k=v,\n)"


# -- a realistic training script, all rules --------------------------------------------------------

TRAIN = """
import math

import torch
import torch.nn.functional as F
from torch.cuda import amp
from torch.nn.attention import sdpa_kernel, SDPBackend

torch.backends.cuda.matmul.allow_tf32 = True  # faster matmuls
torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("high")

use_amp = True
scaler = amp.GradScaler(enabled=use_amp)
model = torch.compile(
    model,
    mode="max-autotune",
)


@torch.compile
def loss_fn(logits, y):
    return F.cross_entropy(logits, y)


for step in range(100):
    x, y = get_batch()
    with amp.autocast(enabled=use_amp):
        logits = model(x)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            loss = loss_fn(logits, y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    if step % 10 == 0:
        torch.cuda.synchronize()
        print(torch.cuda.max_memory_allocated() / 2**20)
"""

TRAIN_SAFE = """
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

torch.backends.cuda.matmul.allow_tf32 = True  # faster matmuls
torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("high")

use_amp = True
scaler = torch.amp.GradScaler("neuron", enabled=use_amp)
model = torch.compile(
    model,
    backend="neuron",
)


@torch.compile(backend="neuron")
def loss_fn(logits, y):
    return F.cross_entropy(logits, y)


for step in range(100):
    x, y = get_batch()
    with torch.autocast(device_type="neuron", enabled=use_amp):
        logits = model(x)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            loss = loss_fn(logits, y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    if step % 10 == 0:
        torch.neuron.synchronize()
        print(torch.neuron.max_memory_allocated() / 2**20)
"""


def test_training_loop_all_rules_safe():
    out = _settled(TRAIN, select_rules(target="neuron"))
    assert out.code == _src(TRAIN_SAFE)
    applied = sorted(f.code for f in out.findings if f.fix.applied)
    # NP306: `from torch.cuda import amp` goes once its last use is ported (issue 11)
    assert applied == ["NP201", "NP201", "NP301", "NP301", "NP303", "NP306", "NP401", "NP401", "NP403"]
    pending = sorted(f.code for f in out.findings if not f.fix.applied)
    # left for review: NP302 (no dtype on the first region), the three flag removals (unsafe), the
    # SDPA context; NP304 stays quiet because the scaler is switched by `enabled=`
    assert pending == ["NP302", "NP407", "NP407", "NP407", "NP408"]


def test_training_loop_all_rules_unsafe():
    out = _settled(TRAIN, select_rules(target="neuron"), unsafe_fixes=True)
    assert "allow_tf32" not in out.code and "set_float32_matmul_precision" not in out.code
    assert 'torch.autocast(device_type="neuron", enabled=use_amp, dtype=torch.bfloat16)' in out.code
    assert "# faster matmuls" not in out.code  # an end-of-line comment goes with its statement
    assert out.code.startswith("import math\n\nimport torch\n")


def test_training_loop_accelerator_target():
    out = _settled(TRAIN, select_rules(target="accelerator"), target="accelerator")
    # device-type rewrites are unsafe on this target (current_accelerator() is None on CPU-only hosts)
    assert "amp.autocast(enabled=use_amp)" in out.code
    assert "torch.accelerator.synchronize()" in out.code  # NP201 still applies
    assert "backend=" not in out.code  # no backend added: the default is right on both devices
    unsafe = _settled(TRAIN, select_rules(target="accelerator"), target="accelerator", unsafe_fixes=True)
    assert "torch.autocast(device_type=torch.accelerator.current_accelerator().type, enabled=use_amp)" in unsafe.code
    assert "torch.amp.GradScaler(torch.accelerator.current_accelerator().type, enabled=use_amp)" in unsafe.code
    assert "allow_tf32" in unsafe.code  # flags are kept: they matter on GPUs


def test_compile_call_with_every_fix_settles():
    source = 'import torch\nm = torch.compile(m, mode="reduce-overhead", dynamic=True, options={"max_autotune": True})\n'
    out = _settled(source, select_rules(select=["NP4"]), unsafe_fixes=True)
    assert out.code == (
        'import torch\nm = torch.compile(m, dynamic=False, options={"max_autotune": True}, backend="neuron")\n'
    )
    assert sorted(f.code for f in out.findings) == ["NP401", "NP403", "NP404", "NP405"]


def test_cuda_graph_capture_reported_not_rewritten():
    source = """
        import torch
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        with torch.cuda.graph(g):
            out = model(static_in)
        g.replay()
        """
    out = _run(source, all_rules(), unsafe_fixes=True)
    graphs = [f for f in out.findings if f.code == "NP409"]
    assert [(f.line, f.effort, f.severity) for f in graphs] == [(2, "high", "error"), (4, "high", "error")]
    assert "torch.cuda.CUDAGraph()" in out.code and "torch.cuda.graph(g)" in out.code
    assert "torch.neuron.Stream()" in out.code  # NP201 still renames the rest


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
