"""NP808: ``memory_format=torch.channels_last`` (Neuron tensors are contiguous only), with the unsafe
fixes that drop the conversion.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.calls import arg_named, remove_arg
from neuron_port.rules.helpers.names import dotted_name, source_of
from neuron_port.rules.helpers.statements import has_comment_above, statement_without
from neuron_port.rules.spec import Invalid, PythonRule, RunPremise, Valid


CHANNELS_LAST = frozenset({"torch.channels_last", "torch.channels_last_3d"})
# methods/functions whose memory_format= can simply be dropped (the default is contiguous/preserve)
DROPPABLE_FORMAT = frozenset({"to", "contiguous", "clone", "empty", "empty_like", "zeros_like", "ones_like",
                              "rand_like", "randn_like", "full_like", "empty_strided"})


class ChannelsLast(PythonRule):
    """Reports ``memory_format=torch.channels_last``: Neuron tensors are contiguous only.

    ## What it does
    Reports every ``torch.channels_last`` / ``channels_last_3d`` reference. Where the conversion can
    simply go it offers an unsafe fix: ``x.to(memory_format=torch.channels_last)`` becomes ``x`` (a
    statement ``model.to(memory_format=...)`` or ``x = x.to(memory_format=...)`` is removed), and the
    ``memory_format=`` argument is dropped from ``.to(device, ...)``, ``.contiguous(...)``,
    ``.clone(...)`` and the ``*_like`` / ``empty`` factories. Checks (``is_contiguous(memory_format=...)``)
    are reported only. On the accelerator target everything is reported only (channels_last is a
    performance win on GPUs).

    ## Why is this bad?
    TorchNeuron raises ``RuntimeError("<op>: Neuron tensors only support contiguous or preserve memory
    format")`` for other memory formats, and a layout-changing neuron-to-neuron copy is not supported
    ("Neuron->Neuron copy with layout change is not supported yet").

    ## Example
    ```python
    model = model.to(memory_format=torch.channels_last)
    x = x.to(device, memory_format=torch.channels_last)
    ```
    Use instead:
    ```python
    x = x.to(device)
    ```

    ## Fix safety
    Unsafe: the fix removes a performance choice made for GPUs (and code reading ``x.stride()`` may
    assume the channels-last layout); the numbers are unchanged.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (channels_last / other memory formats)
    """

    CODE = "NP808"
    RUN_PREMISE = RunPremise("no tensor in another memory format reached the device", features=("memory_format",))
    NAME = "channels-last"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "low"
    MESSAGE = (
        "`{name}`: Neuron tensors support only the contiguous memory format: drop the channels_last "
        "conversion"
    )
    TRIGGERS = (r"\.[ \t]*(?:channels_last|channels_last_3d)\b", r"import\b[^\n]*\b(?:channels_last|channels_last_3d)\b", r"channels_last(?<=[\s(,]channels_last)\b[ \t]*(?:[,)\\]|as\b|\r?$)", r"channels_last_3d(?<=[\s(,]channels_last_3d)\b[ \t]*(?:[,)\\]|as\b|\r?$)")

    VALID = [
        Valid("import torch\nx = x.contiguous(memory_format=torch.contiguous_format)\ny = x.to('cpu')\n"),
        Valid("import torch\nx = x.to(memory_format=torch.preserve_format)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nmodel = model.to(memory_format=torch.channels_last)\n"
            "y = net(x.to(memory_format=torch.channels_last))\n",
            "import torch\ny = net(x)\n",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch\nx = x.to(device, memory_format=torch.channels_last, non_blocking=True)\n"
            "z = z.contiguous(memory_format=torch.channels_last)\n",
            "import torch\nx = x.to(device, non_blocking=True)\nz = z.contiguous()\n",
            unsafe_fixes=True,
        ),
        Invalid("import torch\nmodel = model.to(memory_format=torch.channels_last)\n", None),  # safe mode
        Invalid("import torch\nok = x.is_contiguous(memory_format=torch.channels_last)\n", None, unsafe_fixes=True),
        Invalid(
            "import torch\n# channels_last is faster on A100\nmodel.to(memory_format=torch.channels_last)\n",
            "import torch\n# channels_last is faster on A100\nmodel\n",
            unsafe_fixes=True,
        ),
        Invalid("import torch\nx = x.to(memory_format=torch.channels_last)\n", None, target="accelerator",
                unsafe_fixes=True),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._handled: set[cst.CSTNode] = set()

    def _format_arg(self, call: cst.Call) -> Optional[cst.Arg]:
        func = call.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        arg = arg_named(call, "memory_format", 0 if method == "contiguous" else None)
        if arg is not None and self.context.qualname(arg.value) in CHANNELS_LAST:
            return arg
        return None

    def _only_format_to(self, call: cst.Call) -> bool:
        """``x.to(memory_format=cl)``: the conversion is the whole call."""
        return (isinstance(call.func, cst.Attribute) and call.func.attr.value == "to"
                and len(call.args) == 1 and self._format_arg(call) is not None)

    def _message(self, arg: cst.Arg) -> str:
        return self.MESSAGE.format(name=source_of(arg.value))

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if self.context.target != "neuron" or len(node.body) != 1 or has_comment_above(node):
            return
        small = node.body[0]
        call: Optional[cst.Call] = None
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            call = small.value
        elif (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call)
              and isinstance(small.value.func, cst.Attribute)
              and source_of(small.targets[0].target) == source_of(small.value.func.value)):
            call = small.value
        if call is None or not self._only_format_to(call):
            return
        arg = self._format_arg(call)
        assert arg is not None
        self._handled.update({call, arg.value})
        self.report(node, self._message(arg) + " (statement removed)", replacement=statement_without(node, small))

    def visit_Call(self, node: cst.Call) -> None:
        if node in self._handled:
            return
        arg = self._format_arg(node)
        if arg is None:
            return
        method = node.func.attr.value if isinstance(node.func, cst.Attribute) else dotted_name(node.func) or ""
        method = method.rsplit(".", 1)[-1]
        if self.context.target != "neuron" or method not in DROPPABLE_FORMAT:
            return  # the reference itself is reported by visit_Attribute
        self._handled.add(arg.value)
        if self._only_format_to(node):
            assert isinstance(node.func, cst.Attribute)
            self.report(node, self._message(arg), replacement=node.func.value.with_changes(
                lpar=node.lpar, rpar=node.rpar) if node.lpar else node.func.value)
        else:
            self.report(node, self._message(arg), replacement=remove_arg(node, arg))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value not in ("channels_last", "channels_last_3d") or node in self._handled:
            return
        qualname = self.context.qualname(node)
        if qualname in CHANNELS_LAST:
            message = self.MESSAGE.format(name=qualname)
            if self.context.target != "neuron":
                message += " on Trainium (guard it by device type)"
            self.report(node, message)
