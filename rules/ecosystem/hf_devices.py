"""NP601 ``hf-device-map`` (``device_map="cuda"`` / ``"cuda:N"`` -> ``"neuron"``; ``"auto"`` noted) and
NP602 ``hf-pipeline-device`` (``pipeline(..., device=0)``, an integer GPU index -> ``"neuron"``): where
Hugging Face loaders put a model."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.device_placement.tables import CUDA_DEVICE_RE
from neuron_port.rules.helpers.calls import arg_named, quote_of
from neuron_port.rules.helpers.names import int_value
from neuron_port.rules.helpers.nodes import expr, replace_string, string_value
from neuron_port.rules.spec import FRAGMENT, Invalid, PythonRule, Valid

NEURON_FIX_NOTE = "unsafe: `current_accelerator()` is None on CPU-only hosts"


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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (HF Transformers: ``device_map="neuron"``, PR #44302)
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
        Valid("import torch\n"
              "m = AutoModel.from_pretrained(n, device_map=torch.accelerator.current_accelerator().type)\n",
              target="accelerator"),
    ]
    INVALID = [
        Invalid(
            'model = AutoModelForCausalLM.from_pretrained(name, device_map="cuda")\n',
            'model = AutoModelForCausalLM.from_pretrained(name, device_map="neuron")\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "pipe = pipeline('text-generation', model=m, device_map='cuda:1')\n",
            "pipe = pipeline('text-generation', model=m, device_map='neuron:1')\n",
            not_runnable=FRAGMENT,
        ),
        Invalid('model = AutoModel.from_pretrained(name, device_map="auto")\n', None, message_contains="auto"),
        Invalid(
            "model = AutoModel.from_pretrained(name, device_map=0)\n",
            'model = AutoModel.from_pretrained(name, device_map="neuron")\n',
            unsafe_fixes=True,
        ),
        Invalid(
            'import torch\nmodel = AutoModel.from_pretrained(name, device_map="cuda")\n',
            "import torch\n"
            "model = AutoModel.from_pretrained(name, device_map=torch.accelerator.current_accelerator().type)\n",
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
                f'`device_map="{value}"`: whether accelerate counts NeuronCores is not confirmed: use '
                '`device_map="neuron"` for a model that fits one core',
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
        index = int_value(value_node)
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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
    """

    CODE = "NP602"
    NAME = "hf-pipeline-device"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    MESSAGE = '`pipeline(device={index})` is a CUDA GPU index: use `device="neuron"`'
    TRIGGERS = (r"\.[ \t]*(?:pipeline)\b", r"pipeline(?<!\wpipeline)\s*\(", r"pipeline(?<!\wpipeline)\s+as\b")

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
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import transformers\npipe = transformers.pipeline('asr', model=m, device=1)\n",
            "import transformers\npipe = transformers.pipeline('asr', model=m, device='neuron:1')\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\nfrom transformers import pipeline\npipe = pipeline('asr', model=m, device=0)\n",
            "import torch\nfrom transformers import pipeline\n"
            "pipe = pipeline('asr', model=m, device=torch.accelerator.current_accelerator())\n",
            target="accelerator",
            unsafe_fixes=True,
        ),
        # on the accelerator target an index other than 0 has no device-agnostic spelling: reported only
        Invalid(
            "from transformers import pipeline\npipe = pipeline('asr', model=m, device=1)\n",
            None,
            target="accelerator",
            unsafe_fixes=True,
            message_contains="guarded by device type",
        ),
        Invalid(
            """
            from tokenizers import Tokenizer, models, pre_tokenizers
            from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast, pipeline

            words = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
            words.pre_tokenizer = pre_tokenizers.Whitespace()
            tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]", pad_token="[UNK]")
            config = GPT2Config(vocab_size=3, n_positions=16, n_embd=8, n_layer=1, n_head=2,
                                bos_token_id=1, eos_token_id=2)
            pipe = pipeline("text-generation", model=GPT2LMHeadModel(config), tokenizer=tokenizer, device=0)
            print(pipe("hello world", max_new_tokens=2, do_sample=False))
            """,
            """
            from tokenizers import Tokenizer, models, pre_tokenizers
            from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast, pipeline

            words = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
            words.pre_tokenizer = pre_tokenizers.Whitespace()
            tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]", pad_token="[UNK]")
            config = GPT2Config(vocab_size=3, n_positions=16, n_embd=8, n_layer=1, n_head=2,
                                bos_token_id=1, eos_token_id=2)
            pipe = pipeline("text-generation", model=GPT2LMHeadModel(config), tokenizer=tokenizer, device="neuron")
            print(pipe("hello world", max_new_tokens=2, do_sample=False))
            """,
            runs=True,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_hf_pipeline(self.context, node.func):
            return
        arg = arg_named(node, "device")
        if arg is None:
            return
        index = int_value(arg.value)
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
