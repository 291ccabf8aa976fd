"""Rules of several families on one file (NP3xx with NP4xx, NP6xx-NP8xx together, or every rule as
`neuron-port rewrite` runs them): code none of them may touch stays as it is, the pre-filter skips plain
files, and realistic training scripts are rewritten, settle and parse on both targets."""

from __future__ import annotations

import textwrap

import pytest

from neuron_port.rewrite.engine import transform_source, triggers_for
from neuron_port.rules.registry import all_rules, select_rules
from rule_runs import codes_of as _codes, np6_to_np8_rules as _mine, run_rules as _run, settled as _settled
from rule_runs import snippet as _src


# -- code no rule may touch ------------------------------------------------------------------------

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


def test_prose_untouched():
    src = '''\
    """Train on cuda; see CUDA_VISIBLE_DEVICES and nccl."""
    import logging
    log = logging.getLogger(__name__)
    log.warning("cuda")
    print("cuda is not available", "nccl")
    msg = "falling back from cuda to cpu"
    '''
    out = _run(src, all_rules(), unsafe_fixes=True)
    assert out.code == textwrap.dedent(src)


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


# -- a realistic training script, every rule (NP2xx, NP3xx, NP4xx) ---------------------------------

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


# -- the accelerator target (NP6xx-NP8xx) ----------------------------------------------------------

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


# -- a realistic script with every family ----------------------------------------------------------

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
