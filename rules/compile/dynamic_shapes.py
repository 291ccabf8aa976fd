"""NP404 ``compile-dynamic-shapes``: ``torch.compile(dynamic=True)``, ``mark_dynamic`` and the
``torch._dynamo.config`` settings that turn dynamic shapes on, which the neuron backend rejects."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.compile.common import StatementRule
from neuron_port.rules.compile.tables import COMPILE_FUNCS, DYNAMO_DYNAMIC_CONFIG, MARK_DYNAMIC
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import is_false, is_true
from neuron_port.rules.spec import Invalid, Valid

DYNAMIC_CONFIG_MATCH = frozenset(DYNAMO_DYNAMIC_CONFIG)


class CompileDynamicShapes(StatementRule):
    """Reports dynamic shapes in ``torch.compile``, which the neuron backend rejects.

    ## What it does
    Reports ``torch.compile(..., dynamic=True)`` (and offers ``dynamic=False``),
    ``torch._dynamo.mark_dynamic(...)`` / ``maybe_mark_dynamic(...)`` calls, and the
    ``torch._dynamo.config`` settings that turn dynamic shapes on by default
    (``assume_static_by_default = False``; the pre-2.1 ``dynamic_shapes = True``), offering to remove
    those settings. Other ``torch._dynamo.config`` settings (``recompile_limit`` /
    ``cache_size_limit``, ``suppress_errors``, ``capture_scalar_outputs``, ``optimize_ddp``, ...) are
    backend-independent and just as meaningful on Trainium, so they are left alone.

    ## Why is this bad?
    TorchNeuron compiles static shapes only: ``dynamic=True`` is rejected during compilation, and a
    symbolic dimension that reaches the backend raises "Dynamic shapes detected in the model, but
    torch-neuronx requires static shapes". Shapes that vary between steps compile one graph per shape
    (each compile can take minutes) until Dynamo's recompile limit (8) sends the frame back to eager.

    ## Example
    ```python
    model = torch.compile(model, backend="neuron", dynamic=True)
    ```
    Use instead (and pad inputs to a few fixed bucket sizes):
    ```python
    model = torch.compile(model, backend="neuron", dynamic=False)
    ```

    ## Fix safety
    Unsafe: ``dynamic=False`` makes the program run, but every new input shape then compiles a new
    graph; without padding to buckets that can make training far slower. The real fix (bucketing) is
    a code change this tool cannot make. On the accelerator target everything is reported only.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/how-to-optimize-with-torch-compile.html, https://docs.pytorch.org/docs/2.13/generated/torch.compile.html
    """

    CODE = "NP404"
    NAME = "compile-dynamic-shapes"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "medium"
    MESSAGE = (
        "dynamic shapes are rejected by the neuron torch.compile backend: pass `dynamic=False` and pad "
        "inputs to a few fixed sizes"
    )
    TRIGGERS = (r"dynamic(?<!\wdynamic)\s*=(?!=)", r"mark_dynamic\b", r"dynamic_shapes\b", 'assume_static_by_default')

    VALID = [
        Valid('import torch\nmodel = torch.compile(model, backend="neuron", dynamic=False)\n'),
        Valid("import torch\ntorch._dynamo.config.cache_size_limit = 64\n"),
        Valid("import torch\ntorch._dynamo.config.assume_static_by_default = True\n"),
        Valid("dynamic = True\n"),
    ]
    INVALID = [
        Invalid('import torch\nmodel = torch.compile(model, backend="neuron", dynamic=True)\n', None),
        Invalid(
            'import torch\nmodel = torch.compile(model, backend="neuron", dynamic=True)\n',
            'import torch\nmodel = torch.compile(model, backend="neuron", dynamic=False)\n',
            unsafe_fixes=True,
        ),
        Invalid("import torch\ntorch._dynamo.mark_dynamic(x, 0)\n", None, message_contains="mark_dynamic"),
        Invalid(
            "import torch._dynamo.config as dynamo_config\ndynamo_config.assume_static_by_default = False\nx = 1\n",
            "import torch._dynamo.config as dynamo_config\nx = 1\n",
            unsafe_fixes=True,
        ),
        Invalid('import torch\nmodel = torch.compile(model, dynamic=True)\n', None, target="accelerator",
                unsafe_fixes=True),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in COMPILE_FUNCS:
            arg = arg_named(node, "dynamic")
            if arg is None or not is_true(arg.value):
                return
            if self.context.target == "neuron":
                self.report(arg, replacement=arg.with_changes(value=cst.Name("False")))
            else:
                self.report(arg, self.MESSAGE + " on Trainium")
        elif qualname in MARK_DYNAMIC:
            name = qualname.rsplit(".", 1)[1]
            self.report(node, f"`{name}` makes a dimension symbolic, which the neuron torch.compile backend "
                              "rejects (static shapes only): drop it and pad inputs to fixed sizes")

    def match(self, small: cst.BaseSmallStatement) -> Optional[str]:
        assigned = self.assigned(small)
        if assigned is None:
            return None
        qualname, value = assigned
        if qualname not in DYNAMIC_CONFIG_MATCH:
            return None
        wanted = DYNAMO_DYNAMIC_CONFIG[qualname]
        if not ((wanted and is_true(value)) or (not wanted and is_false(value))):
            return None
        return (f"`{qualname}` = {wanted} turns dynamic shapes on, which the neuron backend rejects: remove "
                "it")
