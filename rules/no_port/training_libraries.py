"""NP706 / NP707: training libraries built on CUDA ops: DeepSpeed (also its ``deepspeed=`` and
``strategy="deepspeed..."`` settings) and bitsandbytes (8-bit optimizers, quantized layers).
"""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.helpers.names import is_false, is_none
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.no_port.common import PackageRule
from neuron_port.rules.no_port.tables import BITSANDBYTES, DEEPSPEED
from neuron_port.rules.spec import Invalid, Valid


class DeepSpeed(PackageRule):
    """Reports DeepSpeed: no documented Trainium accelerator, CUDA ops.

    ## What it does
    Reports every import of ``deepspeed`` and every use (``deepspeed.initialize``,
    ``deepspeed.zero.Init``, ``deepspeed.checkpointing``, DeepSpeed ops), the Hugging Face
    ``TrainingArguments(deepspeed=...)`` keyword, accelerate's ``DeepSpeedPlugin`` and Lightning's
    ``strategy="deepspeed..."``, each with the torch-native replacement.

    ## Why is this bad?
    DeepSpeed selects CUDA (or another vendor's) accelerator and JIT-builds CUDA ops; no DeepSpeed
    accelerator for Trainium is documented. TorchNeuron supports DDP, FSDP2, DTensor tensor and sequence
    parallelism and pipeline parallelism; ZeRO stages map onto FSDP2 sharding.

    ## Example
    ```python
    engine, opt, _, _ = deepspeed.initialize(model=model, config="ds_config.json")
    ```
    Use instead:
    ```python
    from torch.distributed.fsdp import fully_shard
    for block in model.layers:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters())
    ```

    ## Fix safety
    No automatic fix: the engine API (``engine.backward``, ``engine.step``, checkpoint format) has to be
    replaced by a plain training loop.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html (supported distributed stacks)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html
    """

    CODE = "NP706"
    NAME = "deepspeed"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "DeepSpeed has no documented Trainium accelerator: use FSDP2 / DDP"
    TRIGGERS = ("deepspeed", "DeepSpeed")
    LABEL = "DeepSpeed"
    ADVICE = DEEPSPEED
    PACKAGES = ("deepspeed", "accelerate.DeepSpeedPlugin", "accelerate.utils.DeepSpeedPlugin")

    VALID = [
        Valid("from torch.distributed.fsdp import fully_shard\nfully_shard(model)\n"),
        Valid('args = TrainingArguments(output_dir="o", deepspeed=None)\n'),
        Valid("from accelerate import Accelerator\nacc = Accelerator(mixed_precision='bf16')\n"),
    ]
    INVALID = [
        Invalid("import deepspeed\nengine, opt, _, _ = deepspeed.initialize(model=model, config=cfg)\n", None,
                message_contains="FSDP2"),
        Invalid('args = TrainingArguments(output_dir="o", deepspeed="ds_config.json")\n', None),
        Invalid('import lightning as L\ntrainer = L.Trainer(strategy="deepspeed_stage_3")\n', None),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        for arg in node.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value == "deepspeed" and not is_none(arg.value) and not is_false(arg.value):
                self.report_use(arg, "deepspeed", "`deepspeed=` configuration")
            elif arg.keyword.value == "strategy" and (string_value(arg.value) or "").startswith("deepspeed"):
                self.report_use(arg.value, "deepspeed.zero", f"strategy `{string_value(arg.value)}`")


class BitsAndBytes(PackageRule):
    """Reports the ``bitsandbytes`` package: CUDA-only quantization kernels and 8-bit optimizers.

    ## What it does
    Reports every import of ``bitsandbytes`` and every use (``bnb.optim.Adam8bit`` / ``PagedAdamW``,
    ``bnb.nn.Linear8bitLt`` / ``Linear4bit``, ``bnb.functional``), each with the torch replacement.
    Quantization requested through Hugging Face arguments (``load_in_4bit=True``,
    ``BitsAndBytesConfig``) is NP605.

    ## Why is this bad?
    bitsandbytes ships CUDA kernels only; on a Trainium host it fails to find a GPU or falls back to
    slow CPU code, and there is no Neuron 8-bit optimizer or NF4 weight format.

    ## Example
    ```python
    opt = bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)
    ```
    Use instead (shard optimizer state with FSDP2 to save memory):
    ```python
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ```

    ## Fix safety
    No automatic fix: an 8-bit optimizer state is 4x smaller than AdamW's fp32 state and quantized
    weights are 2-4x smaller than bf16, so the memory plan changes.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
    """

    CODE = "NP707"
    NAME = "bitsandbytes"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "bitsandbytes is CUDA-only: use the torch equivalent in bf16"
    TRIGGERS = ("bitsandbytes",)
    LABEL = "bitsandbytes"
    ADVICE = BITSANDBYTES

    VALID = [Valid("import torch\nopt = torch.optim.AdamW(model.parameters(), lr=1e-4)\n")]
    INVALID = [
        Invalid("import bitsandbytes as bnb\nopt = bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)\n", None,
                message_contains="torch.optim.AdamW"),
        Invalid("try:\n    import bitsandbytes as bnb\nexcept ImportError:\n    bnb = None\n", None,
                message_contains="guarded"),
    ]
