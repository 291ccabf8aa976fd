"""NP603 ``flash-attention-implementation``: Hugging Face ``attn_implementation="flash_attention_2"``
(and the deprecated ``use_flash_attention_2=True``) -> ``"sdpa"``."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.helpers.calls import keyword_arg, keyword_names
from neuron_port.rules.helpers.names import is_true, last_segment
from neuron_port.rules.helpers.nodes import replace_string, string_value
from neuron_port.rules.spec import Invalid, PythonRule, Valid

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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (SDPA on neuron), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html ("attn_implementation='eager' or SDPA
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
        # `use_flash_attention_2=True` next to an `attn_implementation=` of its own: reported, not rewritten
        Invalid(
            'model = AutoModel.from_pretrained(name, attn_implementation="eager", use_flash_attention_2=True)\n',
            None,
            unsafe_fixes=True,
            message_contains="drop it",
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
            elif arg.keyword.value == "use_flash_attention_2" and is_true(arg.value):
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
            if last_segment(target.target) in ("_attn_implementation", "attn_implementation") and isinstance(
                target.target, cst.Attribute
            ):
                self._string(node.value)
                return
