"""NP6xx beyond the per-rule examples: no double reports with NP101, accelerate left alone, the
Hugging Face async-load advice once per file."""

from __future__ import annotations

import json

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
        from transformers import AutoModel, AutoTokenizer
        tok = AutoTokenizer.from_pretrained(name)
        a = AutoModel.from_pretrained(name)
        b = AutoModel.from_pretrained(other)
    """, rule)
    assert [f.line for f in out.findings] == [3]
    out = _run("""
        from transformers import AutoModel
        m = AutoModel.from_pretrained(name)
        os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")
    """, rule)
    assert out.findings == []


def test_hf_async_load_only_for_loaders_that_read_it():
    """A project's own from_pretrained, a diffusers model class or a PEFT adapter comes first in the file:
    the advice goes to the transformers load further down, the one that reads the variable."""
    out = _run("""
        from diffusers import AutoencoderKL
        from peft import PeftModel
        from transformers import AutoModelForCausalLM as LM
        from .modeling import MyModel
        vae = AutoencoderKL.from_pretrained(name)
        mine = MyModel.from_pretrained(path)
        model = PeftModel.from_pretrained(base, adapter)
        base = LM.from_pretrained(name)
    """, [rule_by_code("NP606")])
    assert [(f.code, f.line) for f in out.findings] == [("NP606", 8)]


def _notebook(*cells: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                                  "source": cell} for cell in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_hf_async_load_once_per_notebook(tmp_path, cli):
    """Each cell is its own pass; the advice is still given once for the notebook (the file)."""
    notebook = tmp_path / "explore.ipynb"
    notebook.write_text(_notebook(
        "from transformers import AutoModelForCausalLM\n",
        "model = AutoModelForCausalLM.from_pretrained('gpt2')\n",
        "ref = AutoModelForCausalLM.from_pretrained('gpt2-medium')\n",
    ))
    result = cli("rewrite", "--check", "--select", "NP606", "--output-format", "json", str(notebook))
    findings = json.loads(result.stdout)["findings"]
    assert [(f["code"], f["cell"]) for f in findings] == [("NP606", 2)], result.stdout
