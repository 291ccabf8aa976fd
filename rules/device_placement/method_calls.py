"""NP103 ``cuda-method-call``: ``x.cuda()`` / ``x.cuda(i)`` / ``x.cuda(non_blocking=True)`` -> ``x.to(...)``."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.device_placement.common import set_commas, storage_lambda_call
from neuron_port.rules.device_placement.tables import INDEX_NAME_RE
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import last_segment, source_of
from neuron_port.rules.helpers.nodes import expr
from neuron_port.rules.spec import FRAGMENT, Invalid, PythonRule, Valid


class CudaMethodCall(PythonRule):
    """Rewrites ``x.cuda()`` / ``x.cuda(i)`` / ``x.cuda(non_blocking=True)`` to ``x.to(...)``.

    ## What it does
    Finds calls of the ``.cuda()`` method of tensors and modules and rewrites them: ``.cuda()`` becomes
    ``.to("neuron")``, ``.cuda(0)`` becomes ``.to("neuron:0")``, ``.cuda(i)`` / ``.cuda(device=i)`` (a
    rank too: ``.cuda(local_rank)``) become ``.to(i)`` (an integer device means the current accelerator, so
    ``.to(local_rank)`` is ``neuron:<local_rank>``, the process's own NeuronCore under torchrun; a
    ``torch.device`` passes through), and
    ``non_blocking=`` / ``memory_format=`` are kept. With ``--target accelerator`` ``.cuda()`` becomes
    ``.to(torch.accelerator.current_accelerator())``. The ``storage.cuda()`` in a ``map_location``
    lambda is NP106's.

    ## Why is this bad?
    ``.cuda()`` raises "Torch not compiled with CUDA enabled" on a Trainium host.

    ## Example
    ```python
    model.cuda()
    x = x.cuda(non_blocking=True)
    ```
    Use instead:
    ```python
    model.to("neuron")
    x = x.to("neuron", non_blocking=True)
    ```

    ## Fix safety
    Safe. ``.cuda(expr)`` becomes ``.to(expr)``; that is unsafe when ``expr`` is not named like a
    device index (``rank``, ``gpu``, ``idx``...), because ``.cuda(None)`` means the current device but
    ``.to(None)`` means no move. When the file defines its own ``cuda`` method the calls may be to it, so
    every fix in that file is unsafe. On the accelerator target ``.to(None)`` on a CPU-only host is a
    no-op where ``.cuda()`` raised. ``.cuda(local_rank)`` -> ``.to(local_rank)`` keeps the device: under
    ``torchrun`` TorchNeuron's process core is ``neuron:<LOCAL_RANK>`` (see NP101).

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/__init__.py, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html (one NeuronCore per process), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
    - https://docs.pytorch.org/docs/stable/generated/torch.Tensor.to.html
    """

    CODE = "NP103"
    NAME = "cuda-method-call"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "`.cuda()` fails on Trainium: use `{new}`"
    TRIGGERS = (r"\.cuda\(",)

    VALID = [
        Valid("x = x.to('neuron')\n"),
        Valid("fn = model.cuda\n"),
        Valid("ckpt = torch.load(p, map_location=lambda storage, loc: storage.cuda())\n"),  # NP106
    ]
    INVALID = [
        Invalid(
            "model.cuda()\nx = x.cuda(non_blocking=True)\ny = y.cuda(0)\n",
            'model.to("neuron")\nx = x.to("neuron", non_blocking=True)\ny = y.to("neuron:0")\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "model = model.cuda(args.gpu)\nt = t.cuda(device=local_rank, non_blocking=True)\n",
            'model = model.to(args.gpu)\nt = t.to(local_rank, non_blocking=True)\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "for gpu in range(4):\n    parts[gpu] = parts[gpu].cuda(gpu)\nm = m.cuda(idx)\n",
            "for gpu in range(4):\n    parts[gpu] = parts[gpu].to(gpu)\nm = m.to(idx)\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "model = model.cuda(args.gpu)\n",
            "model = model.to(args.gpu)\n",
            target="accelerator",
            not_runnable=FRAGMENT,
        ),
        Invalid("x = x.cuda(dev)\n", None, message_contains="unsafe"),
        Invalid(
            "class M:\n    def cuda(self):\n        return self\nm.cuda()\n",
            None,  # the file defines its own cuda(): unsafe
        ),
        Invalid(
            "import torch\nmodel.cuda()\nx = x.cuda(non_blocking=True)\n",
            "import torch\nmodel.to(torch.accelerator.current_accelerator())\n"
            "x = x.to(torch.accelerator.current_accelerator(), non_blocking=True)\n",
            target="accelerator",
            not_runnable=FRAGMENT,
        ),
        Invalid("x = x.cuda(*args)\n", None, message_contains="`.cuda(*...)`"),  # star arguments: reported only,
        Invalid(
            """
            import torch

            model = torch.nn.Linear(4, 2)
            model.cuda()
            x = torch.randn(3, 4).cuda(non_blocking=True)
            y = model(x).cuda(0)
            """,
            """
            import torch

            model = torch.nn.Linear(4, 2)
            model.to("neuron")
            x = torch.randn(3, 4).to("neuron", non_blocking=True)
            y = model(x).to("neuron:0")
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch

            model = torch.nn.Linear(4, 2)
            model.cuda()
            x = torch.randn(3, 4).cuda(non_blocking=True)
            y = model(x)
            """,
            """
            import torch

            model = torch.nn.Linear(4, 2)
            model.to(torch.accelerator.current_accelerator())
            x = torch.randn(3, 4).to(torch.accelerator.current_accelerator(), non_blocking=True)
            y = model(x)
            """,
            target='accelerator',
            runs=True,
        ),
        Invalid(
            """
            import torch
            idx = 0
            m = torch.nn.Linear(2, 2).cuda(idx)
            t = torch.ones(1, 2).cuda(device=idx)
            v = torch.ones(1, 2).cuda(memory_format=torch.contiguous_format)
            y = m(t + v)
            """,
            """
            import torch
            idx = 0
            m = torch.nn.Linear(2, 2).to(idx)
            t = torch.ones(1, 2).to(idx)
            v = torch.ones(1, 2).to("neuron", memory_format=torch.contiguous_format)
            y = m(t + v)
            """,
            runs=True,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._skip: set[cst.CSTNode] = set()
        self._pending: list[tuple[cst.Call, str, Optional[cst.Call], str, tuple]] = []
        self._defines_cuda = False

    def visit_Lambda(self, node: cst.Lambda) -> None:
        call = storage_lambda_call(node)
        if call is not None:
            self._skip.add(call)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value == "cuda":
            self._defines_cuda = True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "cuda" or node in self._skip:
            return
        qualname = self.context.qualname(func)
        if qualname is not None and qualname.startswith("torch"):
            return
        if any(a.star for a in node.args):
            self._pending.append((node, "`.cuda(*...)` fails on Trainium: use `.to(...)`", None, "none", ()))
            return
        device_arg = arg_named(node, "device", 0)
        rest = [a for a in node.args if a is not device_arg]
        last_comma = node.args[-1].comma if node.args else cst.MaybeSentinel.DEFAULT
        safety = "safe"
        imports: tuple = ()
        if device_arg is None:
            if self.context.target == "accelerator":
                torch_name, imports = self.context.torch_module_name()
                device = expr(f"{torch_name}.accelerator.current_accelerator()")
            else:
                device = cst.SimpleString('"neuron"')
        elif isinstance(device_arg.value, cst.Integer) and self.context.target == "neuron":
            device = cst.SimpleString(f'"neuron:{device_arg.value.value}"')
        else:
            device = device_arg.value
            if not self._index_like(device):
                safety = "unsafe"
        args = set_commas([cst.Arg(value=device)] + rest, last_comma)
        replacement = node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=args)
        message = self.MESSAGE.format(new="." + source_of(cst.Call(func=cst.Name("to"), args=args)))
        if safety == "unsafe":
            message += " (unsafe: `.cuda(None)` moves to the current device, `.to(None)` does not move)"
        self._pending.append((node, message, replacement, safety, imports))

    @staticmethod
    def _index_like(node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Integer):
            return True
        if isinstance(node, cst.Call) and last_segment(node.func) in ("int", "current_device", "get_rank"):
            return True
        last = last_segment(node)
        return last is not None and bool(INDEX_NAME_RE.search(last))

    def leave_Module(self, original_node: cst.Module) -> None:
        for node, message, replacement, safety, imports in self._pending:
            if replacement is None:
                self.report(node, message)
                continue
            if self._defines_cuda and safety == "safe":
                safety = "unsafe"
                message += " (unsafe: this file defines its own `cuda` method)"
            self.report(node, message, replacement=replacement, safety=safety, imports=imports)
