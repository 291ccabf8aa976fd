"""NP704 / NP705: NVIDIA's training libraries apex (fused kernels, AMP, DDP) and TransformerEngine
(fused and FP8 kernels).
"""

from __future__ import annotations

from neuron_port.rules.no_port.common import PackageRule
from neuron_port.rules.no_port.tables import APEX, TRANSFORMER_ENGINE
from neuron_port.rules.spec import Invalid, Valid


class Apex(PackageRule):
    """Reports NVIDIA apex: its fused kernels and AMP are CUDA-only.

    ## What it does
    Reports every import of ``apex`` and every use: ``amp.initialize`` / ``amp.scale_loss``,
    ``FusedAdam`` / ``FusedLAMB``, ``FusedLayerNorm`` / ``FusedRMSNorm``, apex DDP and SyncBatchNorm,
    ``apex.contrib`` and ``apex.transformer``, each with the torch equivalent.

    ## Why is this bad?
    apex is a CUDA extension library: it does not build or import on a Trainium host, and apex AMP was
    superseded by ``torch.autocast`` years ago.

    ## Example
    ```python
    from apex.normalization import FusedLayerNorm
    norm = FusedLayerNorm(hidden)
    ```
    Use instead:
    ```python
    norm = torch.nn.LayerNorm(hidden)
    ```

    ## Fix safety
    No automatic fix: the replacements are close but not identical (argument names, AMP opt levels
    become an autocast region, apex DDP's ``delay_allreduce`` has no counterpart).

    ## References
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py (autocast), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html (DDP)
    - https://docs.pytorch.org/docs/stable/amp.html
    """

    CODE = "NP704"
    NAME = "apex"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "apex is CUDA-only: use the torch equivalent"
    TRIGGERS = ("apex",)
    LABEL = "apex"
    ADVICE = APEX

    VALID = [
        Valid("import torch\nnorm = torch.nn.LayerNorm(512)\nopt = torch.optim.AdamW(params)\n"),
        Valid("apex = find_apex(points)\n"),
    ]
    INVALID = [
        Invalid("from apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O1')\n", None,
                message_contains="torch.autocast"),
        Invalid(
            "try:\n    from apex.normalization import FusedLayerNorm as LayerNorm\nexcept ImportError:\n"
            "    from torch.nn import LayerNorm\n",
            None,
            message_contains="guarded",
        ),
        Invalid("from apex.optimizers import FusedAdam\nopt = FusedAdam(model.parameters(), lr=1e-3)\n", None,
                message_contains="torch.optim.AdamW"),
    ]


class TransformerEngine(PackageRule):
    """Reports NVIDIA TransformerEngine: FP8 and fused kernels for NVIDIA GPUs only.

    ## What it does
    Reports every import of ``transformer_engine`` and every use (``te.Linear``, ``te.LayerNorm``,
    ``te.TransformerLayer``, ``te.fp8_autocast``, FP8 recipes), each with the torch equivalent.

    ## Why is this bad?
    TransformerEngine's kernels target Hopper/Blackwell tensor cores. TorchNeuron has no FP8 training
    recipe equivalent (Trainium2 supports only non-OCP ``float8_e4m3`` casts, and there is no
    ``torch._scaled_mm``); bf16 autocast is the recommended precision.

    ## Example
    ```python
    with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
        out = te.Linear(1024, 1024)(x)
    ```
    Use instead:
    ```python
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        out = torch.nn.Linear(1024, 1024)(x)
    ```

    ## Fix safety
    No automatic fix: module arguments differ (``params_dtype``, ``tp_group``, ``sequence_parallel``)
    and tensor parallelism moves to DTensor.

    ## References
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py (FP8), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html (DTensor tensor parallelism)
    """

    CODE = "NP705"
    NAME = "transformer-engine"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "TransformerEngine is CUDA-only: use torch modules under bf16 autocast"
    TRIGGERS = ("transformer_engine",)
    LABEL = "TransformerEngine"
    ADVICE = TRANSFORMER_ENGINE

    VALID = [Valid("import torch\nlayer = torch.nn.Linear(1024, 1024)\n")]
    INVALID = [
        Invalid("import transformer_engine.pytorch as te\nlayer = te.Linear(1024, 1024)\n"
                "with te.fp8_autocast(enabled=True):\n    y = layer(x)\n", None, message_contains="fp8"),
    ]
