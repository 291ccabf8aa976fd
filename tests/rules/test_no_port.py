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
    ("import torch\n\n@torch.library.custom_op('ns::op', mutates_args=(), device_types=['cuda'])\n"
     "def op(x: torch.Tensor) -> torch.Tensor:\n    return x\n", True),
    ("import torch\ntorch.library.register_kernel('ns::op', 'cuda', fn)\n"
     "torch.library.impl('ns::op', 'CompositeImplicitAutograd', ref)\n", False),
])
def test_custom_ops_with_only_a_cuda_kernel_are_reported(source, reported):
    _, findings = run(source)
    assert bool(codes(findings, "NP713")) == reported
