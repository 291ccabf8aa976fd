"""NP305 ``cuda-custom-fwd-bwd``: the ``custom_fwd`` / ``custom_bwd`` autograd decorators bound to CUDA
(``torch.cuda.amp.custom_fwd``, ``torch.amp.custom_fwd(device_type="cuda")``) move to the neuron device
type."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.helpers.calls import arg_named, first_keyword_index, insert_arg, keyword_arg, quote_of
from neuron_port.rules.helpers.nodes import expr
from neuron_port.rules.mixed_precision.common import device_type_expr, is_cuda_literal, target_safety
from neuron_port.rules.spec import FRAGMENT, Invalid, PythonRule, Valid

CUSTOM_FN_CUDA = {
    "torch.cuda.amp.custom_fwd": "custom_fwd",
    "torch.cuda.amp.custom_bwd": "custom_bwd",
    "torch.cuda.amp.autocast_mode.custom_fwd": "custom_fwd",
    "torch.cuda.amp.autocast_mode.custom_bwd": "custom_bwd",
}
CUSTOM_FN_GENERIC = frozenset({
    "torch.amp.custom_fwd", "torch.amp.custom_bwd",
    "torch.amp.autocast_mode.custom_fwd", "torch.amp.autocast_mode.custom_bwd",
})


class CudaCustomFwdBwd(PythonRule):
    """Moves ``custom_fwd`` / ``custom_bwd`` autograd decorators to the neuron device type.

    ## What it does
    Rewrites the deprecated ``@torch.cuda.amp.custom_fwd`` / ``@torch.cuda.amp.custom_bwd`` decorators,
    bare or called (``@custom_fwd(cast_inputs=torch.float32)``, also after ``from torch.cuda.amp import
    custom_fwd``), to ``@torch.amp.custom_fwd(device_type="neuron", ...)``, and the ``"cuda"``
    ``device_type`` of ``torch.amp.custom_fwd`` / ``custom_bwd`` to ``"neuron"``.

    ## Why is this bad?
    The decorators consult the autocast state *of their device type*. Bound to CUDA, inside a neuron
    autocast region ``custom_fwd(cast_inputs=...)`` does not cast the inputs and does not switch autocast
    off for the forward, and ``custom_bwd`` does not re-enter the neuron autocast state in the backward:
    the custom op runs at a different precision than intended.

    ## Example
    ```python
    class Fn(torch.autograd.Function):
        @staticmethod
        @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x): ...
    ```
    Use instead:
    ```python
    class Fn(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="neuron", cast_inputs=torch.float32)
        def forward(ctx, x): ...
    ```

    ## Fix safety
    Safe on the neuron target: ``torch.cuda.amp.custom_fwd(...)`` is defined as
    ``torch.amp.custom_fwd(device_type="cuda", ...)``. On the accelerator target the fix is unsafe: the
    device type ``torch.accelerator.current_accelerator().type`` is evaluated when the module is
    imported, and ``current_accelerator()`` is None on a CPU-only host, so the import fails there where
    the original one worked.

    ## References
    - https://docs.pytorch.org/docs/stable/notes/amp_examples.html#autocast-and-custom-autograd-functions
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py
    """

    CODE = "NP305"
    NAME = "cuda-custom-fwd-bwd"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "always"
    MESSAGE = "`{old}` follows CUDA's autocast state: use `{new}`"
    TRIGGERS = ("custom_fwd", "custom_bwd")

    VALID = [
        Valid('import torch\n\n@torch.amp.custom_fwd(device_type="neuron")\ndef forward(ctx, x):\n    return x\n'),
        Valid("from torch.cuda.amp import custom_fwd, custom_bwd\n"),
        Valid("import torch\n\n@torch.amp.custom_bwd(device_type=dev)\ndef backward(ctx, g):\n    return g\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\n\n@torch.cuda.amp.custom_fwd\ndef forward(ctx, x):\n    return x\n",
            'import torch\n\n@torch.amp.custom_fwd(device_type="neuron")\ndef forward(ctx, x):\n    return x\n',
            runs=True,
        ),
        Invalid(
            "from torch.cuda.amp import custom_fwd\n\n@custom_fwd(cast_inputs=torch.float32)\ndef forward(ctx, x):\n"
            "    return x\n",
            "from torch.cuda.amp import custom_fwd\nimport torch\n\n"
            '@torch.amp.custom_fwd(device_type="neuron", cast_inputs=torch.float32)\ndef forward(ctx, x):\n'
            "    return x\n",
            runs=True,
        ),
        Invalid(
            "from torch.cuda import amp\n\n@amp.custom_bwd\ndef backward(ctx, g):\n    return g\n",
            'from torch.cuda import amp\nimport torch\n\n@torch.amp.custom_bwd(device_type="neuron")\n'
            "def backward(ctx, g):\n    return g\n",
            runs=True,
        ),
        Invalid(
            "import torch\n\n@torch.amp.custom_bwd(device_type='cuda')\ndef backward(ctx, g):\n    return g\n",
            "import torch\n\n@torch.amp.custom_bwd(device_type='neuron')\ndef backward(ctx, g):\n    return g\n",
            runs=True,
        ),
        Invalid(
            "import torch\nfwd = torch.cuda.amp.custom_fwd(forward_impl)\n",
            'import torch\nfwd = torch.amp.custom_fwd(forward_impl, device_type="neuron")\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\n\n@torch.cuda.amp.custom_fwd\ndef forward(ctx, x):\n    return x\n",
            "import torch\n\n@torch.amp.custom_fwd(device_type=torch.accelerator.current_accelerator().type)\n"
            "def forward(ctx, x):\n    return x\n",
            target="accelerator",
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import torch


            def forward_impl(ctx, x):
                return x * 2


            fwd = torch.cuda.amp.custom_fwd(forward_impl)
            """,
            """
            import torch


            def forward_impl(ctx, x):
                return x * 2


            fwd = torch.amp.custom_fwd(forward_impl, device_type="neuron")
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch


            class Double(torch.autograd.Function):
                @staticmethod
                @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                @torch.cuda.amp.custom_bwd
                def backward(ctx, g):
                    return g * 2


            x = torch.ones(3, device='neuron', requires_grad=True)
            with torch.autocast('neuron', dtype=torch.bfloat16):
                y = Double.apply(x)
            y.sum().backward()
            """,
            """
            import torch


            class Double(torch.autograd.Function):
                @staticmethod
                @torch.amp.custom_fwd(device_type="neuron", cast_inputs=torch.float32)
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                @torch.amp.custom_bwd(device_type="neuron")
                def backward(ctx, g):
                    return g * 2


            x = torch.ones(3, device='neuron', requires_grad=True)
            with torch.autocast('neuron', dtype=torch.bfloat16):
                y = Double.apply(x)
            y.sum().backward()
            """,
            runs=True,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._handled: set[cst.CSTNode] = set()

    def _safety(self) -> str:
        return target_safety(self.context)

    def _new(self, name: str) -> str:
        device = '"neuron"' if self.context.target == "neuron" else "torch.accelerator.current_accelerator().type"
        return f"torch.amp.{name}(device_type={device}, ...)"

    def visit_Decorator(self, node: cst.Decorator) -> None:
        target = node.decorator
        if isinstance(target, cst.Call):
            return  # visit_Call handles it
        qualname = self.context.qualname(target)
        if qualname not in CUSTOM_FN_CUDA:
            return
        self._handled.add(target)
        name = CUSTOM_FN_CUDA[qualname]
        torch_name, imports = self.context.torch_module_name()
        device, more = device_type_expr(self.context)
        call = cst.Call(func=expr(f"{torch_name}.amp.{name}"), args=[keyword_arg("device_type", device)])
        self.report(target, self.MESSAGE.format(old=qualname, new=self._new(name)), replacement=call,
                    imports=tuple(dict.fromkeys(imports + more)), safety=self._safety())

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in CUSTOM_FN_CUDA:
            name = CUSTOM_FN_CUDA[qualname]
            torch_name, imports = self.context.torch_module_name()
            device, more = device_type_expr(self.context, quote_of(node))
            call = node.with_changes(func=expr(f"{torch_name}.amp.{name}"))
            call = insert_arg(call, first_keyword_index(call), keyword_arg("device_type", device))
            self.report(node, self.MESSAGE.format(old=qualname, new=self._new(name)), replacement=call,
                        imports=tuple(dict.fromkeys(imports + more)), safety=self._safety())
        elif qualname in CUSTOM_FN_GENERIC:
            device = arg_named(node, "device_type")
            if device is None or not is_cuda_literal(device.value):
                return
            assert isinstance(device.value, cst.SimpleString)
            value, imports = device_type_expr(self.context, like=device.value)
            name = qualname.rsplit(".", 1)[1]
            self.report(device.value, self.MESSAGE.format(old=f"{qualname}(device_type='cuda')", new=self._new(name)),
                        replacement=value, imports=imports, safety=self._safety())
