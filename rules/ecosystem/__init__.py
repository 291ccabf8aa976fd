"""NP6xx: the ecosystem around PyTorch (Hugging Face transformers / TRL, PyTorch Lightning).

Codes (stable):

- NP601 ``hf-device-map``: ``device_map="cuda"`` / ``"cuda:N"`` -> ``"neuron"``; ``"auto"`` noted.
- NP602 ``hf-pipeline-device``: ``pipeline(..., device=0)`` (an integer GPU index) -> ``"neuron"``.
- NP603 ``flash-attention-implementation``: ``attn_implementation="flash_attention_2"`` -> ``"sdpa"``.
- NP604 ``hf-float16-dtype``: ``from_pretrained(torch_dtype=torch.float16)`` -> advice for bfloat16.
- NP605 ``bitsandbytes-quantization``: ``load_in_8bit`` / ``load_in_4bit`` / ``BitsAndBytesConfig`` /
  8-bit and paged optimizers named in ``TrainingArguments(optim=...)``.
- NP606 ``hf-async-load``: ``from_pretrained`` (once per file) -> ``HF_DEACTIVATE_ASYNC_LOAD=1``.
- NP607 ``hf-fp16-training``: ``TrainingArguments(fp16=True)`` -> ``bf16=True``.
- NP608 ``lightning-accelerator``: Lightning ``accelerator="cuda"|"gpu"``, ``gpus=N``.
- NP609 ``lightning-precision``: Lightning ``precision="16-mixed"`` -> ``"bf16-mixed"``.

``device="cuda"`` keywords and ``.to("cuda")`` (on pipelines too) are NP101's; NP101 deliberately
skips ``device_map=`` and ``accelerator=`` values, which belong here. ``accelerate`` (``Accelerator``,
``mixed_precision=...``) is left alone: it picks the device itself. Facts: shared/torchneuron.md
section 7 (Hugging Face on TorchNeuron) and section 4 (bf16 is the recommended precision).
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from neuron_port.rules.spec import Invalid, PythonRule, Valid
from neuron_port.rules.helpers.names import dotted_name
from neuron_port.rules.device_placement.tables import CUDA_DEVICE_RE
from neuron_port.rules.helpers.calls import arg_named, keyword_arg, keyword_names, quote_of
from neuron_port.rules.helpers.nodes import expr, replace_string, string_value

HF_ASYNC_ENV = "HF_DEACTIVATE_ASYNC_LOAD"

# Callees (last name segment) that load a model and take device_map / torch_dtype.
HF_LOADERS = frozenset({"from_pretrained", "from_single_file", "from_config", "pipeline"})
# from_pretrained receivers that load no weights (tokenizers, configs, processors).
NON_MODEL_RECEIVER_RE = re.compile(r"(Tokenizer|Processor|Config|FeatureExtractor|Scheduler)", re.IGNORECASE)
# TrainingArguments and the TRL configs derived from it.
TRAINING_ARGS_RE = re.compile(r"^(\w*TrainingArguments|SFTConfig|DPOConfig|GRPOConfig|PPOConfig|RewardConfig|"
                              r"ORPOConfig|KTOConfig|CPOConfig|RLOOConfig|GKDConfig|OnlineDPOConfig)$")
# optim= names of TrainingArguments that run bitsandbytes kernels.
BNB_OPTIM_RE = re.compile(r"(8bit|bnb|paged|lion_32bit|ademamix)", re.IGNORECASE)
LIGHTNING_ROOTS = ("lightning", "pytorch_lightning", "lightning_fabric")
LIGHTNING_CALLEES = frozenset({"Trainer", "Fabric"})

NEURON_FIX_NOTE = "unsafe: `current_accelerator()` is None on CPU-only hosts"


def _last_segment(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def _is_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _is_none_or_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value in ("None", "False")


def _int_value(node: cst.BaseExpression) -> Optional[int]:
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(
        node.expression, cst.Integer
    ):
        return -int(node.expression.value)
    return None


def _accelerator_device(context, literal: cst.SimpleString) -> tuple[cst.BaseExpression, tuple]:
    """``"cuda"`` / ``"cuda:N"`` spelled with ``torch.accelerator`` (a string either way)."""
    torch_name, imports = context.torch_module_name()
    acc = f"{torch_name}.accelerator.current_accelerator().type"
    value = string_value(literal) or "cuda"
    if value in ("cuda", "cuda:0"):
        return expr(acc), imports
    quote = literal.quote
    return cst.parse_expression(f"f{quote}{{{acc}}}{value[4:]}{quote}"), imports


def _neuron_index(value: int, quote: str = '"') -> cst.SimpleString:
    return cst.SimpleString(f"{quote}neuron{quote}" if value == 0 else f"{quote}neuron:{value}{quote}")


# --------------------------------------------------------------------------------------------------


class HfDeviceMap(PythonRule):
    """Moves Hugging Face ``device_map="cuda"`` to ``"neuron"``; notes ``device_map="auto"``.

    ## What it does
    Finds ``device_map=`` keywords (``from_pretrained``, ``pipeline``, ``dispatch_model``, ...) whose
    value is ``"cuda"`` or ``"cuda:N"`` and rewrites them to ``"neuron"`` / ``"neuron:N"``. An integer
    (``device_map=0``, a GPU index) gets an unsafe fix to ``"neuron"``. ``"auto"``, ``"balanced"``,
    ``"balanced_low_0"`` and ``"sequential"`` are reported as information: what they do on a Neuron host
    depends on whether the installed transformers/accelerate know the neuron device. With
    ``--target accelerator`` the device becomes ``torch.accelerator.current_accelerator().type``.
    Values in a dict (``device_map={"": "cuda:0"}``) are device strings that NP101 rewrites.

    ## Why is this bad?
    ``device_map="cuda"`` asks accelerate to put the weights on a CUDA device, which fails on a Trainium
    host ("Torch not compiled with CUDA enabled"). ``device_map="neuron"`` is used in the wild and the
    2026 transformers / accelerate releases know the neuron device. ``"auto"`` balances over the GPUs
    accelerate can count; on a Neuron host with an older accelerate it may place everything on the CPU.

    ## Example
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, device_map="cuda")
    ```
    Use instead:
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, device_map="neuron")
    ```

    ## Fix safety
    Safe for the strings on the neuron target (the same placement on the Trainium device). Unsafe for
    integers (transformers' handling of an index on a non-CUDA device depends on its version) and on the
    accelerator target (``current_accelerator()`` is None on a CPU-only host). ``"auto"`` is never
    changed: check where the weights landed (``model.hf_device_map``) or load on CPU and ``.to("neuron")``.

    ## References
    - shared/torchneuron.md section 7 (HF Transformers: ``device_map="neuron"``, PR #44302)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html
    - https://huggingface.co/docs/accelerate/concept_guides/big_model_inference
    """

    CODE = "NP601"
    NAME = "hf-device-map"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    MESSAGE = '`device_map={value}` places the model on a CUDA device: use `device_map="neuron"`'
    TRIGGERS = ("device_map",)
    AUTO_VALUES = ("auto", "balanced", "balanced_low_0", "sequential")

    VALID = [
        Valid('model = AutoModel.from_pretrained(name, device_map="neuron")\n'),
        Valid('model = AutoModel.from_pretrained(name, device_map="cpu")\n'),
        Valid("model = AutoModel.from_pretrained(name, device_map=device_map)\n"),
        Valid('model = AutoModel.from_pretrained(name, device_map="meta")\n'),
        Valid("import torch\nm = AutoModel.from_pretrained(n, device_map=torch.accelerator.current_accelerator().type)\n",
              target="accelerator"),
    ]
    INVALID = [
        Invalid(
            'model = AutoModelForCausalLM.from_pretrained(name, device_map="cuda")\n',
            'model = AutoModelForCausalLM.from_pretrained(name, device_map="neuron")\n',
        ),
        Invalid(
            "pipe = pipeline('text-generation', model=m, device_map='cuda:1')\n",
            "pipe = pipeline('text-generation', model=m, device_map='neuron:1')\n",
        ),
        Invalid('model = AutoModel.from_pretrained(name, device_map="auto")\n', None, message_contains="auto"),
        Invalid(
            "model = AutoModel.from_pretrained(name, device_map=0)\n",
            'model = AutoModel.from_pretrained(name, device_map="neuron")\n',
            unsafe_fixes=True,
        ),
        Invalid(
            'import torch\nmodel = AutoModel.from_pretrained(name, device_map="cuda")\n',
            "import torch\nmodel = AutoModel.from_pretrained(name, device_map=torch.accelerator.current_accelerator().type)\n",
            target="accelerator",
            unsafe_fixes=True,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        arg = arg_named(node, "device_map")
        if arg is None:
            return
        value_node = arg.value
        value = string_value(value_node)
        if value in self.AUTO_VALUES:
            self.report(
                value_node,
                f'`device_map="{value}"` spreads the model over the devices accelerate can count; whether it '
                "knows NeuronCores depends on the transformers/accelerate version (unconfirmed): use "
                '`device_map="neuron"` for a model that fits one core, or check `model.hf_device_map`',
                severity="info",
                effort="low",
            )
            return
        if isinstance(value_node, cst.SimpleString) and value is not None and CUDA_DEVICE_RE.match(value):
            message = self.MESSAGE.format(value=repr(value))
            if self.context.target == "accelerator":
                new, imports = _accelerator_device(self.context, value_node)
                self.report(value_node, message.replace('`device_map="neuron"`',
                                                        "the current accelerator") + f" ({NEURON_FIX_NOTE})",
                            replacement=new, imports=imports, safety="unsafe")
            else:
                self.report(value_node, message, replacement=replace_string(value_node, "neuron" + value[4:]))
            return
        index = _int_value(value_node)
        if index is not None and index >= 0:
            message = (f"`device_map={index}` is a GPU index in transformers/accelerate: use "
                       '`device_map="neuron"`')
            if self.context.target == "accelerator":
                self.report(value_node, message + " on Trainium, guarded by device type", effort="low")
            else:
                self.report(value_node, message, replacement=_neuron_index(index), safety="unsafe")


def _is_hf_pipeline(context, func: cst.BaseExpression) -> bool:
    qualname = context.qualname(func) or ""
    return qualname in ("transformers.pipeline", "transformers.pipelines.pipeline")


class HfPipelineDevice(PythonRule):
    """Moves ``pipeline(..., device=0)`` (a CUDA GPU index) to the neuron device.

    ## What it does
    Finds ``transformers.pipeline(...)`` calls whose ``device=`` is a non-negative integer literal and
    rewrites it to ``"neuron"`` (``device=N`` becomes ``"neuron:N"``). ``device=-1`` (the CPU) is left
    alone. String devices (``device="cuda"``) and ``pipe.to("cuda")`` are device strings rewritten by
    NP101. With ``--target accelerator`` the index becomes ``torch.accelerator.current_accelerator()``.

    ## Why is this bad?
    transformers turns an integer device into ``cuda:N`` when CUDA is available and into the index of a
    device type it knows otherwise (npu, xpu, mps, ...); on a Neuron host the integer is not a neuron
    device in the releases that predate neuron support, so the pipeline fails or runs on the CPU.

    ## Example
    ```python
    pipe = pipeline("text-generation", model=name, device=0)
    ```
    Use instead:
    ```python
    pipe = pipeline("text-generation", model=name, device="neuron")
    ```

    ## Fix safety
    Safe on the neuron target: ``"neuron"`` is the device the integer meant (the first accelerator).
    Unsafe on the accelerator target: ``current_accelerator()`` is the *current* device (usually
    index 0) and None on a CPU-only host, where the pipeline then runs on the CPU.

    ## References
    - https://huggingface.co/docs/transformers/main_classes/pipelines
    - shared/torchneuron.md section 7 item 1
    """

    CODE = "NP602"
    NAME = "hf-pipeline-device"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    MESSAGE = '`pipeline(device={index})` is a CUDA GPU index: use `device="neuron"`'
    TRIGGERS = ("pipeline",)

    VALID = [
        Valid('from transformers import pipeline\npipe = pipeline("fill-mask", model=m, device=-1)\n'),
        Valid('from transformers import pipeline\npipe = pipeline("fill-mask", model=m, device="cpu")\n'),
        Valid("from transformers import pipeline\npipe = pipeline('fill-mask', model=m, device=device)\n"),
        Valid("pipe = make_pipeline(StandardScaler(), device=0)\n"),  # not transformers
    ]
    INVALID = [
        Invalid(
            'from transformers import pipeline\npipe = pipeline("text-generation", model=name, device=0)\n',
            'from transformers import pipeline\npipe = pipeline("text-generation", model=name, device="neuron")\n',
        ),
        Invalid(
            "import transformers\npipe = transformers.pipeline('asr', model=m, device=1)\n",
            "import transformers\npipe = transformers.pipeline('asr', model=m, device='neuron:1')\n",
        ),
        Invalid(
            "import torch\nfrom transformers import pipeline\npipe = pipeline('asr', model=m, device=0)\n",
            "import torch\nfrom transformers import pipeline\n"
            "pipe = pipeline('asr', model=m, device=torch.accelerator.current_accelerator())\n",
            target="accelerator",
            unsafe_fixes=True,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_hf_pipeline(self.context, node.func):
            return
        arg = arg_named(node, "device")
        if arg is None:
            return
        index = _int_value(arg.value)
        if index is None or index < 0:
            return
        message = self.MESSAGE.format(index=index)
        if self.context.target == "accelerator":
            if index != 0:
                self.report(arg.value, message + " on Trainium, guarded by device type", effort="low")
                return
            torch_name, imports = self.context.torch_module_name()
            self.report(arg.value, message.replace('`device="neuron"`', "the current accelerator")
                        + f" ({NEURON_FIX_NOTE})",
                        replacement=expr(f"{torch_name}.accelerator.current_accelerator()"),
                        imports=imports, safety="unsafe")
            return
        self.report(arg.value, message, replacement=_neuron_index(index, quote_of(node)))


FLASH_IMPLEMENTATIONS = ("flash_attention_2", "flash_attention_3")


class FlashAttentionImplementation(PythonRule):
    """Switches Hugging Face ``attn_implementation="flash_attention_2"`` to ``"sdpa"``.

    ## What it does
    Finds ``attn_implementation="flash_attention_2"`` (or ``"flash_attention_3"``) keywords, the
    assignments ``config._attn_implementation = "flash_attention_2"``, and the deprecated
    ``use_flash_attention_2=True``, and offers ``"sdpa"`` (``torch.nn.functional.scaled_dot_product_attention``).

    ## Why is this bad?
    ``flash_attention_2`` loads the ``flash_attn`` package, whose kernels are CUDA-only: model loading
    fails on a Trainium host ("FlashAttention2 has been toggled on, but it cannot be used..."). SDPA
    runs on TorchNeuron, which dispatches it to its NKI flash-attention kernel when the shapes allow
    (sequence lengths multiples of 512, head dim <= 128, no dropout) and to a generic path otherwise.

    ## Example
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="flash_attention_2")
    ```
    Use instead:
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="sdpa")
    ```

    ## Fix safety
    Unsafe: the attention is computed by another kernel, so results differ in the last bits; code
    relying on flash-attn specifics (unpadded/varlen batches through ``position_ids`` packing,
    sliding-window support of a model) may need ``"eager"`` instead. The same on both targets (SDPA runs
    on GPUs too).

    ## References
    - shared/torchneuron.md sections 5 (SDPA on neuron) and 7 ("attn_implementation='eager' or SDPA
      instead of flash-attn")
    - https://huggingface.co/docs/transformers/perf_infer_gpu_one#pytorch-scaled-dot-product-attention
    """

    CODE = "NP603"
    NAME = "flash-attention-implementation"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    MESSAGE = (
        "`{value}` needs the CUDA-only flash_attn package: use `\"sdpa\"` (TorchNeuron dispatches SDPA to "
        "its NKI flash-attention kernel)"
    )
    TRIGGERS = ("flash_attention",)

    VALID = [
        Valid('model = AutoModel.from_pretrained(name, attn_implementation="sdpa")\n'),
        Valid('model = AutoModel.from_pretrained(name, attn_implementation="eager")\n'),
        Valid("model = AutoModel.from_pretrained(name, use_flash_attention_2=False)\n"),
        Valid('model = AutoModel.from_pretrained(name, attn_implementation="sdpa")\n', target="accelerator"),
    ]
    INVALID = [
        Invalid(
            'model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="flash_attention_2")\n',
            'model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="sdpa")\n',
            unsafe_fixes=True,
        ),
        Invalid('model = AutoModel.from_pretrained(name, attn_implementation="flash_attention_2")\n', None),
        Invalid(
            "config._attn_implementation = 'flash_attention_2'\n",
            "config._attn_implementation = 'sdpa'\n",
            unsafe_fixes=True,
        ),
        Invalid(
            "model = AutoModel.from_pretrained(name, use_flash_attention_2=True)\n",
            'model = AutoModel.from_pretrained(name, attn_implementation="sdpa")\n',
            unsafe_fixes=True,
        ),
        Invalid(
            'model = AutoModel.from_pretrained(name, attn_implementation="flash_attention_2")\n',
            'model = AutoModel.from_pretrained(name, attn_implementation="sdpa")\n',
            target="accelerator",
            unsafe_fixes=True,
        ),
    ]

    def _string(self, node: cst.BaseExpression) -> None:
        value = string_value(node)
        if value in FLASH_IMPLEMENTATIONS and isinstance(node, cst.SimpleString):
            self.report(node, self.MESSAGE.format(value=f'"{value}"'), replacement=replace_string(node, "sdpa"))

    def visit_Call(self, node: cst.Call) -> None:
        for arg in node.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value == "attn_implementation":
                self._string(arg.value)
            elif arg.keyword.value == "use_flash_attention_2" and _is_true(arg.value):
                if "attn_implementation" in keyword_names(node):
                    self.report(arg, self.MESSAGE.format(value="use_flash_attention_2=True") + "; drop it")
                    continue
                new = keyword_arg("attn_implementation", cst.SimpleString('"sdpa"'))
                self.report(node, self.MESSAGE.format(value="use_flash_attention_2=True"),
                            replacement=node.with_changes(
                                args=[new.with_changes(comma=a.comma, whitespace_after_arg=a.whitespace_after_arg)
                                      if a is arg else a for a in node.args]))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if _last_segment(target.target) in ("_attn_implementation", "attn_implementation") and isinstance(
                target.target, cst.Attribute
            ):
                self._string(node.value)
                return


def _loader_call(node: cst.Call) -> bool:
    return _last_segment(node.func) in HF_LOADERS


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
    - shared/torchneuron.md section 4 ("BF16 is the recommended precision")
    - https://huggingface.co/docs/transformers/main_classes/model#model-instantiation-dtype
    """

    CODE = "NP604"
    NAME = "hf-float16-dtype"
    SEVERITY = "info"
    FIX_AVAILABILITY = "always"
    FIX_SAFETY = "unsafe"
    MESSAGE = "float16 weights: bfloat16 is the recommended precision on Trainium (float32 range, no overflow)"
    TRIGGERS = ("float16", "half")

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
    - shared/torchneuron.md section 7 (bitsandbytes has no Neuron port) and section 6 (sharding)
    - https://huggingface.co/docs/transformers/quantization/bitsandbytes
    """

    CODE = "NP605"
    NAME = "bitsandbytes-quantization"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = (
        "{what} uses bitsandbytes, whose kernels are CUDA-only: load the model in bfloat16 (shard it over "
        "NeuronCores if it does not fit) and use a torch optimizer"
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
        last = _last_segment(node.func)
        if last == "BitsAndBytesConfig":
            self.report(node, self.MESSAGE.format(what="`BitsAndBytesConfig(...)`"))
            return
        for arg in node.args:
            if arg.keyword is None:
                continue
            key = arg.keyword.value
            if key in ("load_in_8bit", "load_in_4bit") and not _is_none_or_false(arg.value):
                self.report(arg, self.MESSAGE.format(what=f"`{key}=`"))
            elif key == "optim" and last is not None and TRAINING_ARGS_RE.match(last):
                value = string_value(arg.value)
                if value is not None and BNB_OPTIM_RE.search(value):
                    self.report(arg.value, self.MESSAGE.format(what=f'`optim="{value}"`'), effort="low")


class HfAsyncLoad(PythonRule):
    """Advises ``HF_DEACTIVATE_ASYNC_LOAD=1`` once per file that loads Hugging Face weights.

    ## What it does
    Reports the first ``from_pretrained`` / ``from_single_file`` call of a file that loads a model (not
    a tokenizer, processor, config or scheduler), once per file, unless the file already mentions
    ``HF_DEACTIVATE_ASYNC_LOAD``.

    ## Why is this bad?
    Hugging Face's own Trainium example (TRL, PR #5125) sets ``HF_DEACTIVATE_ASYNC_LOAD=1`` before
    loading, with the comment "Disable asynchronous loading to avoid hanging": the background weight
    loading threads can hang on the Neuron runtime.

    ## Example
    ```python
    model = AutoModelForCausalLM.from_pretrained(name)
    ```
    Use instead (or export it in the launch script):
    ```python
    os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")
    model = AutoModelForCausalLM.from_pretrained(name)
    ```

    ## Fix safety
    No automatic fix: where the variable belongs (launch script, top of the entry point) is the
    user's choice; it must be set before the weights load.

    ## References
    - shared/torchneuron.md section 7 (HF_DEACTIVATE_ASYNC_LOAD, huggingface/trl PR #5125)
    """

    CODE = "NP606"
    NAME = "hf-async-load"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = (
        "set HF_DEACTIVATE_ASYNC_LOAD=1 before loading Hugging Face weights on Trainium (HF's neuron example "
        "does: asynchronous loading can hang); reported once per file"
    )
    TRIGGERS = ("from_pretrained", "from_single_file")

    VALID = [
        Valid('import os\nos.environ["HF_DEACTIVATE_ASYNC_LOAD"] = "1"\nm = AutoModel.from_pretrained(name)\n'),
        Valid("tok = AutoTokenizer.from_pretrained(name)\ncfg = AutoConfig.from_pretrained(name)\n"),
    ]
    INVALID = [
        Invalid("model = AutoModelForCausalLM.from_pretrained(name)\nref = AutoModel.from_pretrained(other)\n", None),
        Invalid("from peft import PeftModel\nmodel = PeftModel.from_pretrained(base, adapter)\n", None,
                target="accelerator"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._first: Optional[cst.Call] = None
        self._mentioned = False

    def visit_Call(self, node: cst.Call) -> None:
        if self._first is not None or not isinstance(node.func, cst.Attribute):
            return
        if node.func.attr.value not in ("from_pretrained", "from_single_file"):
            return
        receiver = dotted_name(node.func.value) or ""
        if NON_MODEL_RECEIVER_RE.search(receiver.rsplit(".", 1)[-1]):
            return
        self._first = node

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if HF_ASYNC_ENV in node.value:
            self._mentioned = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._first is not None and not self._mentioned:
            self.report(self._first)


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
    - shared/torchneuron.md section 4; huggingface/transformers PR #44302 (neuron in TrainingArguments)
    - https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments
    """

    CODE = "NP607"
    NAME = "hf-fp16-training"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    MESSAGE = "`{key}=True` trains in float16 with loss scaling: use `{new}=True` (bfloat16 is recommended on Trainium)"
    TRIGGERS = ("fp16",)

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
            "from trl import SFTConfig\ncfg = SFTConfig(\n    output_dir='o',\n    fp16=True,\n    fp16_full_eval=True,\n)\n",
            "from trl import SFTConfig\ncfg = SFTConfig(\n    output_dir='o',\n    bf16=True,\n    bf16_full_eval=True,\n)\n",
            unsafe_fixes=True,
        ),
        Invalid('args = Seq2SeqTrainingArguments(output_dir="o", fp16=True, bf16=False)\n', None,
                unsafe_fixes=True),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        last = _last_segment(node.func)
        if last is None or not TRAINING_ARGS_RE.match(last):
            return
        has_bf16 = "bf16" in keyword_names(node)
        for arg in node.args:
            if arg.keyword is None or arg.keyword.value not in ("fp16", "fp16_full_eval") or not _is_true(arg.value):
                continue
            key = arg.keyword.value
            new = key.replace("fp16", "bf16")
            message = self.MESSAGE.format(key=key, new=new)
            if has_bf16:
                self.report(arg, message + " (not rewritten: the call also sets bf16)", effort="low")
            else:
                self.report(arg.keyword, message, replacement=cst.Name(new))


def _is_lightning_callee(context, func: cst.BaseExpression) -> bool:
    if _last_segment(func) not in LIGHTNING_CALLEES:
        return False
    qualname = context.qualname(func) or ""
    return qualname.split(".")[0] in LIGHTNING_ROOTS


class LightningAccelerator(PythonRule):
    """Reports Lightning ``Trainer`` / ``Fabric`` set up for CUDA GPUs.

    ## What it does
    Finds ``accelerator="cuda"`` / ``"gpu"`` and the pre-2.0 ``gpus=N`` in ``lightning.Trainer``,
    ``pytorch_lightning.Trainer`` and ``lightning.Fabric`` calls, and reports them.

    ## Why is this bad?
    On a Trainium host there is no CUDA device, so the Trainer fails at start-up ("CUDAAccelerator can
    not run on your system since the accelerator is not available"). Whether Lightning ships a neuron
    accelerator is **not confirmed** (the Neuron docs list transformers, diffusers, PEFT and accelerate
    as running natively, not Lightning), so there is no spelling to rewrite to; ``accelerator="auto"``
    would silently train on the CPU.

    ## Example
    ```python
    trainer = L.Trainer(accelerator="gpu", devices=8, precision="16-mixed")
    ```
    Use instead: a custom ``lightning.pytorch.accelerators.Accelerator`` subclass for the ``neuron``
    device (``setup_device`` -> ``torch.neuron.set_device``, ``auto_device_count`` ->
    ``torch.neuron.device_count``), or a plain PyTorch / accelerate training loop.

    ## Fix safety
    No automatic fix (see above). ``devices=N`` counts logical NeuronCores (4 per Trainium2 chip at
    LNC=2), not GPUs.

    ## References
    - shared/torchneuron.md section 7 ("Hugging Face transformers, diffusers, PEFT, and accelerate run
      natively"); https://lightning.ai/docs/pytorch/stable/extensions/accelerator.html
    """

    CODE = "NP608"
    NAME = "lightning-accelerator"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = (
        "Lightning `{what}` needs CUDA GPUs; a Lightning accelerator for neuron is not confirmed: write a "
        "custom Accelerator for the neuron device or port the loop to plain PyTorch/accelerate"
    )
    TRIGGERS = ("accelerator", "gpus")

    VALID = [
        Valid('import lightning as L\ntrainer = L.Trainer(accelerator="cpu", devices=1)\n'),
        Valid("from accelerate import Accelerator\nacc = Accelerator(mixed_precision='bf16')\n"),
        Valid('trainer = Trainer(model=model, args=args)\n'),  # transformers.Trainer
        Valid('import lightning as L\nt = L.Trainer(accelerator="mps")\n', target="accelerator"),
    ]
    INVALID = [
        Invalid('import lightning as L\ntrainer = L.Trainer(accelerator="gpu", devices=8)\n', None),
        Invalid("from pytorch_lightning import Trainer\ntrainer = Trainer(gpus=2)\n", None),
        Invalid("from lightning.fabric import Fabric\nfabric = Fabric(accelerator='cuda')\n", None,
                target="accelerator"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_lightning_callee(self.context, node.func):
            return
        for arg in node.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value == "accelerator" and string_value(arg.value) in ("cuda", "gpu"):
                self.report(arg.value, self.MESSAGE.format(what=f'accelerator="{string_value(arg.value)}"'))
            elif arg.keyword.value == "gpus" and not _is_none_or_false(arg.value) and _int_value(arg.value) != 0:
                self.report(arg, self.MESSAGE.format(what="gpus="))


class LightningPrecision(PythonRule):
    """Advises ``precision="bf16-mixed"`` instead of float16 in Lightning.

    ## What it does
    Finds ``precision="16-mixed"`` / ``"16"`` / ``16`` / ``"16-true"`` in Lightning ``Trainer`` and
    ``Fabric`` calls and offers ``"bf16-mixed"`` (``"bf16-true"``).

    ## Why is this bad?
    float16 mixed precision needs loss scaling; bfloat16 is the recommended precision on Trainium and
    does not. (The accelerator itself is NP608.)

    ## Example
    ```python
    trainer = L.Trainer(precision="16-mixed")
    ```
    Use instead:
    ```python
    trainer = L.Trainer(precision="bf16-mixed")
    ```

    ## Fix safety
    Unsafe: a precision change (see NP604).

    ## References
    - shared/torchneuron.md section 4
    - https://lightning.ai/docs/pytorch/stable/common/precision_basic.html
    """

    CODE = "NP609"
    NAME = "lightning-precision"
    SEVERITY = "info"
    FIX_AVAILABILITY = "always"
    FIX_SAFETY = "unsafe"
    MESSAGE = "float16 precision {value}: use `{new}` (bfloat16 is recommended on Trainium, no loss scaling)"
    TRIGGERS = ("precision",)

    VALID = [
        Valid('import lightning as L\ntrainer = L.Trainer(precision="bf16-mixed")\n'),
        Valid("from accelerate import Accelerator\nacc = Accelerator(mixed_precision='fp16')\n"),
    ]
    INVALID = [
        Invalid(
            'import lightning as L\ntrainer = L.Trainer(accelerator="gpu", precision="16-mixed")\n',
            'import lightning as L\ntrainer = L.Trainer(accelerator="gpu", precision="bf16-mixed")\n',
            unsafe_fixes=True,
        ),
        Invalid(
            "import pytorch_lightning as pl\ntrainer = pl.Trainer(precision=16)\n",
            'import pytorch_lightning as pl\ntrainer = pl.Trainer(precision="bf16-mixed")\n',
            unsafe_fixes=True,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_lightning_callee(self.context, node.func):
            return
        arg = arg_named(node, "precision")
        if arg is None:
            return
        value = arg.value
        text = string_value(value)
        if text is None and _int_value(value) == 16:
            text = "16"
        if text not in ("16", "16-mixed", "16-true"):
            return
        new = "bf16-true" if text == "16-true" else "bf16-mixed"
        message = self.MESSAGE.format(value=f"`{text}`", new=f'"{new}"')
        if isinstance(value, cst.SimpleString):
            self.report(value, message, replacement=replace_string(value, new))
        else:
            self.report(value, message, replacement=cst.SimpleString(f'"{new}"'))

