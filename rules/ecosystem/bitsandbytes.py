"""NP605 ``bitsandbytes-quantization``: ``load_in_8bit`` / ``load_in_4bit``, ``BitsAndBytesConfig`` and the
8-bit and paged optimizers named in ``TrainingArguments(optim=...)``, whose kernels are CUDA-only."""

from __future__ import annotations

import re

import libcst as cst

from neuron_port.rules.ecosystem.common import TRAINING_ARGS_RE
from neuron_port.rules.helpers.names import is_false, is_none, last_segment
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.spec import Invalid, PythonRule, Valid

# optim= names of TrainingArguments that run bitsandbytes kernels.
BNB_OPTIM_RE = re.compile(r"(8bit|bnb|paged|lion_32bit|ademamix)", re.IGNORECASE)


class BitsAndBytesQuantization(PythonRule):
    """Reports bitsandbytes quantization requested through Hugging Face arguments.

    ## What it does
    Finds ``load_in_8bit=True`` / ``load_in_4bit=True`` keywords, ``BitsAndBytesConfig(...)`` calls and
    bitsandbytes optimizers named in ``TrainingArguments(optim="paged_adamw_8bit")`` (``*8bit``,
    ``paged_*``, ``*bnb*``). The ``bitsandbytes`` package itself is NP707.

    ## Why is this bad?
    bitsandbytes ships CUDA kernels only: on a Trainium host loading fails ("requires the latest
    version of bitsandbytes" / no GPU found) or the optimizer cannot step. There is no drop-in 8-bit or
    4-bit (NF4) weight format for TorchNeuron training.

    ## Example
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, quantization_config=BitsAndBytesConfig(load_in_4bit=True))
    ```
    Use instead (shard the model with FSDP / ``tp_plan`` over NeuronCores if it does not fit one core):
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)
    ```

    ## Fix safety
    No automatic fix: dropping quantization multiplies the memory the model needs (2 bytes per parameter
    in bf16 instead of 0.5-1), so the sharding plan has to change too. QLoRA recipes become LoRA on a
    bf16 base model; ``optim="adamw_torch"`` replaces the 8-bit optimizers.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (bitsandbytes has no Neuron port) and https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html (sharding)
    - https://huggingface.co/docs/transformers/quantization/bitsandbytes
    """

    CODE = "NP605"
    NAME = "bitsandbytes-quantization"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = (
        "{what} uses bitsandbytes (CUDA-only kernels): load the model in bfloat16 and use a torch optimizer"
    )
    TRIGGERS = ("load_in_", "BitsAndBytes", "8bit", "paged_", "bnb")

    VALID = [
        Valid("import torch\nm = AutoModel.from_pretrained(name, torch_dtype=torch.bfloat16)\n"),
        Valid("m = AutoModel.from_pretrained(name, load_in_8bit=False)\n"),
        Valid('args = TrainingArguments(output_dir="o", optim="adamw_torch")\n'),
    ]
    INVALID = [
        Invalid("model = AutoModelForCausalLM.from_pretrained(name, load_in_8bit=True)\n", None),
        Invalid(
            "from transformers import BitsAndBytesConfig\n"
            "q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4')\n",
            None,
            message_contains="BitsAndBytesConfig",
        ),
        Invalid('args = TrainingArguments(output_dir="o", optim="paged_adamw_8bit")\n', None),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        last = last_segment(node.func)
        if last == "BitsAndBytesConfig":
            self.report(node, self.MESSAGE.format(what="`BitsAndBytesConfig(...)`"))
            return
        for arg in node.args:
            if arg.keyword is None:
                continue
            key = arg.keyword.value
            if key in ("load_in_8bit", "load_in_4bit") and not (is_none(arg.value) or is_false(arg.value)):
                self.report(arg, self.MESSAGE.format(what=f"`{key}=`"))
            elif key == "optim" and last is not None and TRAINING_ARGS_RE.match(last):
                value = string_value(arg.value)
                if value is not None and BNB_OPTIM_RE.search(value):
                    self.report(arg.value, self.MESSAGE.format(what=f'`optim="{value}"`'), effort="low")
