"""NP606 ``hf-async-load``: the first ``from_pretrained`` of a file, once per file, gets the advice to set
``HF_DEACTIVATE_ASYNC_LOAD=1`` (asynchronous weight loading can hang on the Neuron runtime)."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.names import dotted_name
from neuron_port.rules.spec import Invalid, PythonRule, Valid

HF_ASYNC_ENV = "HF_DEACTIVATE_ASYNC_LOAD"
# from_pretrained receivers that load no weights (tokenizers, configs, processors).
NON_MODEL_RECEIVER_RE = re.compile(r"(Tokenizer|Processor|Config|FeatureExtractor|Scheduler)", re.IGNORECASE)


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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (HF_DEACTIVATE_ASYNC_LOAD, huggingface/trl PR #5125)
    """

    CODE = "NP606"
    NAME = "hf-async-load"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = (
        "set HF_DEACTIVATE_ASYNC_LOAD=1 before loading Hugging Face weights on Trainium (HF's neuron example "
        "does: asynchronous loading can hang); reported once per file"
    )
    TRIGGERS = (r"\.(?<!Config\.)(?<!Tokenizer\.)(?<!Processor\.)(?<!FeatureExtractor\.)(?<!Scheduler\.)[ \t]*from_(?:pretrained|single_file)\b(?!`)",)

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
