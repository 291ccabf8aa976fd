"""NP7xx beyond the per-rule examples: no double reports with NP2xx / NP409, guarded imports (severity one
step lower), once per import site and per use, CUDA extensions, custom ops registered only for CUDA."""

from __future__ import annotations

import pytest

from neuron_port.rules.registry import rule_by_code
from rule_runs import findings_of as codes, rewrite_twice as run
from rule_runs import codes_of as _codes, run_rules as _run


# -- no double reports with the torch.cuda rules ---------------------------------------------------

def test_nvtx_and_cuda_graphs_not_duplicated():
    out = _run("""
        import torch
        torch.cuda.nvtx.range_push("fwd")
        g = torch.cuda.CUDAGraph()
    """)
    assert _codes(out) == []


# -- guarded imports -------------------------------------------------------------------------------

def _severities(out, code):
    return [(f.line, f.severity) for f in out.findings if f.code == code]


def test_guard_lowers_severity_one_step():
    out = _run("""
        import torch
        try:
            from flash_attn import flash_attn_func
        except ImportError:
            flash_attn_func = None
        from xformers.ops import memory_efficient_attention

        def attn(q, k, v):
            if flash_attn_func is not None:
                return flash_attn_func(q, k, v)
            if torch.cuda.is_available():
                return flash_attn_func(q, k, v)
            return flash_attn_func(q, k, v)
    """, [rule_by_code("NP702"), rule_by_code("NP703")])
    assert _severities(out, "NP702") == [(3, "warning"), (10, "warning"), (12, "error"), (13, "error")]
    assert _severities(out, "NP703") == [(6, "error")]


def test_guard_forms():
    out = _run("""
        import importlib.util
        from transformers.utils import is_flash_attn_2_available
        if is_flash_attn_2_available():
            from flash_attn import flash_attn_varlen_func
        if importlib.util.find_spec("triton") is not None:
            import triton
        HAS_APEX = False
        if HAS_APEX: from apex.normalization import FusedRMSNorm
        fn = flash_attn_varlen_func if is_flash_attn_2_available() else None
    """)
    sev = {(f.code, f.line): f.severity for f in out.findings}
    assert sev[("NP702", 4)] == "warning"
    assert sev[("NP701", 6)] == "warning"
    assert sev[("NP704", 8)] == "warning"
    assert sev[("NP702", 9)] == "warning"
    assert all("guarded" in f.message for f in out.findings if f.code.startswith("NP7"))


def test_nvtx_warning_guarded_becomes_info():
    out = _run("try:\n    import nvtx\nexcept ImportError:\n    nvtx = None\n", [rule_by_code("NP710")])
    assert _severities(out, "NP710") == [(2, "info")]


# -- once per import site, once per use ------------------------------------------------------------

def test_triton_kernel_body_not_reported_per_call():
    out = _run("""
        import triton
        import triton.language as tl

        @triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"])
        @triton.jit
        def kernel(x_ptr, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2, mask=offs < n)

        def launch(x):
            kernel[(triton.cdiv(x.numel(), 128),)](x, x.numel())
    """, [rule_by_code("NP701")])
    lines = [f.line for f in out.findings]
    assert lines == [1, 2, 4, 12]
    assert "kernel `kernel`" in out.findings[2].message


def test_import_reported_once_per_statement():
    out = _run("from flash_attn import flash_attn_func, flash_attn_varlen_func\n", [rule_by_code("NP702")])
    assert len(out.findings) == 1


def test_cuda_extension_and_sources_not_doubled():
    out = _run("""
        from torch.utils.cpp_extension import load, CUDAExtension
        ext = load(name="fused", sources=["fused.cpp", "fused_kernel.cu"])
        srcs = ["a.cpp", "b.cu"]
        mod = CUDAExtension("ops", sources=srcs)
    """)
    assert [(f.code, f.line) for f in out.findings] == [("NP708", 2), ("NP709", 3), ("NP708", 4)]


# -- NP713: custom ops registered only for CUDA ----------------------------------------------------

@pytest.mark.parametrize("source, reported", [
    ("import torch\nlib = torch.library.Library('ns', 'DEF')\nlib.impl('op', fn, 'CUDA')\n", True),
    ("import torch\nlib = torch.library.Library('ns', 'DEF')\ntorch.library.impl(lib, 'op', 'CUDA')(fn)\n", True),
    ("import torch\nlib = torch.library.Library('ns', 'DEF')\nlib.impl('op', fn, 'CUDA')\n"
     "lib.impl('op', ref, 'CPU')\n", False),
    ("import torch\n\n@torch.library.custom_op('ns::op', mutates_args=(), device_types='cuda')\n"
     "def op(x: torch.Tensor) -> torch.Tensor:\n    return x\n\n@op.register_kernel('cpu')\n"
     "def _(x):\n    return x\n", False),
    # NP101 renames the device type (a plain torch op runs on neuron): after the fix nothing is left to
    # report, and the report is what a second run reports (the fixed point, issue 34)
    ("import torch\n\n@torch.library.custom_op('ns::op', mutates_args=(), device_types=['cuda'])\n"
     "def op(x: torch.Tensor) -> torch.Tensor:\n    return x\n", False),
    ("import torch\ntorch.library.register_kernel('ns::op', 'cuda', fn)\n"
     "torch.library.impl('ns::op', 'CompositeImplicitAutograd', ref)\n", False),
])
def test_custom_ops_with_only_a_cuda_kernel_are_reported(source, reported):
    _, findings = run(source)
    assert bool(codes(findings, "NP713")) == reported


# -- CUDA-only modules and kernel scopes (issue 20, item 2) ---------------------------------------

_KERNEL_MODULE = """\
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, tl.load(x_ptr + pid) + tl.load(y_ptr + pid))


def add(x, y):
    assert all(t.is_cuda for t in (x, y))
    out = torch.empty_like(x, device="cuda")
    if x.device.type == "cuda":
        add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
"""


def test_cuda_only_module_is_reported_once_and_left_unedited():
    code, findings = run(_KERNEL_MODULE, path="ops/add.py")
    assert code == _KERNEL_MODULE  # the precondition `all(t.is_cuda ...)` is not inverted
    assert [f.code for f in findings] == ["NP717"]
    assert "imports `triton` at top level" in findings[0].message
    assert "CUDA references" in findings[0].message and "folded into this one" in findings[0].message


def test_guarded_triton_module_is_edited_outside_kernels_only():
    source = """\
import torch
try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None


@triton.jit
def double_kernel(x_ptr, n, BLOCK: tl.constexpr):
    assert x_ptr.is_cuda
    tl.store(x_ptr, 2)


def move(x):
    return x.cuda()
"""
    code, findings = run(source)
    assert "assert x_ptr.is_cuda" in code  # inside the kernel: kept
    assert "x.cuda()" not in code  # outside the kernel: ported
    assert not findings_in_kernel(findings, first=10, last=12)


def findings_in_kernel(findings, first, last):
    return [f for f in findings if first <= f.line <= last and f.code != "NP701"]


def test_custom_op_launching_a_kernel_keeps_its_cuda_device_type():
    source = """\
import torch


@torch.library.custom_op("demo::scale", mutates_args=(), device_types="cuda")
def scale(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    scale_kernel[(1,)](x, out, x.numel())
    return out
"""
    code, findings = run(source)
    assert code == source
    [np713] = [f for f in findings if f.code == "NP713"]
    assert "launches a GPU kernel" in np713.message
    assert not [f for f in findings if f.code == "NP101"]


def test_plain_custom_op_is_still_renamed():
    source = """\
import torch


@torch.library.custom_op("demo::scale", mutates_args=(), device_types="cuda")
def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2
"""
    code, _ = run(source)
    assert 'device_types="neuron"' in code


def test_cu_files_are_discovered_and_reported_once(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "scale.cu").write_text(
        "__global__ void scale(float* x) { x[threadIdx.x] *= 2; }\n__global__ void zero(float* x) {}\n")
    (tmp_path / "csrc" / "common.cuh").write_text("#pragma once\n")
    cli = Path(sys.executable).with_name("neuron-port")
    out = subprocess.run([str(cli), "rewrite", "--diff", str(tmp_path)], capture_output=True, text=True)
    lines = [line for line in (out.stdout + out.stderr).splitlines() if " NP709 " in line]
    assert len(lines) == 2, out.stdout + out.stderr
    assert any("scale.cu:1:1" in line and "2 `__global__` kernels" in line for line in lines)
    assert (tmp_path / "csrc" / "scale.cu").read_text().startswith("__global__")


def test_raw_cuda_idioms_are_reported():
    source = """\
import torch

ADD = 'extern "C" __global__ void add(float* x) { x[threadIdx.x] += 1; }'
add = torch.cuda._compile_kernel(ADD, "add")
count = torch._C._cuda_getDeviceCount()
"""
    code, findings = run(source)
    assert code == source
    assert [f.line for f in findings if f.code == "NP716"] == [4, 5]


def test_cupy_module_is_one_cuda_only_module_finding():
    source = "import cupy as cp\nimport torch\n\n\ndef to_gpu(x):\n    return cp.asarray(x.cuda())\n"
    code, findings = run(source)
    assert code == source
    [module] = findings
    assert module.code == "NP717" and "`cupy`" in module.message and "NP714" in module.message


def test_numba_cuda_kernel_in_a_guarded_module_is_kept():
    source = """\
import torch

try:
    from numba import cuda
except ImportError:
    cuda = None


@cuda.jit
def scale(x, out):
    if x.is_cuda:
        out[0] = x[0]


def move(t):
    return t.cuda()
"""
    code, findings = run(source)
    assert "if x.is_cuda:" in code and "t.cuda()" not in code
    assert [f.code for f in findings if 9 <= f.line <= 12] == ["NP717"]


def test_cuda_only_module_is_kept_whatever_the_selection(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "add.py").write_text(_KERNEL_MODULE)
    cli = Path(sys.executable).with_name("neuron-port")
    out = subprocess.run([str(cli), "rewrite", "--select", "NP104,NP101", str(tmp_path)], capture_output=True,
                         text=True)
    assert (tmp_path / "add.py").read_text() == _KERNEL_MODULE, out.stdout + out.stderr
    assert "NP717" not in out.stdout + out.stderr  # not selected: not reported
    assert "left as it is" in out.stdout + out.stderr  # the selected findings say why they have no fix


def test_cu_text_given_by_name_is_reported_not_parsed():
    from neuron_port.api import rewrite_source

    text = "__global__ void k(float* x) { x[0] = 1; }\n"
    code, findings = rewrite_source(text, path="csrc/k.cu")
    assert code == text and [(f.code, f.line) for f in findings] == [("NP709", 1)]


# -- issue 20: the allow list decides whether a fix that flips a device test is safe ---------------

@pytest.mark.parametrize("guarded, safe", [
    # portable: torch tensor ops and modules, the file's own functions and classes made of them
    ("y = scale(x)", True),
    ("y = Block()(x)", True),
    ("y = x.pin_memory().float()", True),
    ("torch.backends.cudnn.benchmark = True", True),
    ("print('step', x.sum().item())", True),
    # not known to run on neuron: another package, an import, text naming a CUDA-only feature,
    # a None-unless-CUDA attribute, a kernel launch
    ("y = fused.gelu(x)", False),
    ("import apex", False),
    ("print('FP8 needs a GPU')", False),
    ("y = CACHE[0]", False),
    ("y = kernel[(1,)](x)", False),
])
def test_what_a_device_test_guards_decides_whether_its_flip_is_safe(guarded, safe):
    source = (
        "import torch\nimport fused\n\nCACHE = None\n\n\ndef scale(x):\n    return x * torch.ones_like(x)\n\n\n"
        "class Block(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.proj = torch.nn.Identity()\n\n    def forward(self, x):\n        return self.proj(x)\n\n\n"
        f"def step(x):\n    if x.is_cuda:\n        {guarded}\n    return x\n")
    code, findings = run(source)
    np104 = codes(findings, "NP104")
    assert len(np104) == 1 and np104[0].fix.available
    assert np104[0].fix.safety == ("safe" if safe else "unsafe"), np104[0].message
    assert ("x.is_neuron" in code) == safe


# -- issue 20: the code a kept device test guards is CUDA's, and is not edited -----------------------

_KEPT_BRANCHES = """\
import torch

try:
    from flash_attn import flash_attn_func
except ImportError:
    flash_attn_func = None


def attend(q, k, v):
    if q.is_cuda and flash_attn_func is not None:
        k = k.cuda()
        return flash_attn_func(q, k, v)
    return torch.nn.functional.scaled_dot_product_attention(q.cuda(), k, v)


use_gpu = torch.cuda.is_available()
if use_gpu:
    model = torch.nn.Linear(2, 2).cuda()
    torch.cuda.nvtx.range_push("x")
"""


def test_code_a_kept_test_guards_is_not_edited():
    """`.cuda()` inside a branch that stays CUDA's (the test is kept: it guards flash-attn, or nvtx) stays
    `.cuda()` (rewritten, it would break that branch on a GPU and do nothing on Trainium); the same call on
    the path Trainium takes is rewritten. The findings inside fold into the kept test's one finding."""
    code, findings = run(_KEPT_BRANCHES)
    assert "        k = k.cuda()\n" in code and "torch.nn.Linear(2, 2).cuda()" in code
    assert 'scaled_dot_product_attention(q.to("neuron"), k, v)' in code
    [branch] = [f for f in findings if f.code == "NP720"]
    assert "folded into this one (NP103, NP702)" in branch.message
    [kept] = [f for f in findings if f.code == "NP201" and f.line == 16]
    assert "folded into this one (NP103, NP202)" in kept.message
    assert not [f for f in findings if f.code == "NP103" and f.line in (11, 18)]


def test_code_a_kept_test_guards_is_not_edited_whatever_the_selection(tmp_path):
    """`--select NP103`: NP720 and NP201 are not selected, yet what they keep is still not edited (the
    calls inside are reported without a fix, saying why), and the call outside is rewritten."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "attend.py").write_text(_KEPT_BRANCHES)
    cli = Path(sys.executable).with_name("neuron-port")
    out = subprocess.run([str(cli), "rewrite", "--select", "NP103", "--output-format", "json", str(tmp_path)],
                         capture_output=True, text=True)
    code = (tmp_path / "attend.py").read_text()
    assert "        k = k.cuda()\n" in code and "torch.nn.Linear(2, 2).cuda()" in code, out.stderr
    assert 'scaled_dot_product_attention(q.to("neuron"), k, v)' in code
    inside = [f for f in json.loads(out.stdout)["findings"] if f["line"] in (11, 18)]
    assert [f["code"] for f in inside] == ["NP103", "NP103"]
    assert all("left as it is" in f["message"] and not f["fix"]["applied"] for f in inside)
