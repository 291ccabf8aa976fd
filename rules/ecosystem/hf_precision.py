"""NP604 ``hf-float16-dtype`` (``from_pretrained(torch_dtype=torch.float16)`` -> bfloat16) and NP607
``hf-fp16-training`` (``TrainingArguments(fp16=True)`` -> ``bf16=True``): float16 in Hugging Face loading
and training, where bfloat16 is the recommended precision on Trainium."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.ecosystem.common import TRAINING_ARGS_RE
from neuron_port.rules.helpers.calls import keyword_names
from neuron_port.rules.helpers.names import is_true, last_segment
from neuron_port.rules.helpers.nodes import replace_string, string_value
from neuron_port.rules.spec import Invalid, PythonRule, Valid

# Callees (last name segment) that load a model and take device_map / torch_dtype.
HF_LOADERS = frozenset({"from_pretrained", "from_single_file", "from_config", "pipeline"})


def _loader_call(node: cst.Call) -> bool:
    return last_segment(node.func) in HF_LOADERS


class HfFloat16Dtype(PythonRule):
    """Advises bfloat16 instead of float16 when loading Hugging Face models.

    ## What it does
    Finds ``torch_dtype=torch.float16`` / ``torch.half`` / ``"float16"`` (and the newer ``dtype=``
    keyword) in ``from_pretrained``, ``from_single_file``, ``from_config`` and ``pipeline`` calls and
    offers ``torch.bfloat16``.

    ## Why is this bad?
    float16 runs on Trainium, but bfloat16 is its recommended precision: the same throughput with
    float32's exponent range, so no overflow in activations and no loss scaling. Many checkpoints were
    trained in bf16 and only loaded in fp16 because older GPUs lacked bf16.

    ## Example
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)
    ```
    Use instead:
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)
    ```

    ## Fix safety
    Unsafe: a precision change (three fewer mantissa bits, much wider range); outputs differ slightly
    and a model that was validated in fp16 should be re-checked.

    ## References
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py ("BF16 is the recommended precision")
    - https://huggingface.co/docs/transformers/main_classes/model#model-instantiation-dtype
    """

    CODE = "NP604"
    NAME = "hf-float16-dtype"
    SEVERITY = "info"
    FIX_AVAILABILITY = "always"
    FIX_SAFETY = "unsafe"
    MESSAGE = "float16 weights: bfloat16 is the recommended precision on Trainium (float32 range, no overflow)"
    TRIGGERS = (r"dtype\s*=\s*\(*\s*(?:\w+\s*\.\s*)+(?:float16|half)\b", 'dtype\\s*=\\s*\\(*\\s*[rRuU]?["\'](?:float16|fp16|half)["\']')

    VALID = [
        Valid("import torch\nm = AutoModel.from_pretrained(name, torch_dtype=torch.bfloat16)\n"),
        Valid("import torch\nm = AutoModel.from_pretrained(name, torch_dtype=torch.float32)\n"),
        Valid("import torch\nx = torch.zeros(3, dtype=torch.float16)\n"),  # not a model load
    ]
    INVALID = [
        Invalid(
            "import torch\nmodel = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)\n",
            "import torch\nmodel = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)\n",
            unsafe_fixes=True,
        ),
        Invalid("import torch as th\nm = AutoModel.from_pretrained(name, dtype=th.half)\n", None),
        Invalid(
            "pipe = pipeline('text-generation', model=m, torch_dtype='float16')\n",
            "pipe = pipeline('text-generation', model=m, torch_dtype='bfloat16')\n",
            unsafe_fixes=True,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not _loader_call(node):
            return
        for arg in node.args:
            if arg.keyword is None or arg.keyword.value not in ("torch_dtype", "dtype"):
                continue
            value = arg.value
            if isinstance(value, cst.SimpleString) and string_value(value) in ("float16", "fp16", "half"):
                self.report(value, replacement=replace_string(value, "bfloat16"))
            elif isinstance(value, cst.Attribute) and self.context.qualname(value) in ("torch.float16", "torch.half"):
                self.report(value, replacement=value.with_changes(attr=cst.Name("bfloat16")))


class HfFp16Training(PythonRule):
    """Advises ``bf16=True`` instead of ``fp16=True`` in ``TrainingArguments``.

    ## What it does
    Finds ``fp16=True`` (and ``fp16_full_eval=True``) in ``TrainingArguments``,
    ``Seq2SeqTrainingArguments`` and the TRL configs derived from them (``SFTConfig``, ``DPOConfig``,
    ``GRPOConfig``, ...) and offers ``bf16=True`` (``bf16_full_eval=True``).

    ## Why is this bad?
    ``fp16=True`` makes the Trainer use float16 autocast with a ``GradScaler``; bfloat16 is the
    recommended precision on Trainium and needs no loss scaling. Older transformers releases also
    refuse ``fp16=True`` when no CUDA device is present ("FP16 Mixed precision training with AMP or APEX
    (`--fp16`) ... can only be used on CUDA ... devices").

    ## Example
    ```python
    args = TrainingArguments(output_dir="out", fp16=True)
    ```
    Use instead:
    ```python
    args = TrainingArguments(output_dir="out", bf16=True)
    ```

    ## Fix safety
    Unsafe: a precision change (see NP604). Not offered when the call also passes ``bf16=``.

    ## References
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py; huggingface/transformers PR #44302 (neuron in TrainingArguments)
    - https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments
    """

    CODE = "NP607"
    NAME = "hf-fp16-training"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    MESSAGE = "`{key}=True` trains in float16 with loss scaling: use `{new}=True` (bfloat16 is recommended on Trainium)"
    TRIGGERS = (r"fp16(?<!\wfp16)(?:_full_eval)?\s*=",)

    VALID = [
        Valid('args = TrainingArguments(output_dir="out", bf16=True)\n'),
        Valid('args = TrainingArguments(output_dir="out", fp16=False)\n'),
        Valid("acc = Accelerator(mixed_precision='fp16')\n"),  # accelerate is left alone
        Valid("cfg = MyArgs(fp16=True)\n"),
    ]
    INVALID = [
        Invalid(
            'args = TrainingArguments(output_dir="out", fp16=True)\n',
            'args = TrainingArguments(output_dir="out", bf16=True)\n',
            unsafe_fixes=True,
        ),
        Invalid(
            "from trl import SFTConfig\n"
            "cfg = SFTConfig(\n    output_dir='o',\n    fp16=True,\n    fp16_full_eval=True,\n)\n",
            "from trl import SFTConfig\n"
            "cfg = SFTConfig(\n    output_dir='o',\n    bf16=True,\n    bf16_full_eval=True,\n)\n",
            unsafe_fixes=True,
        ),
        Invalid('args = Seq2SeqTrainingArguments(output_dir="o", fp16=True, bf16=False)\n', None,
                unsafe_fixes=True),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        last = last_segment(node.func)
        if last is None or not TRAINING_ARGS_RE.match(last):
            return
        has_bf16 = "bf16" in keyword_names(node)
        for arg in node.args:
            if arg.keyword is None or arg.keyword.value not in ("fp16", "fp16_full_eval") or not is_true(arg.value):
                continue
            key = arg.keyword.value
            new = key.replace("fp16", "bf16")
            message = self.MESSAGE.format(key=key, new=new)
            if has_bf16:
                self.report(arg, message + " (not rewritten: the call also sets bf16)", effort="low")
            else:
                self.report(arg.keyword, message, replacement=cst.Name(new))
