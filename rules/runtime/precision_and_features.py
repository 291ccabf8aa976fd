"""NP905 / NP906: precision and features at run time: float64 tensors computed in float32 on the
device, and features TorchNeuron does not support.
"""

from __future__ import annotations

from neuron_port.rules.spec import Invalid, RuntimeRule, Valid


class Float64Demotion(RuntimeRule):
    """A float64 tensor reached the neuron device: Trainium computes it in float32.

    ## What it does
    Reports each op and user line where a float64 tensor was used on the device.

    ## Why is this bad?
    TorchNeuron keeps the visible dtype float64 but computes in float32, silently: sums, metrics and
    losses lose precision without an error (and 64-bit casts bounce through the host).

    ## Example
    ```python
    running_loss = torch.zeros((), dtype=torch.float64, device=device)
    ```
    Use instead: float32 on the device, or accumulate on the CPU if you need 64 bits
    (`running_loss += loss.item()`).

    ## Fix safety
    No automatic fix: whether 32 bits suffice is a numerical decision.

    ## References
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py
    """

    CODE = "NP905"
    NAME = "float64-demotion"
    SEVERITY = "warning"
    EFFORT = "low"
    MESSAGE = "float64 `{op}` is computed in float32 on Trainium ({calls} call(s) here)"
    VALID = [Valid("import torch\nx = torch.ones(4, device='neuron', dtype=torch.float32)\nprint(x.sum().item())\n")]
    INVALID = [Invalid(
        "import torch\nx = torch.ones(4, device='neuron', dtype=torch.float64)\nprint((x * 3).sum().item())\n"
    )]


class UnsupportedFeature(RuntimeRule):
    """A feature TorchNeuron does not support was used on the device.

    ## What it does
    Reports sparse layouts, NestedTensor, forward-mode AD, complex dtypes, channels_last and other
    non-contiguous memory formats, and `nn.MultiheadAttention`'s native path with arbitrary masks or
    per-head weights, with the error TorchNeuron raises and the user line.

    The event's `action` says what happens on Trainium: "raised" / "recorded" (it raises; "recorded"
    when the simulator went on because of `NEURON_PORT_UNSUPPORTED=record`); for complex dtypes with
    `TORCH_NEURONX_COMPLEX_DECOMPOSE` on (the TorchNeuron 2.33 default for PyTorch >= 2.13)
    "decomposed" (the op runs as real ops) or "cpu_fallback" (it runs on the CPU, also reported as
    NP901); "unconfirmed" where TorchNeuron's behaviour is not documented and the simulator runs the
    op (`F.pad` on a permuted 4-D tensor, whose kernel asks for a channels_last result). The finding's
    severity follows: error when it raises, warning for a CPU fallback or an unconfirmed case, info
    for a decomposed op.

    ## Why is this bad?
    Most of these raise on Trainium (the simulator raises the same errors unless
    `NEURON_PORT_UNSUPPORTED=record` is set for an exploratory run). Decomposed complex ops run, but
    only while `TORCH_NEURONX_COMPLEX_DECOMPOSE` stays on, and cost several real ops each; complex ops
    without a decomposition (FFTs) copy to the host and back.

    ## Example
    ```python
    model = model.to(memory_format=torch.channels_last)
    ```
    Use instead: contiguous tensors (drop channels_last), real-valued rotary embeddings instead of
    `view_as_complex`, dense tensors, `torch.func.vjp`/reverse mode instead of forward AD.

    ## Fix safety
    No automatic fix.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst; https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/env-vars.html for `TORCH_NEURONX_COMPLEX_DECOMPOSE`
    - rules/op_policy.toml `[complex]` and `[memory_format]` (the simulator's unconfirmed choices)
    """

    CODE = "NP906"
    NAME = "unsupported-feature"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "{feature}: {message}"
    VALID = [Valid("import torch\nx = torch.ones(1, 3, 4, 4, device='neuron')\nprint(x.contiguous().sum().item())\n")]
    INVALID = [Invalid(
        "import torch\nx = torch.ones(1, 3, 4, 4, device='neuron')\n"
        "y = x.to(memory_format=torch.channels_last)\n",
        message_contains="memory_format",
    )]
