"""NP303 ``cuda-grad-scaler`` (a CUDA ``GradScaler`` moves to the neuron device type) and NP304
``grad-scaler-with-bf16`` (a scaler that is always on where autocast uses bfloat16)."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.helpers.calls import arg_named, has_star_args, insert_arg, quote_of
from neuron_port.rules.helpers.nodes import expr
from neuron_port.rules.mixed_precision.common import (
    ACCELERATOR_CAVEAT,
    AUTOCAST_CUDA,
    AUTOCAST_GENERIC,
    GRAD_SCALER_CUDA,
    GRAD_SCALER_GENERIC,
    autocast_dtype,
    device_type_expr,
    is_cuda_literal,
    target_safety,
)
from neuron_port.rules.spec import FRAGMENT, Invalid, PythonRule, Valid


class CudaGradScaler(PythonRule):
    """Moves the CUDA gradient scaler to the neuron device type.

    ## What it does
    Rewrites ``torch.cuda.amp.GradScaler(...)`` (any import spelling) to
    ``torch.amp.GradScaler("neuron", ...)``, and the ``"cuda"`` device of ``torch.amp.GradScaler``
    (positional, ``device=``, or omitted: it defaults to ``"cuda"``) to ``"neuron"``. The other
    arguments (``enabled=``, ``init_scale=``, ...) are kept; they have the same order after ``device``.
    With ``--target accelerator`` the device becomes ``torch.accelerator.current_accelerator().type``.

    ## Why is this bad?
    On a Trainium host a CUDA ``GradScaler`` disables itself with a warning ("CUDA is not available.
    Disabling"): ``scaler.scale(loss)`` returns the loss unscaled. With float16 autocast, small
    gradients then underflow to zero. With bfloat16 autocast (recommended on Trainium) loss scaling is
    not needed at all (NP304 reports scalers that can go).

    ## Example
    ```python
    scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
    ```
    Use instead:
    ```python
    scaler = torch.amp.GradScaler("neuron", enabled=(dtype == "float16"))
    ```

    ## Fix safety
    Safe on the neuron target: ``torch.amp.GradScaler`` is the device-generic class that
    ``torch.cuda.amp.GradScaler`` wraps, with the same arguments after ``device``. Its unscale/update
    steps use two fused ATen ops; if TorchNeuron does not implement them they fall back to CPU (correct,
    slower). GradScaler support on neuron is not explicitly documented. Unsafe on the accelerator
    target: ``torch.accelerator.current_accelerator()`` is None on a CPU-only host, where the CUDA
    scaler only disabled itself.

    ## References
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py (GradScaler: NOT confirmed; used with fp16 only)
    - https://docs.pytorch.org/docs/stable/amp.html#gradient-scaling
    """

    CODE = "NP303"
    NAME = "cuda-grad-scaler"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "always"
    MESSAGE = (
        "a CUDA GradScaler disables itself on Trainium: use `{new}`"
    )
    TRIGGERS = ("GradScaler",)

    VALID = [
        Valid('import torch\nscaler = torch.amp.GradScaler("neuron", enabled=use_fp16)\n'),
        Valid("import torch\nscaler = torch.amp.GradScaler(device=device_type)\n"),
        Valid("from torch.cuda.amp import GradScaler\n"),
        Valid("import torch\nscaler = torch.amp.GradScaler(torch.accelerator.current_accelerator().type)\n",
              target="accelerator"),
    ]
    INVALID = [
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))\n",
            "import torch\nscaler = torch.amp.GradScaler('neuron', enabled=(dtype == 'float16'))\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler()\n",
            'import torch\nscaler = torch.amp.GradScaler("neuron")\n',
            runs=True,
        ),
        Invalid(
            "import torch\nscaler = torch.amp.GradScaler('cuda')\n",
            "import torch\nscaler = torch.amp.GradScaler('neuron')\n",
            runs=True,
        ),
        Invalid(
            'import torch\nscaler = torch.amp.GradScaler(device="cuda", init_scale=1024)\n',
            'import torch\nscaler = torch.amp.GradScaler(device="neuron", init_scale=1024)\n',
            runs=True,
        ),
        Invalid(
            "from torch.amp import GradScaler\n"
            "scaler = GradScaler(\n    init_scale=1024,\n    growth_interval=100,\n)\n",
            'from torch.amp import GradScaler\nscaler = GradScaler(\n    "neuron",\n    init_scale=1024,\n'
            "    growth_interval=100,\n)\n",
            runs=True,
        ),
        Invalid(
            "from torch.cuda.amp import GradScaler\nscaler = GradScaler(2.0**16)\n",
            'from torch.cuda.amp import GradScaler\nimport torch\n\nscaler = torch.amp.GradScaler("neuron", 2.0**16)\n',
            runs=True,
        ),
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler(enabled=use_amp)\n",
            "import torch\nscaler = torch.amp.GradScaler(torch.accelerator.current_accelerator().type, "
            "enabled=use_amp)\n",
            target="accelerator",
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import torch

            dtype = 'bfloat16'
            model = torch.nn.Linear(4, 2).to('neuron')
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))
            loss = model(torch.randn(3, 4, device='neuron')).sum()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            """,
            """
            import torch

            dtype = 'bfloat16'
            model = torch.nn.Linear(4, 2).to('neuron')
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler('neuron', enabled=(dtype == 'float16'))
            loss = model(torch.randn(3, 4, device='neuron')).sum()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch
            from torch.cuda.amp import GradScaler
            model = torch.nn.Linear(4, 2).to('neuron')
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = GradScaler(init_scale=2.0**10, growth_interval=100)
            loss = model(torch.randn(3, 4, device='neuron')).sum()
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            scaler.step(opt)
            scaler.update()
            """,
            """
            import torch
            from torch.cuda.amp import GradScaler
            model = torch.nn.Linear(4, 2).to('neuron')
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("neuron", init_scale=2.0**10, growth_interval=100)
            loss = model(torch.randn(3, 4, device='neuron')).sum()
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            scaler.step(opt)
            scaler.update()
            """,
            runs=True,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname not in GRAD_SCALER_CUDA and qualname not in GRAD_SCALER_GENERIC:
            return
        shown = 'torch.amp.GradScaler("neuron", ...)' if self.context.target == "neuron" else (
            "torch.amp.GradScaler(torch.accelerator.current_accelerator().type, ...)")
        message = self.MESSAGE.format(new=shown)
        if self.context.target == "neuron":
            message += " (bfloat16 needs no loss scaling)"
        safety = target_safety(self.context)
        if self.context.target == "accelerator":
            message += ACCELERATOR_CAVEAT
        if qualname in GRAD_SCALER_CUDA:
            torch_name, imports = self.context.torch_module_name()
            device, more = device_type_expr(self.context, quote_of(node))
            call = node.with_changes(func=expr(f"{torch_name}.amp.GradScaler"))
            call = insert_arg(call, 0, cst.Arg(value=device))
            self.report(node, message, replacement=call, imports=tuple(dict.fromkeys(imports + more)),
                        safety=safety)
        elif qualname in GRAD_SCALER_GENERIC:
            device = arg_named(node, "device", 0)
            if device is None:
                if has_star_args(node):
                    return
                value, imports = device_type_expr(self.context, quote_of(node))
                self.report(node, message, replacement=insert_arg(node, 0, cst.Arg(value=value)), imports=imports,
                            safety=safety)
            elif is_cuda_literal(device.value):
                assert isinstance(device.value, cst.SimpleString)
                value, imports = device_type_expr(self.context, like=device.value)
                self.report(device.value, message, replacement=value, imports=imports, safety=safety)


class GradScalerWithBf16(PythonRule):
    """Reports a gradient scaler that is always on in a file whose autocast regions use bfloat16.

    ## What it does
    Reports ``GradScaler(...)`` constructions (CUDA, neuron or device-generic) that are not switched by
    an ``enabled=`` argument, in a file that runs autocast with ``dtype=torch.bfloat16``.

    ## Why is this bad?
    Loss scaling exists because float16 gradients underflow. bfloat16 has float32's exponent range, so
    with bf16 autocast (the recommended precision on Trainium) the scaler only adds work: an unscale
    pass and an inf/NaN check over every gradient per step, and a host sync to read the result.

    ## Example
    ```python
    scaler = torch.amp.GradScaler("neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        loss = model(x)
    scaler.scale(loss).backward()
    ```
    Use instead:
    ```python
    scaler = torch.amp.GradScaler("neuron", enabled=(amp_dtype == torch.float16))
    ```

    ## Fix safety
    No automatic fix: removing the scaler means editing every ``scaler.scale/step/update`` call, and the
    file may use float16 elsewhere. ``enabled=False`` turns every scaler method into a pass-through.

    ## References
    - https://docs.pytorch.org/docs/stable/amp.html#gradient-scaling
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py
    """

    CODE = "NP304"
    NAME = "grad-scaler-with-bf16"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = (
        "this GradScaler is always on, but autocast here uses bfloat16, which needs no loss scaling: "
        "pass `enabled=False` (or enable it only for float16)"
    )
    TRIGGERS = ("GradScaler",)

    VALID = [
        Valid(
            "import torch\nscaler = torch.amp.GradScaler('neuron', enabled=(dtype == 'float16'))\n"
            "with torch.autocast('neuron', dtype=torch.bfloat16):\n    pass\n"
        ),
        Valid("import torch\nscaler = torch.amp.GradScaler('neuron')\n"
              "with torch.autocast('neuron', dtype=torch.float16):\n    pass\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nscaler = torch.amp.GradScaler('neuron')\n"
            "with torch.autocast('neuron', dtype=torch.bfloat16):\n    pass\n"
        ),
        Invalid(
            "import torch as th\nscaler = th.cuda.amp.GradScaler(enabled=True)\n"
            "with th.autocast(device_type='cuda', dtype=th.bfloat16):\n    pass\n"
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._scalers: list[cst.Call] = []
        self._bf16 = False

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in GRAD_SCALER_CUDA or qualname in GRAD_SCALER_GENERIC:
            enabled = arg_named(node, "enabled", 5 if qualname in GRAD_SCALER_GENERIC else 4)
            if enabled is None or (isinstance(enabled.value, cst.Name) and enabled.value.value == "True"):
                self._scalers.append(node)
        elif qualname in AUTOCAST_CUDA or qualname in AUTOCAST_GENERIC:
            dtype = autocast_dtype(node)
            if dtype is not None and self.context.qualname(dtype.value) == "torch.bfloat16":
                self._bf16 = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._bf16:
            for node in self._scalers:
                self.report(node)
