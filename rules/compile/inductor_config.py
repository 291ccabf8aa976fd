"""NP406 ``inductor-config``: ``torch._inductor.config`` settings, which have no effect with the neuron
backend (it never runs TorchInductor)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.compile.common import StatementRule
from neuron_port.rules.compile.tables import INDUCTOR_CONFIG, INDUCTOR_CUDA_GRAPH_KEYS
from neuron_port.rules.spec import Invalid, Valid


class InductorConfig(StatementRule):
    """Reports ``torch._inductor.config`` tweaks, which have no effect with the neuron backend.

    ## What it does
    Finds assignments to ``torch._inductor.config.<setting>`` (any import spelling, e.g.
    ``import torch._inductor.config as inductor_config``) and calls such as
    ``torch._inductor.config.update(...)``, and offers to remove the statement;
    ``torch._inductor.config.patch(...)`` contexts and decorators are reported only. Neuron target only:
    on the accelerator target the settings still tune the GPU path.

    ## Why is this bad?
    TorchNeuron's ``torch.compile`` backend lowers to StableHLO and neuronx-cc and never runs
    TorchInductor, so these settings (coordinate-descent tuning, Triton CUDA graphs, fx graph cache,
    epilogue fusion, ...) do nothing on Trainium; they only suggest a tuning that is not happening.

    ## Example
    ```python
    torch._inductor.config.coordinate_descent_tuning = True
    model = torch.compile(model, backend="neuron")
    ```
    Use instead:
    ```python
    model = torch.compile(model, backend="neuron")
    ```

    ## Fix safety
    Unsafe: removing a statement is harmless on Trainium, but the file may still be run on a GPU, and a
    setting may be read back later in the program. A statement with a comment line above it is reported
    without a fix, so no comment is lost.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/about-torch-compile.html
      ("does not use TorchInductor")
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/about-torch-compile.html
    """

    CODE = "NP406"
    NAME = "inductor-config"
    SEVERITY = "info"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "low"
    MESSAGE = (
        "`{name}` configures TorchInductor, which has no effect on Trainium{note}"
    )
    TRIGGERS = ("_inductor",)
    TARGETS = ("neuron",)

    VALID = [
        Valid("import torch\ntorch._dynamo.config.cache_size_limit = 64\n"),
        Valid("import torch\nprint(torch._inductor.config.max_autotune)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport torch._inductor.config\n\nmodel = Net()\n"
            "torch._inductor.config.coordinate_descent_tuning = True\nmodel = torch.compile(model)\n",
            "import torch\nimport torch._inductor.config\n\nmodel = Net()\nmodel = torch.compile(model)\n",
            unsafe_fixes=True,
        ),
        Invalid("import torch\ntorch._inductor.config.coordinate_descent_tuning = True\n", None),
        Invalid(
            "import torch._inductor.config as inductor_config\n"
            "inductor_config.triton.cudagraphs = False; inductor_config.fx_graph_cache = True\n",
            "import torch._inductor.config as inductor_config\n",
            unsafe_fixes=True,
            message_contains="CUDA graphs",
        ),
        Invalid(
            "from torch._inductor import config\nif fast:\n    config.max_autotune = True\n",
            "from torch._inductor import config\nif fast:\n    pass\n",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch\n\n# tuning for H100\ntorch._inductor.config.max_autotune = True\n",
            None,
            unsafe_fixes=True,
            message_contains="comment",
        ),
        Invalid("import torch\nwith torch._inductor.config.patch(max_autotune=True):\n    pass\n", None),
    ]

    def _message(self, qualname: str) -> str:
        key = qualname[len(INDUCTOR_CONFIG) + 1:]
        note = " (nor do CUDA graphs)" if key in INDUCTOR_CUDA_GRAPH_KEYS else ""
        return self.MESSAGE.format(name=qualname, note=note)

    def match(self, small: cst.BaseSmallStatement) -> Optional[str]:
        assigned = self.assigned(small)
        if assigned is not None and assigned[0].startswith(INDUCTOR_CONFIG + "."):
            return self._message(assigned[0])
        called = self.called(small)
        if called is not None and called[0].startswith(INDUCTOR_CONFIG + ".") and not called[0].endswith(".patch"):
            return self._message(called[0])
        return None

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node.func) == INDUCTOR_CONFIG + ".patch":
            self.report(node, self._message(INDUCTOR_CONFIG + ".patch") + "; drop the context", effort="low")
