"""NP903 / NP904 / NP908: ``torch.compile(backend="neuron")`` at run time: recompiles, the recompile
limit, and graphs that failed to compile.
"""

from __future__ import annotations

from neuron_port.rules.spec import Invalid, RuntimeRule, Valid


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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://docs.pytorch.org/docs/2.13/generated/torch.compile.html
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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://docs.pytorch.org/docs/2.13/generated/torch.compile.html
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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/env-vars.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html
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
