"""NP702 / NP703: the attention kernel packages ``flash_attn`` and ``xformers`` (both become
``F.scaled_dot_product_attention``).
"""

from __future__ import annotations

from neuron_port.rules.no_port.common import PackageRule
from neuron_port.rules.no_port.tables import FLASH_ATTN, XFORMERS
from neuron_port.rules.spec import Invalid, Valid


class FlashAttn(PackageRule):
    """Reports the ``flash_attn`` package: its kernels are CUDA-only.

    ## What it does
    Reports every import of ``flash_attn`` and every use of its functions and modules
    (``flash_attn_func``, ``flash_attn_varlen_func``, ``flash_attn.layers.rotary``, ``flash_attn.ops``,
    ...), each with the torch replacement.

    ## Why is this bad?
    flash-attn builds CUDA kernels; on a Trainium host the import fails, or a guarded import silently
    takes the fallback path.

    ## Example
    ```python
    from flash_attn import flash_attn_func
    out = flash_attn_func(q, k, v, causal=True)           # (batch, seq, heads, dim)
    ```
    Use instead:
    ```python
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
    ).transpose(1, 2)
    ```

    ## Fix safety
    No automatic fix: the tensor layout differs (flash-attn takes ``(batch, seq, heads, dim)``, SDPA
    ``(batch, heads, seq, dim)``) and varlen (unpadded) batches need padding to static shapes. In
    Hugging Face models ``attn_implementation="sdpa"`` is the switch (NP603).

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (SDPA on neuron), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html
    - https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html
    """

    CODE = "NP702"
    NAME = "flash-attn"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "flash-attn's kernels are CUDA-only: use F.scaled_dot_product_attention"
    TRIGGERS = ("flash_attn",)
    LABEL = "flash-attn"
    ADVICE = FLASH_ATTN

    VALID = [
        Valid("import torch.nn.functional as F\nout = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"),
        Valid("use_flash_attn = False\n"),
    ]
    INVALID = [
        Invalid("from flash_attn import flash_attn_func\nout = flash_attn_func(q, k, v, causal=True)\n", None,
                message_contains="transpose(1, 2)"),
        Invalid(
            "try:\n    from flash_attn import flash_attn_func\n    HAS_FLASH = True\nexcept ImportError:\n"
            "    flash_attn_func = None\n    HAS_FLASH = False\n"
            "if HAS_FLASH:\n    out = flash_attn_func(q, k, v)\n",
            None,
            message_contains="guarded",
        ),
        Invalid("from transformers.utils import is_flash_attn_2_available\nif is_flash_attn_2_available():\n"
                "    import flash_attn\n", None, target="accelerator"),
    ]


class Xformers(PackageRule):
    """Reports the ``xformers`` package: its kernels are CUDA-only.

    ## What it does
    Reports every import of ``xformers`` and every use (``xformers.ops.memory_efficient_attention``,
    attention biases such as ``LowerTriangularMask``, ``SwiGLU``, ``scaled_index_add``), each with the torch
    replacement of that op: SDPA for its attention, the PyTorch ops a fused op stands for otherwise.

    ## Why is this bad?
    xformers' memory-efficient attention and fused ops are CUDA (and Triton) kernels; on a Trainium
    host the import fails or the code takes its fallback.

    ## Example
    ```python
    out = xops.memory_efficient_attention(q, k, v, attn_bias=xops.LowerTriangularMask())
    ```
    Use instead:
    ```python
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
    ).transpose(1, 2)
    ```

    ## Fix safety
    No automatic fix: layouts differ (xformers uses ``(batch, seq, heads, dim)``) and block-diagonal
    biases (packed variable-length batches) need padding.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html
    """

    CODE = "NP703"
    NAME = "xformers"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "xformers' kernels are CUDA-only: use the PyTorch ops they fuse (attention: F.scaled_dot_product_attention)"
    TRIGGERS = ("xformers",)
    LABEL = "xformers"
    ADVICE = XFORMERS

    VALID = [Valid("import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)\n")]
    INVALID = [
        Invalid("import xformers.ops as xops\ny = xops.memory_efficient_attention(q, k, v)\n", None,
                message_contains="memory_efficient_attention"),
        # not attention: the advice is the op it fuses, not SDPA
        Invalid("from xformers.ops import scaled_index_add\ny = scaled_index_add(x, index, source, scaling)\n", None,
                message_contains="input.index_add(0, index, source * scaling"),
    ]
