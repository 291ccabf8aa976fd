"""NP301 ``cuda-autocast``: autocast regions on the CUDA device type (``torch.cuda.amp.autocast(...)``,
``torch.autocast("cuda")``) move to the neuron device type."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.mixed_precision.common import (
    ACCELERATOR_CAVEAT,
    AUTOCAST_CUDA,
    AUTOCAST_GENERIC,
    autocast_device,
    autocast_dtype,
    device_type_expr,
    is_cuda_literal,
    port_cuda_autocast,
    target_safety,
)
from neuron_port.rules.spec import FRAGMENT, Invalid, PythonRule, Valid

DTYPE_NOTE = "no dtype: see NP302"


class CudaAutocast(PythonRule):
    """Moves CUDA autocast regions to the neuron device type.

    ## What it does
    Rewrites ``torch.cuda.amp.autocast(...)`` (also ``from torch.cuda import amp; amp.autocast()`` and
    ``from torch.cuda.amp import autocast``) to ``torch.autocast(device_type="neuron", ...)``, and the
    ``"cuda"`` device type of ``torch.autocast`` / ``torch.amp.autocast`` (positional or
    ``device_type=``) to ``"neuron"``. ``enabled=``, ``dtype=`` and ``cache_enabled=`` are kept; the
    positional arguments of ``torch.cuda.amp.autocast`` (``enabled, dtype, cache_enabled``) become
    keywords because ``torch.autocast`` orders its parameters differently. A device type held in a
    variable (``torch.autocast(device_type=device_type)``) is left alone: the device-string rules follow
    the variable to where the string is made.

    With ``--target accelerator`` the device type becomes
    ``torch.accelerator.current_accelerator().type``, which is ``"cuda"`` on a GPU host and
    ``"neuron"`` on Trainium, so the region is mixed precision on both.

    ## Why is this bad?
    On a Trainium host CUDA is not available, and PyTorch *disables* a ``"cuda"`` autocast region with a
    warning ("User provided device_type of 'cuda', but CUDA is not available. Disabling"). The model
    then silently trains in float32: it runs, but several times slower than in bf16/fp16.

    ## Example
    ```python
    with torch.cuda.amp.autocast():
        loss = model(x)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x)
    ```
    Use instead:
    ```python
    with torch.autocast(device_type="neuron"):
        loss = model(x)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## Fix safety
    Safe: only the device type changes; the precision the code asked for is kept. When no dtype is given
    the region uses the device's default autocast dtype: float16 on CUDA (``torch.cuda.amp.autocast``
    even hard-codes it) and PyTorch's generic default for out-of-tree devices, also float16, on
    Trainium unless TorchNeuron overrides it (not documented). Choosing bfloat16 instead is a precision
    change and is left to NP302 (an unsafe fix). On the accelerator target the fix is unsafe:
    ``torch.accelerator.current_accelerator()`` is None on a CPU-only host, so the rewritten region
    raises there, where the ``"cuda"`` region only disabled itself with a warning.

    ## References
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py (autocast on neuron) and https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html
    - https://docs.pytorch.org/docs/stable/amp.html
    """

    CODE = "NP301"
    NAME = "cuda-autocast"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    MESSAGE = "autocast on the CUDA device type is disabled on Trainium: use `{new}`"
    TRIGGERS = ("autocast",)

    VALID = [
        Valid('import torch\nwith torch.autocast(device_type="neuron", dtype=torch.bfloat16):\n    y = model(x)\n'),
        Valid("import torch\nctx = torch.autocast(device_type=device_type, dtype=ptdtype)\n"),
        Valid("import torch\nwith torch.autocast('cpu'):\n    y = model(x)\n"),
        Valid("import torch\nwith torch.autocast(device_type=torch.accelerator.current_accelerator().type):\n"
              "    pass\n", target="accelerator"),
        Valid("from torch.cuda.amp import autocast\n"),  # the import is NP306's business
    ]
    INVALID = [
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast():\n    y = model(x)\n",
            'import torch\nwith torch.autocast(device_type="neuron"):\n    y = model(x)\n',
            message_contains="NP302",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\nwith torch.autocast('cuda', dtype=torch.bfloat16):\n    y = model(x)\n",
            "import torch\nwith torch.autocast('neuron', dtype=torch.bfloat16):\n    y = model(x)\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\nwith torch.amp.autocast(device_type='cuda', enabled=use_amp):\n    y = model(x)\n",
            "import torch\nwith torch.amp.autocast(device_type='neuron', enabled=use_amp):\n    y = model(x)\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "from torch.cuda import amp\nwith amp.autocast(use_amp, torch.bfloat16):\n    y = model(x)\n",
            "from torch.cuda import amp\nimport torch\n\n"
            'with torch.autocast(device_type="neuron", enabled=use_amp, dtype=torch.bfloat16):\n    y = model(x)\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch as th\n\n@th.cuda.amp.autocast(dtype=th.float16)\ndef forward(x):\n    return x\n",
            'import torch as th\n\n@th.autocast(device_type="neuron", dtype=th.float16)\ndef forward(x):\n'
            "    return x\n",
            runs=True,
        ),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(\n    enabled=True,\n    dtype=torch.bfloat16,\n):\n    pass\n",
            'import torch\nwith torch.autocast(\n    device_type="neuron",\n    enabled=True,\n'
            "    dtype=torch.bfloat16,\n):\n    pass\n",
            runs=True,
        ),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(enabled=use_amp):\n    pass\n",
            "import torch\nwith torch.autocast(device_type=torch.accelerator.current_accelerator().type, "
            "enabled=use_amp):\n    pass\n",
            target="accelerator",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch\nwith torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n    pass\n",
            "import torch\nwith torch.autocast(device_type=torch.accelerator.current_accelerator().type, "
            "dtype=torch.bfloat16):\n    pass\n",
            target="accelerator",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch\nwith torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n    pass\n",
            None,  # safe fixes only: reported
            target="accelerator",
            message_contains="CPU-only",
        ),
        # a reference that is not called cannot be rewritten in place
        Invalid("import torch\nctx = torch.cuda.amp.autocast if use_amp else nullcontext\n", None),
        Invalid(
            """
            import torch

            model = torch.nn.Linear(4, 2).to('neuron')
            x = torch.randn(3, 4, device='neuron')
            use_amp = True
            with torch.cuda.amp.autocast():
                y = model(x)
            with torch.autocast('cuda', dtype=torch.bfloat16):
                y = model(x)
            with torch.amp.autocast(device_type='cuda', enabled=use_amp):
                y = model(x)
            """,
            """
            import torch

            model = torch.nn.Linear(4, 2).to('neuron')
            x = torch.randn(3, 4, device='neuron')
            use_amp = True
            with torch.autocast(device_type="neuron"):
                y = model(x)
            with torch.autocast('neuron', dtype=torch.bfloat16):
                y = model(x)
            with torch.amp.autocast(device_type='neuron', enabled=use_amp):
                y = model(x)
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch
            model = torch.nn.Linear(4, 2).to('neuron')


            @torch.cuda.amp.autocast()
            def forward(x):
                return model(x)


            with torch.cuda.amp.autocast(enabled=False):
                y = forward(torch.randn(3, 4, device='neuron'))
            with torch.cuda.amp.autocast(dtype=torch.float16, cache_enabled=False):
                y = model(torch.randn(3, 4, device='neuron'))
            """,
            """
            import torch
            model = torch.nn.Linear(4, 2).to('neuron')


            @torch.autocast(device_type="neuron")
            def forward(x):
                return model(x)


            with torch.autocast(device_type="neuron", enabled=False):
                y = forward(torch.randn(3, 4, device='neuron'))
            with torch.autocast(device_type="neuron", dtype=torch.float16, cache_enabled=False):
                y = model(torch.randn(3, 4, device='neuron'))
            """,
            runs=True,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._called: set[cst.CSTNode] = set()

    def _message(self, new: str, has_dtype: bool) -> str:
        message = self.MESSAGE.format(new=new)
        if self.context.target == "accelerator":
            message += ACCELERATOR_CAVEAT
        if not has_dtype and self.context.target == "neuron":
            message += f" ({DTYPE_NOTE})"  # on the accelerator target each device uses its default
        return message

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in AUTOCAST_CUDA:
            self._called.add(node.func)
            has_dtype = autocast_dtype(node) is not None
            ported = port_cuda_autocast(node, self.context)
            new = 'torch.autocast(device_type="neuron", ...)' if self.context.target == "neuron" else (
                "device_type=torch.accelerator.current_accelerator().type")
            if ported is None:
                self.report(node, self._message(new, has_dtype), effort="low")
                return
            replacement, imports = ported
            self.report(node, self._message(new, has_dtype), replacement=replacement, imports=imports,
                        safety=target_safety(self.context))
        elif qualname in AUTOCAST_GENERIC:
            device = autocast_device(node)
            if device is None or not is_cuda_literal(device.value):
                return
            assert isinstance(device.value, cst.SimpleString)
            replacement, imports = device_type_expr(self.context, like=device.value)
            shown = "device_type=\"neuron\"" if self.context.target == "neuron" else (
                "device_type=torch.accelerator.current_accelerator().type")
            has_dtype = autocast_dtype(node) is not None
            self.report(device.value, self._message(shown, has_dtype), replacement=replacement, imports=imports,
                        safety=target_safety(self.context))

    def _reference(self, node: cst.BaseExpression, last: str) -> None:
        if (last != "autocast" and last not in self.context.aliases) or node in self._called \
                or not self.context.is_reference(node):
            return
        if self.context.qualname(node) in AUTOCAST_CUDA:
            self.report(
                node,
                "`torch.cuda.amp.autocast` is disabled on Trainium: call "
                '`torch.autocast(device_type="neuron", ...)` (or `functools.partial(torch.autocast, "neuron")`)',
                effort="low",
            )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node, node.attr.value)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node, node.value)
