"""NP807 / NP810: attention features TorchNeuron supports only partly: ``nn.MultiheadAttention``
called with an arbitrary ``attn_mask``, and FlexAttention.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import dotted_name, is_false, is_none, is_true
from neuron_port.rules.precision_features.common import ReferenceRule
from neuron_port.rules.spec import Invalid, PythonRule, Valid


MHA_QUALNAMES = frozenset({"torch.nn.MultiheadAttention", "torch.nn.modules.activation.MultiheadAttention"})


class MhaAttnMask(PythonRule):
    """Reports ``nn.MultiheadAttention`` called with an arbitrary ``attn_mask``.

    ## What it does
    Records the names bound to ``nn.MultiheadAttention(...)`` in the file (``self.attn = ...``,
    ``mha = ...``) and reports calls of those names that pass an ``attn_mask`` (keyword or 6th
    positional argument). A call with ``is_causal=True`` and ``need_weights=False`` and no
    ``key_padding_mask`` is not reported: PyTorch then drops the mask and runs causal SDPA.

    ## Why is this bad?
    TorchNeuron's native multi-head-attention path raises ``NotImplementedError("Arbitrary mask tensors
    not yet supported in Neuron implementation. Please use mask_type=1 for causal masking or
    mask=None.")``; returning attention weights (the default ``need_weights=True``) is not supported
    either, and the backward pass with an additive mask failed to compile in the Beta 3 release.

    ## Example
    ```python
    out, _ = self.attn(x, x, x, attn_mask=causal_mask)
    ```
    Use instead (a causal mask):
    ```python
    out, _ = self.attn(x, x, x, attn_mask=causal_mask, is_causal=True, need_weights=False)
    ```
    or project q/k/v yourself and call ``F.scaled_dot_product_attention(q, k, v, attn_mask=...)``.

    ## Fix safety
    No automatic fix: only a causal mask may be declared ``is_causal=True``; other masks need manual
    attention.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (``nn.MultiheadAttention`` rows)
    """

    CODE = "NP807"
    NAME = "mha-attn-mask"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = (
        "`nn.MultiheadAttention` with an arbitrary `attn_mask` is not supported by TorchNeuron's native MHA "
        "(\"Arbitrary mask tensors not yet supported\"): for a causal mask pass `is_causal=True, "
        "need_weights=False`; otherwise compute attention with F.scaled_dot_product_attention"
    )
    TRIGGERS = ("MultiheadAttention",)

    VALID = [
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4)\nout, _ = attn(x, x, x)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4)\n"
              "out, _ = attn(x, x, x, attn_mask=m, is_causal=True, need_weights=False)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4)\nout = other(x, attn_mask=m)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4)\nout, _ = attn(x, x, x, attn_mask=None)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch.nn as nn\nclass Block(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.attn = nn.MultiheadAttention(64, 4, batch_first=True)\n"
            "    def forward(self, x, mask):\n        return self.attn(x, x, x, attn_mask=mask)[0]\n",
            None,
        ),
        Invalid("from torch.nn import MultiheadAttention\nmha = MultiheadAttention(64, 4)\n"
                "out, w = mha(q, k, v, None, True, m)\n", None, target="accelerator"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._bound: set[str] = set()
        self._calls: list[tuple[str, cst.Call]] = []

    def _bind(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression]) -> None:
        if isinstance(value, cst.Call) and self.context.qualname(value.func) in MHA_QUALNAMES:
            name = dotted_name(target)
            if name is not None:
                self._bound.add(name)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target, node.value)

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted_name(node.func)
        if name is None:
            return
        mask = arg_named(node, "attn_mask", 5)
        if mask is None or is_none(mask.value):
            return
        causal, weights = arg_named(node, "is_causal", 7), arg_named(node, "need_weights", 4)
        padding = arg_named(node, "key_padding_mask", 3)
        if (causal is not None and is_true(causal.value) and weights is not None and is_false(weights.value)
                and (padding is None or is_none(padding.value))):
            return
        self._calls.append((name, node))

    def leave_Module(self, original_node: cst.Module) -> None:
        for name, call in self._calls:
            if name in self._bound:
                self.report(call)


FLEX_MESSAGE = (
    "`{name}`: FlexAttention support on Neuron is limited and not confirmed (its score_mod/block_mask "
    "functions are compiled by Inductor-specific templates): use F.scaled_dot_product_attention with an "
    "explicit mask or is_causal=True where the pattern allows"
)


class FlexAttention(ReferenceRule):
    """Reports FlexAttention (``torch.nn.attention.flex_attention``).

    ## What it does
    Reports uses of ``flex_attention``, ``create_block_mask``, ``create_mask`` and the other names of
    ``torch.nn.attention.flex_attention``.

    ## Why is this bad?
    FlexAttention generates its kernel from ``score_mod`` / ``mask_mod`` Python functions through
    Inductor's Triton templates. TorchNeuron's source contains a FlexAttention legalisation pass, but
    which patterns work on the current release is **not confirmed**.

    ## Example
    ```python
    block_mask = create_block_mask(causal, B=None, H=None, Q_LEN=S, KV_LEN=S)
    out = flex_attention(q, k, v, block_mask=block_mask)
    ```
    Use instead (for causal and sliding-window style masks):
    ```python
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ```

    ## Fix safety
    No automatic fix: a ``score_mod`` (ALiBi, soft-capping) becomes an explicit additive mask.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (FlexAttention limits: NOT confirmed)
    """

    CODE = "NP810"
    NAME = "flex-attention"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = FLEX_MESSAGE.format(name="flex_attention")
    TRIGGERS = ("flex_attention",)
    TABLE = {"torch.nn.attention.flex_attention": (FLEX_MESSAGE, "medium")}

    VALID = [Valid("import torch.nn.functional as F\nout = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n")]
    INVALID = [
        Invalid(
            "from torch.nn.attention.flex_attention import flex_attention, create_block_mask\n"
            "bm = create_block_mask(causal, None, None, S, S)\nout = flex_attention(q, k, v, block_mask=bm)\n",
            None,
        ),
    ]
