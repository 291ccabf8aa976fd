"""NP6xx / NP7xx / NP8xx beyond the per-rule examples: interplay with the other families (no double
reports with NP101/NP202), guarded imports, once-per-file and per-file bindings, compiled-code
tracking, the accelerator target, untouched idioms, trigger selectivity and `neuron-port explain`."""

from __future__ import annotations

import ast
import textwrap

import pytest

from neuron_port.rewrite.engine import EngineOptions, transform_source, triggers_for
from neuron_port.rules.registry import all_rules, rule_by_code

FAMILIES = ("NP6", "NP7", "NP8")


def _mine():
    return [r for r in all_rules() if r.CODE.startswith(FAMILIES)]


def _src(code: str) -> str:
    code = textwrap.dedent(code)
    return code[1:] if code.startswith("\n") else code


def _run(source, rules=None, **options):
    return transform_source(_src(source), list(rules or all_rules()), EngineOptions(**options))


def _codes(outcome, prefix=FAMILIES):
    return [f.code for f in outcome.findings if f.code.startswith(prefix)]


def _settled(source, rules=None, **options):
    out = _run(source, rules, **options)
    ast.parse(out.code)
    again = transform_source(out.code, list(rules or all_rules()), EngineOptions(**options))
    assert again.code == out.code
    assert not any(f.fix.applied for f in again.findings)
    return out


# -- registry ----------------------------------------------------------------------------------------

def test_families_registered_with_docs():
    codes = {r.CODE for r in _mine()}
    assert {f"NP6{i:02d}" for i in range(1, 10)} <= codes
    assert {f"NP7{i:02d}" for i in range(1, 13)} <= codes
    assert {f"NP8{i:02d}" for i in range(1, 12)} <= codes
    for rule in _mine():
        assert rule.TRIGGERS and all(rule.TRIGGERS), rule.CODE
        assert "cuda" not in rule.TRIGGERS, f"{rule.CODE}: 'cuda' would make the pre-filter useless"
        assert rule.__module__.split(".")[2] in ("ecosystem", "no_port", "precision_features")


@pytest.mark.parametrize("code", ["NP601", "NP702", "NP709", "NP712", "NP808", "NP811"])
def test_explain(cli, code):
    result = cli("explain", code)
    assert result.returncode == 0, result.stderr
    assert "## Fix safety" in result.stdout or "Fix safety" in result.stdout
    assert rule_by_code(code).NAME in result.stdout


# -- no double reports with the older families ------------------------------------------------------

def test_pipeline_device_strings_stay_np101():
    out = _run("""
        from transformers import pipeline
        pipe = pipeline("text-generation", model=m, device="cuda")
        pipe2 = pipeline("text-generation", model=m, device=0)
        pipe3 = pipeline("text-generation", model=m, device_map="cuda")
        pipe.to("cuda")
    """)
    by_line = {}
    for f in out.findings:
        by_line.setdefault(f.line, []).append(f.code)
    assert by_line[2] == ["NP101"]
    assert by_line[3] == ["NP602"]
    assert by_line[4] == ["NP601"]
    assert by_line[5] == ["NP101"]
    assert out.code.count('"neuron"') == 4


def test_nvtx_and_cuda_graphs_not_duplicated():
    out = _run("""
        import torch
        torch.cuda.nvtx.range_push("fwd")
        g = torch.cuda.CUDAGraph()
    """)
    assert _codes(out) == []


def test_accelerate_is_left_alone():
    out = _run("""
        from accelerate import Accelerator
        accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=4)
        model, opt = accelerator.prepare(model, opt)
        accelerator.backward(loss)
    """)
    assert _codes(out) == []


def test_untouched_idioms():
    source = """
        import torch
        x = torch.zeros(3, device="cpu", dtype=torch.float32)
        with torch.device("meta"):
            model = Net()
        model.to_empty(device="cpu")
        if torch.backends.mps.is_available():
            y = x.to("mps")
        n = torch.accelerator.device_count()
        print("flash_attn and triton are CUDA libraries; use float64 with care")
    """
    for target in ("neuron", "accelerator"):
        out = _run(source, _mine(), target=target, unsafe_fixes=True)
        assert _codes(out) == [], target
        assert out.code == _src(source)


def test_trigger_prefilter_skips_plain_files():
    source = "import torch\nmodel = torch.nn.Linear(4, 4)\ny = model(torch.randn(2, 4))\n"
    triggers = triggers_for(_mine())
    assert not any(t in source for t in triggers)
    assert transform_source(source, _mine()).skipped


# -- guarded imports ---------------------------------------------------------------------------------

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


# -- once per import site, once per use -------------------------------------------------------------

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


def test_hf_async_load_once_per_file_and_after_env():
    rule = [rule_by_code("NP606")]
    out = _run("""
        tok = AutoTokenizer.from_pretrained(name)
        a = AutoModel.from_pretrained(name)
        b = AutoModel.from_pretrained(other)
    """, rule)
    assert [f.line for f in out.findings] == [2]
    out = _run("""
        m = AutoModel.from_pretrained(name)
        os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")
    """, rule)
    assert out.findings == []


def test_cuda_extension_and_sources_not_doubled():
    out = _run("""
        from torch.utils.cpp_extension import load, CUDAExtension
        ext = load(name="fused", sources=["fused.cpp", "fused_kernel.cu"])
        srcs = ["a.cpp", "b.cu"]
        mod = CUDAExtension("ops", sources=srcs)
    """)
    assert [(f.code, f.line) for f in out.findings] == [("NP708", 2), ("NP709", 3), ("NP708", 4)]


# -- NP8xx bindings and compiled code ---------------------------------------------------------------

def test_mha_binding_after_use_and_other_callables():
    out = _run("""
        import torch.nn as nn
        class Block(nn.Module):
            def forward(self, x, mask):
                y = self.ffn(x, attn_mask=mask)
                return self.attn(x, x, x, attn_mask=mask)[0]
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(64, 4)
    """, [rule_by_code("NP807")])
    assert [f.line for f in out.findings] == [5]


def test_compiled_dynamic_shapes_only_in_compiled_code():
    out = _run("""
        import torch
        def helper(x):
            return x[x > 0]
        @torch.compile
        def step(x, mask):
            keep = x[mask]
            return torch.where(mask)[0], keep.unique()
        class Net(torch.nn.Module):
            def forward(self, x):
                return x.nonzero()
        net = torch.compile(Net())
    """, [rule_by_code("NP811")])
    assert [f.line for f in out.findings] == [6, 7, 7, 10]


def test_channels_last_fixes_settle_and_keep_comments():
    out = _settled("""
        import torch
        model = model.to(memory_format=torch.channels_last)  # GPU speed-up
        # converts the batch
        x = x.to(memory_format=torch.channels_last)
        buf = torch.empty_like(x, memory_format=torch.channels_last)
        if x.is_contiguous(memory_format=torch.channels_last):
            pass
    """, [rule_by_code("NP808")], unsafe_fixes=True)
    assert out.code == _src("""
        import torch
        # converts the batch
        x = x
        buf = torch.empty_like(x)
        if x.is_contiguous(memory_format=torch.channels_last):
            pass
    """)


def test_float64_set_default_dtype_reported_once():
    out = _run("import torch\ntorch.set_default_dtype(torch.float64)\n", [rule_by_code("NP801")])
    assert len(out.findings) == 1


# -- accelerator target ------------------------------------------------------------------------------

def test_accelerator_target():
    out = _settled("""
        import torch
        from transformers import pipeline
        from torch.profiler import ProfilerActivity
        m = AutoModel.from_pretrained(name, device_map="cuda:1", attn_implementation="flash_attention_2")
        pipe = pipeline("asr", model=m, device=0)
        acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
        x = x.to(memory_format=torch.channels_last)
    """, _mine(), target="accelerator", unsafe_fixes=True)
    assert 'device_map=f"{torch.accelerator.current_accelerator().type}:1"' in out.code
    assert 'attn_implementation="sdpa"' in out.code
    assert "device=torch.accelerator.current_accelerator()" in out.code
    assert "ProfilerActivity.CUDA" in out.code  # no device-agnostic activity: reported only
    assert "channels_last" in out.code  # a GPU performance choice: reported only
    assert {"NP712", "NP808"} <= set(_codes(out))


# -- a realistic script with every family ------------------------------------------------------------

REALISTIC = """
import os
import subprocess

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments, pipeline

try:
    from flash_attn import flash_attn_func
    HAS_FLASH = True
except ImportError:
    HAS_FLASH = False

import deepspeed


def rotary(xq, freqs):
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    return torch.view_as_real(xq_ * freqs_cis).flatten(3)


def attention(q, k, v):
    if HAS_FLASH:
        return flash_attn_func(q, k, v, causal=True)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def main():
    gpus = subprocess.check_output(["nvidia-smi", "-L"]).decode().count("GPU")
    tok = AutoTokenizer.from_pretrained("gpt2")
    model = AutoModelForCausalLM.from_pretrained(
        "gpt2",
        torch_dtype=torch.float16,
        device_map="cuda",
        attn_implementation="flash_attention_2",
    )
    args = TrainingArguments(output_dir="out", fp16=True, deepspeed="ds.json")
    gen = pipeline("text-generation", model=model, tokenizer=tok, device=0)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        loss = model(**tok("hi", return_tensors="pt").to("cuda")).loss.double()
    engine, opt, _, _ = deepspeed.initialize(model=model, config="ds.json")
"""


@pytest.mark.parametrize("target", ["neuron", "accelerator"])
@pytest.mark.parametrize("unsafe", [False, True])
def test_realistic_idempotent_and_parses(target, unsafe):
    _settled(REALISTIC, target=target, unsafe_fixes=unsafe)


def test_realistic_neuron_findings_and_safe_rewrite():
    out = _settled(REALISTIC)
    codes = set(_codes(out))
    assert {"NP601", "NP602", "NP603", "NP604", "NP606", "NP607", "NP702", "NP706", "NP711", "NP712",
            "NP801", "NP802"} <= codes
    assert 'device_map="neuron"' in out.code
    assert "ProfilerActivity.PrivateUse1" in out.code
    assert 'device="neuron"' in out.code
    assert 'attn_implementation="flash_attention_2"' in out.code  # unsafe: not applied by default
    assert "fp16=True" in out.code
    # the guarded flash-attn import and its guarded use are warnings, deepspeed stays an error
    sev = {(f.code, f.line): f.severity for f in out.findings}
    assert sev[("NP702", 10)] == "warning" and sev[("NP702", 26)] == "warning"
    assert sev[("NP706", 15)] == "error" and sev[("NP706", 43)] == "error"


def test_realistic_unsafe_rewrite():
    out = _settled(REALISTIC, unsafe_fixes=True)
    assert 'attn_implementation="sdpa"' in out.code
    assert "torch_dtype=torch.bfloat16" in out.code
    assert "bf16=True" in out.code
