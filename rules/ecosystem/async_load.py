"""NP606 ``hf-async-load``: the first ``from_pretrained`` of a file that reaches transformers' weight
loader, once per file, gets the advice to set ``HF_DEACTIVATE_ASYNC_LOAD=1`` (asynchronous weight loading
can hang on the Neuron runtime)."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from neuron_port.rules.spec import Invalid, PythonRule, Valid

HF_ASYNC_ENV = "HF_DEACTIVATE_ASYNC_LOAD"
# from_pretrained receivers that load no weights (tokenizers, configs, processors).
NON_MODEL_RECEIVER_RE = re.compile(r"(Tokenizer|Processor|Config|FeatureExtractor|Scheduler)", re.IGNORECASE)


def reads_async_load(qualname: str) -> bool:
    """Whether ``<qualname>.from_pretrained`` loads weights through transformers' loader, the one that
    reads HF_DEACTIVATE_ASYNC_LOAD: a transformers model class, or a diffusers pipeline (its text
    encoders are transformers models). diffusers' own model classes, PEFT adapters, timm, open_clip and
    a project's own ``from_pretrained`` load weights another way."""
    package, _, rest = qualname.partition(".")
    name = rest.rsplit(".", 1)[-1]
    if not rest or NON_MODEL_RECEIVER_RE.search(name):
        return False
    return package == "transformers" or (package == "diffusers" and "Pipeline" in name)


class HfAsyncLoad(PythonRule):
    """Advises ``HF_DEACTIVATE_ASYNC_LOAD=1`` once per file that loads Hugging Face weights.

    ## What it does
    Reports the first ``from_pretrained`` / ``from_single_file`` call of a file that loads a model (not
    a tokenizer, processor, config or scheduler) through transformers' weight loader, once per file (a
    notebook is one file), unless the file already mentions ``HF_DEACTIVATE_ASYNC_LOAD``. The receiver
    is resolved through the file's imports: a transformers model class (``AutoModelForCausalLM``,
    ``transformers.LlamaForCausalLM``) or a diffusers pipeline (whose text encoders are transformers
    models). Only transformers reads the variable: diffusers' model classes (``UNet2DConditionModel``),
    PEFT adapters, timm or open_clip models and a project's own ``from_pretrained`` classmethod are not
    reported, nor is a receiver the imports do not resolve.

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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (HF_DEACTIVATE_ASYNC_LOAD, huggingface/trl PR #5125)
    """

    CODE = "NP606"
    NAME = "hf-async-load"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = "set HF_DEACTIVATE_ASYNC_LOAD=1 before loading transformers weights on Trainium (asynchronous loading can hang)"
    ONCE_PER_FILE = True
    TRIGGERS = (r"\.(?<!Config\.)(?<!Tokenizer\.)(?<!Processor\.)(?<!FeatureExtractor\.)(?<!Scheduler\.)[ \t]*from_(?:pretrained|single_file)\b(?!`)",)

    VALID = [
        Valid('import os\nfrom transformers import AutoModel\nos.environ["HF_DEACTIVATE_ASYNC_LOAD"] = "1"\n'
              "m = AutoModel.from_pretrained(name)\n"),
        Valid("from transformers import AutoConfig, AutoTokenizer\n"
              "tok = AutoTokenizer.from_pretrained(name)\ncfg = AutoConfig.from_pretrained(name)\n"),
        # libraries with their own weight loader do not read the variable
        Valid("from diffusers import UNet2DConditionModel\n"
              "unet = UNet2DConditionModel.from_pretrained(name, subfolder='unet')\n"),
        Valid("from peft import PeftModel\nmodel = PeftModel.from_pretrained(base, adapter)\n"),
        Valid("import timm\nmodel = timm.models.VisionTransformer.from_pretrained(name)\n"),
        # a project's own classmethod of that name
        Valid("class GPT:\n    @classmethod\n    def from_pretrained(cls, name):\n        return cls()\n\n\n"
              "model = GPT.from_pretrained('gpt2')\n"),
        Valid("from .model import GPT\nmodel = GPT.from_pretrained('gpt2')\n"),
    ]
    INVALID = [
        Invalid("from transformers import AutoModel, AutoModelForCausalLM\n"
                "model = AutoModelForCausalLM.from_pretrained(name)\nref = AutoModel.from_pretrained(other)\n", None),
        Invalid("import transformers as hf\nmodel = hf.LlamaForCausalLM.from_pretrained(name)\n", None,
                target="accelerator"),
        Invalid("from diffusers import StableDiffusionPipeline\n"
                "pipe = StableDiffusionPipeline.from_pretrained(name)\n", None),
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
        receiver = self.context.qualname(node.func.value)
        if receiver is not None and reads_async_load(receiver):
            self._first = node

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if HF_ASYNC_ENV in node.value:
            self._mentioned = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._first is not None and not self._mentioned:
            self.report(self._first)
