"""NP302 ``autocast-without-dtype``: autocast regions for CUDA or neuron that pass no dtype (offers
``dtype=torch.bfloat16``, the recommended precision on Trainium)."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.helpers.calls import arg_named, insert_arg, keyword_arg
from neuron_port.rules.helpers.nodes import expr, replace_string, string_value
from neuron_port.rules.mixed_precision.common import (
    AUTOCAST_CUDA,
    AUTOCAST_GENERIC,
    autocast_device,
    autocast_dtype,
    port_cuda_autocast,
)
from neuron_port.rules.spec import Invalid, PythonRule, Valid


class AutocastWithoutDtype(PythonRule):
    """Asks for an explicit autocast dtype on Trainium and offers bfloat16.

    ## What it does
    Reports autocast regions for CUDA or neuron (``torch.cuda.amp.autocast()``,
    ``torch.autocast("cuda")``, ``torch.autocast(device_type="neuron")``, ...) that do not pass a
    ``dtype``, and offers ``dtype=torch.bfloat16`` (moving a CUDA region to ``"neuron"`` in the same
    edit). A region switched off with a literal ``enabled=False`` runs in full precision whatever its
    dtype, so it is neither reported nor edited.

    ## Why is this bad?
    Without a dtype the region uses the device's default autocast dtype. On CUDA that is float16; for
    TorchNeuron the default is not documented (PyTorch's generic default for out-of-tree devices is
    float16). The Neuron documentation passes ``dtype=torch.bfloat16`` explicitly, and bf16 is the
    recommended precision on Trainium: it has float32's exponent range, so it does not overflow where
    float16 would and needs no loss scaling, at the same TensorEngine throughput as fp16.

    ## Example
    ```python
    with torch.autocast(device_type="neuron"):
        loss = model(x)
    ```
    Use instead:
    ```python
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## Fix safety
    Unsafe: the fix changes the numerics of the region from float16 (what the CUDA code ran with) to
    bfloat16 (three fewer mantissa bits, much wider range). Most models train as well or better in bf16,
    but some are known to lose accuracy or collapse in bf16 (e.g. normalisation over very large
    activations), so the change needs a person to confirm it; the loss curve should be compared after
    switching. With bf16 a ``GradScaler`` becomes unnecessary (NP304). Only for the neuron target: on
    the accelerator target the same code also runs on GPUs, where bf16 needs Ampere or newer.

    ## References
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py ("Default autocast dtype when dtype is omitted: NOT confirmed")
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html
    - https://docs.pytorch.org/docs/stable/amp.html#torch.autocast
    """

    CODE = "NP302"
    NAME = "autocast-without-dtype"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    MESSAGE = (
        "autocast without a dtype (TorchNeuron's default is not documented): pass `dtype=torch.bfloat16`, "
        "the recommended precision on Trainium"
    )
    TRIGGERS = ("autocast",)
    TARGETS = ("neuron",)

    VALID = [
        Valid('import torch\nwith torch.autocast(device_type="neuron", dtype=torch.bfloat16):\n    pass\n'),
        Valid("import torch\nwith torch.autocast('neuron', torch.float16):\n    pass\n"),
        Valid("import torch\nwith torch.autocast('cpu'):\n    pass\n"),
        Valid("import torch\nctx = torch.autocast(device_type=device_type)\n"),
        # a disabled region computes in full precision: no dtype to choose, and none is added
        Valid("import torch\nwith torch.autocast(device_type='neuron', enabled=False):\n    y = model(x)\n"),
        Valid("import torch\nwith torch.autocast('cuda', None, False):\n    y = model(x)\n"),
        Valid("import torch\n\n@torch.cuda.amp.autocast(enabled=False)\ndef forward(x):\n    return x\n"),
        Valid("import torch\nwith torch.cuda.amp.autocast(False):\n    y = model(x)\n"),
    ]
    INVALID = [
        Invalid(
            'import torch\nwith torch.autocast(device_type="neuron"):\n    pass\n',
            'import torch\nwith torch.autocast(device_type="neuron", dtype=torch.bfloat16):\n    pass\n',
            unsafe_fixes=True,
        ),
        Invalid('import torch\nwith torch.autocast(device_type="neuron"):\n    pass\n', None),  # safe mode: report only
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(enabled=use_amp):\n    pass\n",
            'import torch\nwith torch.autocast(device_type="neuron", enabled=use_amp, dtype=torch.bfloat16):\n'
            "    pass\n",
            unsafe_fixes=True,
        ),
        Invalid(
            "from torch.amp import autocast\nwith autocast('cuda'):\n    pass\n",
            "from torch.amp import autocast\nimport torch\n\n"
            "with autocast('neuron', dtype=torch.bfloat16):\n    pass\n",
            unsafe_fixes=True,
        ),
        # `**kwargs` (or `*args`) cannot be ported to torch.autocast: reported without a fix
        Invalid("import torch\nwith torch.cuda.amp.autocast(**amp_kwargs):\n    pass\n", None, unsafe_fixes=True),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in AUTOCAST_CUDA or qualname in AUTOCAST_GENERIC:
            # torch.cuda.amp.autocast(enabled, dtype, ...) / torch.autocast(device_type, dtype, enabled, ...)
            enabled = arg_named(node, "enabled", 0 if qualname in AUTOCAST_CUDA else 2)
            if enabled is not None and isinstance(enabled.value, cst.Name) and enabled.value.value == "False":
                return  # a disabled region: full precision whatever the dtype
        if qualname in AUTOCAST_CUDA:
            if autocast_dtype(node) is not None:
                return
            ported = port_cuda_autocast(node, self.context)
            if ported is None:
                self.report(node, effort="low")
                return
            call, imports = ported
        elif qualname in AUTOCAST_GENERIC:
            device = autocast_device(node)
            if device is None or autocast_dtype(node) is not None:
                return
            value = string_value(device.value)
            if value not in ("cuda", "neuron"):
                return
            call, imports = node, ()
            if value == "cuda":
                assert isinstance(device.value, cst.SimpleString)
                call = node.with_deep_changes(device.value, value=replace_string(device.value, "neuron").value)
        else:
            return
        torch_name, more = self.context.torch_module_name()
        call = insert_arg(call, len(call.args), keyword_arg("dtype", expr(f"{torch_name}.bfloat16")))
        self.report(node, replacement=call, imports=tuple(dict.fromkeys(imports + more)))
