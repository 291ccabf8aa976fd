"""NP901 / NP902: eager execution costs seen at run time: ops that fell back to the CPU, and ops that
ran with several shapes at one line (one NEFF compile per shape).
"""

from __future__ import annotations

from neuron_port.rules.spec import Invalid, RuntimeRule, Valid


class CpuFallback(RuntimeRule):
    """An op that TorchNeuron does not run natively fell back to the CPU.

    ## What it does
    Reports every ATen op that reached the simulated neuron device without a native TorchNeuron
    implementation (per the op policy in `rules/op_policy.toml`), with the number of calls and the
    user line that issued it. Complex signatures of ops without a framework decomposition count too
    (`TORCH_NEURONX_COMPLEX_DECOMPOSE` on: "other operations follow the existing fallback policy"),
    e.g. `torch.fft.rfft` or a complex `cumsum`.

    ## Why is this bad?
    On Trainium such an op copies its inputs to the host, runs on the CPU and copies the results back:
    correct, but each call costs host round trips (0.7-3.5 ms per transfer measured on trn2) and breaks
    Adaptive Eager Execution's fusion.

    ## Example
    ```python
    idx = torch.multinomial(probs, num_samples=1)  # sampling on the device
    ```
    Use instead: move the op off the hot path, replace it with supported ops (e.g. Gumbel-max:
    `torch.argmax(logits - torch.log(-torch.log(torch.rand_like(logits))), -1)`), or write an NKI kernel
    registered as a PyTorch op.

    ## Fix safety
    No automatic fix: the replacement depends on the op.

    ## References
    - shared/torchneuron.md section 2.4 (CPU fallback) and 2.5 (native ops)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/best-practices-pytorch-neuron.html
    """

    CODE = "NP901"
    NAME = "cpu-fallback"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = "`{op}` falls back to the CPU on Trainium ({calls} call(s) here)"
    VALID = [Valid("import torch\nx = torch.ones(4, device='neuron')\nprint((x * 2).sum().item())\n")]
    INVALID = [Invalid(
        "import torch\np = torch.ones(2, 4, device='neuron') / 4\n"
        "print(torch.multinomial(p, num_samples=1).cpu())\n",
        message_contains="multinomial",
    )]


class EagerShapeVariance(RuntimeRule):
    """The same op at the same line ran with several shapes: one NEFF compile per shape in eager mode.

    ## What it does
    Compares the signatures (shapes, dtypes) an op saw at one user line; when there are several, it
    reports which dimensions varied, how many distinct values each took, and a set of padding buckets
    that would bound the number of compiles.

    ## Why is this bad?
    TorchNeuron compiles each new (op, shapes, dtypes) signature to a NEFF, which takes seconds (minutes
    for whole graphs). Variable-length batches recompile on every new length.

    ## Example
    ```python
    T = random.choice([100, 117, 250])
    x = tokens[:, :T]  # every new T compiles again
    ```
    Use instead: pad to a few buckets (`T = bucket(T)`, e.g. powers of two) and mask the padding.

    ## Fix safety
    No automatic fix: padding needs masks that only the model author can place.

    ## References
    - shared/torchneuron.md sections 2.1-2.3 and 3.3
    """

    CODE = "NP902"
    NAME = "eager-shape-variance"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = "`{op}` ran with {n} shapes here ({dims}): {n} eager NEFF compiles; pad to buckets {buckets}"
    VALID = [Valid("import torch\nfor _ in range(3):\n    x = torch.ones(2, 8, device='neuron') * 2\n")]
    INVALID = [Invalid(
        "import torch\nfor n in (8, 16, 32):\n    x = torch.ones(2, n, device='neuron') * 2\n",
        message_contains="dim 1",
    )]
