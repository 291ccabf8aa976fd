"""NP6xx beyond the per-rule examples: no double reports with NP101, accelerate left alone, the
Hugging Face async-load advice once per file."""

from __future__ import annotations

from neuron_port.rules.registry import rule_by_code
from rule_runs import codes_of as _codes, run_rules as _run


# -- no double reports with the device rules -------------------------------------------------------

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


# -- code left alone -------------------------------------------------------------------------------

def test_accelerate_is_left_alone():
    out = _run("""
        from accelerate import Accelerator
        accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=4)
        model, opt = accelerator.prepare(model, opt)
        accelerator.backward(loss)
    """)
    assert _codes(out) == []


# -- once per file ---------------------------------------------------------------------------------

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
