"""NP807 / NP810: attention features TorchNeuron supports only partly: ``nn.MultiheadAttention``
called with an arbitrary ``attn_mask``, and FlexAttention.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import dotted_name, int_value, is_false, is_none, is_true, source_of
from neuron_port.rules.precision_features.common import ReferenceRule
from neuron_port.rules.spec import Invalid, PythonRule, RunPremise, Valid


MHA_QUALNAMES = frozenset({"torch.nn.MultiheadAttention", "torch.nn.modules.activation.MultiheadAttention"})


# nn.MultiheadAttention(embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim,
# batch_first, ...): the constructor arguments that decide whether forward() can take the native path
MHA_PARAMS = ("embed_dim", "num_heads", "dropout", "bias", "add_bias_kv", "add_zero_attn", "kdim", "vdim",
              "batch_first")


def _constructor_arg(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    arg = arg_named(call, name, MHA_PARAMS.index(name))
    return None if arg is None else arg.value


def generic_path_reason(construction: cst.Call) -> Optional[str]:
    """Why ``MultiheadAttention.forward`` can never take PyTorch's native fast path for a module built by
    ``construction`` (``why_not_fast_path`` in torch/nn/modules/activation.py), or None when it can."""
    batch_first = _constructor_arg(construction, "batch_first")
    if batch_first is None or is_false(batch_first):
        return "batch_first is not True"
    heads = _constructor_arg(construction, "num_heads")
    if heads is not None and int_value(heads) is not None and int_value(heads) % 2:
        return "num_heads is odd"
    for flag in ("add_bias_kv", "add_zero_attn"):
        value = _constructor_arg(construction, flag)
        if value is not None and is_true(value):
            return f"{flag} is True"
    embed = _constructor_arg(construction, "embed_dim")
    for dim in ("kdim", "vdim"):
        value = _constructor_arg(construction, dim)
        if value is not None and not is_none(value) and (embed is None or source_of(value) != source_of(embed)):
            return f"{dim} differs from embed_dim"
    return None


def _is_self_attention(call: cst.Call) -> bool:
    """query, key and value are one expression (the fast path needs ``query is key is value``)."""
    parts = [arg_named(call, name, i) for i, name in enumerate(("query", "key", "value"))]
    if any(part is None for part in parts):
        return False
    return len({source_of(part.value) for part in parts if part is not None}) == 1


class MhaAttnMask(PythonRule):
    """Reports ``nn.MultiheadAttention`` called with an arbitrary ``attn_mask`` where the native path can run.

    ## What it does
    Records the names bound to ``nn.MultiheadAttention(...)`` in the file (``self.attn = ...``,
    ``mha = ...``) and reports calls of those names that pass an ``attn_mask`` (keyword or 6th
    positional argument), when PyTorch can take its native fast path for that call. PyTorch's
    ``MultiheadAttention.forward`` takes it only for self-attention (``query is key is value``) on a
    module built with ``batch_first=True``, an even ``num_heads``, no ``add_bias_kv`` /
    ``add_zero_attn`` and ``kdim``/``vdim`` equal to ``embed_dim``, in eval mode with grad disabled (or
    no parameter requiring grad), outside autocast, with a non-float mask. A module or a call that fails
    one of the conditions the source shows (``batch_first`` left at its default ``False``,
    cross-attention, an odd literal head count, ...) runs PyTorch's generic path, made of ordinary ops,
    and is not reported. A call with ``is_causal=True`` and ``need_weights=False`` and no
    ``key_padding_mask`` is not reported either: PyTorch then drops the mask and runs causal SDPA.

    ## Why is this bad?
    TorchNeuron's native multi-head-attention path raises ``NotImplementedError("Arbitrary mask tensors
    not yet supported in Neuron implementation. Please use mask_type=1 for causal masking or
    mask=None.")``; returning attention weights (the default ``need_weights=True``) is not supported
    either, and the backward pass with an additive mask failed to compile in the Beta 3 release. The
    remaining conditions (eval mode, grad, the mask's dtype) are known only at run time, so the finding
    is a warning: the inference path (``model.eval()`` under ``torch.no_grad()``) is where it fails.

    ## Example
    ```python
    self.attn = nn.MultiheadAttention(512, 8, batch_first=True)
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
    - https://github.com/pytorch/pytorch/blob/v2.13.0/torch/nn/modules/activation.py (``MultiheadAttention.forward``, ``why_not_fast_path``)
    """

    CODE = "NP807"
    RUN_PREMISE = RunPremise(
        "PyTorch's native multi-head-attention path never ran", ops=("aten::_native_multi_head_attention",),
        features=("mha_arbitrary_mask", "mha_per_head_weights"))
    NAME = "mha-attn-mask"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = (
        "`nn.MultiheadAttention` with an `attn_mask` fails on TorchNeuron's native path (eval, no grad): "
        "pass `is_causal=True, need_weights=False` or use SDPA"
    )
    TRIGGERS = ("MultiheadAttention",)

    VALID = [
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4, batch_first=True)\nout, _ = attn(x, x, x)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4, batch_first=True)\n"
              "out, _ = attn(x, x, x, attn_mask=m, is_causal=True, need_weights=False)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4)\nout = other(x, attn_mask=m)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4, batch_first=True)\n"
              "out, _ = attn(x, x, x, attn_mask=None)\n"),
        # batch_first defaults to False: PyTorch never takes the native path, the generic ops run
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4)\nout, _ = attn(x, x, x, attn_mask=m)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4, batch_first=False)\n"
              "out, _ = attn(x, x, x, attn_mask=m)\n"),
        # cross-attention, an odd head count, add_bias_kv, a different kdim: the generic path
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4, batch_first=True)\n"
              "out, _ = attn(x, memory, memory, attn_mask=m)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(63, 3, batch_first=True)\n"
              "out, _ = attn(x, x, x, attn_mask=m)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4, add_bias_kv=True, batch_first=True)\n"
              "out, _ = attn(x, x, x, attn_mask=m)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 4, kdim=32, vdim=32, batch_first=True)\n"
              "out, _ = attn(x, x, x, attn_mask=m)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch.nn as nn\nclass Block(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.attn = nn.MultiheadAttention(64, 4, batch_first=True)\n"
            "    def forward(self, x, mask):\n        return self.attn(x, x, x, attn_mask=mask)[0]\n",
            None,
            message_contains="native path",
        ),
        Invalid("from torch.nn import MultiheadAttention\nmha = MultiheadAttention(64, 4, batch_first=cfg.batch_first)\n"
                "out, w = mha(q, q, q, None, True, m)\n", None, target="accelerator"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._bound: dict[str, list[cst.Call]] = {}
        self._calls: list[tuple[str, cst.Call]] = []

    def _bind(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression]) -> None:
        if isinstance(value, cst.Call) and self.context.qualname(value.func) in MHA_QUALNAMES:
            name = dotted_name(target)
            if name is not None:
                self._bound.setdefault(name, []).append(value)

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
        if mask is None or is_none(mask.value) or not _is_self_attention(node):
            return
        causal, weights = arg_named(node, "is_causal", 7), arg_named(node, "need_weights", 4)
        padding = arg_named(node, "key_padding_mask", 3)
        if (causal is not None and is_true(causal.value) and weights is not None and is_false(weights.value)
                and (padding is None or is_none(padding.value))):
            return
        self._calls.append((name, node))

    def leave_Module(self, original_node: cst.Module) -> None:
        for name, call in self._calls:
            if any(generic_path_reason(made) is None for made in self._bound.get(name, ())):
                self.report(call)


FLEX_MESSAGE = (
    "`{name}`: FlexAttention on Neuron is not confirmed: use F.scaled_dot_product_attention"
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
