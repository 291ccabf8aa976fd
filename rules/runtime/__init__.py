"""NP9xx: runtime findings of `neuron-port check`, recorded by the simulated neuron device.

These rules do not visit source code: `neuron_port/check/runtime.py` turns simulator events into
findings with these codes. Each carries the same registry entry as a static rule (docs, severity,
effort), and its examples are *scripts*: INVALID ones must produce the finding when run under the
simulator, VALID ones must not (tests/test_runtime_rules.py runs them).
"""

from __future__ import annotations

from neuron_port.rules.spec import Invalid, RuntimeRule, Valid


class CpuFallback(RuntimeRule):
    """An op that TorchNeuron does not run natively fell back to the CPU.

    ## What it does
    Reports every ATen op that reached the simulated neuron device without a native TorchNeuron
    implementation (per the op policy in `rules/op_policy.toml`), with the number of calls and the
    user line that issued it.

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


class CompileRecompiles(RuntimeRule):
    """A function compiled with torch.compile(backend="neuron") was compiled more than once.

    ## What it does
    Reports each compiled function that was (re)compiled several times, with the guard failures
    Dynamo gave as reasons (for example a size mismatch at one dimension) and the user line.

    ## Why is this bad?
    The neuron backend only supports static shapes: every new input shape is a new graph compile
    (minutes for real models), and after `torch._dynamo.config.recompile_limit` (8) recompiles the
    function silently runs in eager mode.

    ## Example
    ```python
    model = torch.compile(model, backend="neuron")
    for T in (8, 16, 32):
        model(x[:, :T])
    ```
    Use instead: pad inputs to a few fixed shapes; warm each one up once.

    ## Fix safety
    No automatic fix.

    ## References
    - shared/torchneuron.md section 3.3
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/how-to-optimize-with-torch-compile.html
    """

    CODE = "NP903"
    NAME = "compile-recompiles"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = "`{function}` was compiled {count} times by torch.compile(backend=\"neuron\"): {reason}"
    VALID = [Valid(
        "import torch\nf = torch.compile(lambda x: x * 2, backend='neuron')\n"
        "for _ in range(3):\n    f(torch.ones(4, device='neuron'))\n"
    )]
    INVALID = [Invalid(
        "import torch\nf = torch.compile(lambda x: x * 2, backend='neuron')\n"
        "for n in (4, 8, 16):\n    f(torch.ones(n, device='neuron'))\n",
        message_contains="compiled 3 times",
    )]


class RecompileLimit(RuntimeRule):
    """A compiled function hit Dynamo's recompile limit and now runs in eager mode.

    ## What it does
    Reports functions whose recompiles reached `torch._dynamo.config.recompile_limit`.

    ## Why is this bad?
    From then on the function runs op by op in eager mode, without the compiled graph's fusion, and
    every shape still compiles per op: the run is slow without an error.

    ## Example
    ```python
    f = torch.compile(f, backend="neuron")
    for n in range(1, 20):
        f(torch.ones(n, device="neuron"))
    ```
    Use instead: bound the number of shapes (padding buckets), or compile only the static part.

    ## Fix safety
    No automatic fix.

    ## References
    - https://docs.pytorch.org/docs/2.13/generated/torch.compile.html
    - shared/torchneuron.md section 3.3
    """

    CODE = "NP904"
    NAME = "recompile-limit"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "`{function}` hit the recompile limit and falls back to eager: {reason}"
    VALID = [Valid(
        "import torch\nf = torch.compile(lambda x: x + 1, backend='neuron')\nf(torch.ones(4, device='neuron'))\n"
    )]
    INVALID = [Invalid(
        "import torch\nf = torch.compile(lambda x: x + 1, backend='neuron')\n"
        "for n in range(1, 12):\n    f(torch.ones(n, device='neuron'))\n"
    )]


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


class DistributedConstraint(RuntimeRule):
    """A collective that TorchNeuron's `neuron` process-group backend does not support.

    ## What it does
    Reports point-to-point `send`/`recv`, barriers on non-default groups, uneven `all_to_all` splits
    and unsupported all_to_all group sizes seen during the run, per rank, merged by user line.

    ## Why is this bad?
    They raise `NotImplementedError`/`RuntimeError` on Trainium.

    ## Example
    ```python
    dist.send(t, dst=1)
    ```
    Use instead: collectives (`all_gather`, `broadcast`), equal all_to_all splits, barriers on the
    default group.

    ## Fix safety
    No automatic fix.

    ## References
    - shared/torchneuron.md section 6
    """

    CODE = "NP907"
    NAME = "distributed-constraint"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "{message}"
    VALID = [Valid("import torch\n")]
    INVALID = [Invalid(
        "import os, torch, torch.distributed as dist\n"
        "os.environ.setdefault('MASTER_ADDR', '127.0.0.1'); os.environ.setdefault('MASTER_PORT', '29533')\n"
        "dist.init_process_group('neuron', rank=0, world_size=1)\n"
        "try:\n    dist.send(torch.ones(2, device='neuron'), dst=0)\nexcept Exception:\n    pass\n"
        "dist.destroy_process_group()\n"
    )]


class CompileFailure(RuntimeRule):
    """torch.compile(backend="neuron") could not compile a graph.

    ## What it does
    Reports graphs that failed to compile on the simulated backend (for example an op without a native
    lowering in the graph), with the function, the reason, and whether the run raised (the 2.33
    default, `TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1`) or fell back to eager execution.

    ## Why is this bad?
    By default the error is raised on Trainium; with the fallback enabled the graph runs eagerly, op by
    op, which is much slower.

    ## Example
    ```python
    @torch.compile(backend="neuron")
    def f(p):
        return torch.multinomial(p, 1)
    ```
    Use instead: keep unsupported ops outside the compiled region, or replace them.

    ## Fix safety
    No automatic fix.

    ## References
    - shared/torchneuron.md section 3.4
    """

    CODE = "NP908"
    NAME = "compile-failure"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "`{function}` failed to compile for neuron: {reason}"
    VALID = [Valid(
        "import torch\nf = torch.compile(lambda x: x * 2, backend='neuron')\nf(torch.ones(4, device='neuron'))\n"
    )]
    INVALID = [Invalid(
        "import torch\nf = torch.compile(lambda p: torch.multinomial(p, 1), backend='neuron')\n"
        "try:\n    f(torch.ones(2, 4, device='neuron'))\nexcept Exception:\n    pass\n"
    )]


class CommandFailed(RuntimeRule):
    """The checked command did not finish successfully on the simulated device.

    ## What it does
    Reports a non-zero exit code, a signal (segmentation fault, OOM kill) or a timeout of the command
    that `neuron-port check` ran, with the last lines of its standard error in the report.

    ## Why is this bad?
    Whatever stopped the run on the simulator will very likely stop it on Trainium; the findings after
    that point are missing from the report.

    ## Example
    ```python
    raise SystemExit(3)
    ```
    Use instead: fix the error shown in `runtime.status.stderr_tail` and run the check again.

    ## Fix safety
    No automatic fix.

    ## References
    - `neuron-port check --help`
    """

    CODE = "NP909"
    NAME = "command-failed"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "the command {what}"
    VALID = [Valid("print('ok')\n")]
    INVALID = [Invalid("raise SystemExit(3)\n", message_contains="exited with code 3")]
