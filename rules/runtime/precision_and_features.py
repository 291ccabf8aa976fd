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
    - shared/torchneuron.md section 4
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

    ## Why is this bad?
    These raise on Trainium (the simulator raises the same errors unless
    `NEURON_PORT_UNSUPPORTED=record` is set for an exploratory run).

    ## Example
    ```python
    model = model.to(memory_format=torch.channels_last)
    ```
    Use instead: contiguous tensors (drop channels_last), real-valued rotary embeddings instead of
    `view_as_complex`, dense tensors, `torch.func.vjp`/reverse mode instead of forward AD.

    ## Fix safety
    No automatic fix.

    ## References
    - shared/torchneuron.md section 5
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
