"""NP3xx: mixed precision (autocast, GradScaler, custom_fwd/custom_bwd).

The rules find the CUDA spellings of automatic mixed precision and move them to the ``neuron`` device
type (or, with ``--target accelerator``, to the device type of ``torch.accelerator``):

- ``torch.cuda.amp.autocast(...)`` (also reached as ``from torch.cuda import amp`` / ``from torch.cuda.amp
  import autocast``) and ``torch.autocast("cuda")`` / ``torch.amp.autocast(device_type="cuda")``;
- ``torch.cuda.amp.GradScaler(...)`` and ``torch.amp.GradScaler("cuda")`` / ``GradScaler()``;
- ``torch.cuda.amp.custom_fwd`` / ``custom_bwd`` decorators.

Facts behind them: shared/torchneuron.md section 4 (autocast follows the CUDA op lists; the default
autocast dtype of TorchNeuron is not documented; bf16 is the recommended precision) and section 7 item 3.

The small call-editing helpers at the top keep the layout of multi-line calls (separators and trailing
commas are copied from the call being edited); ``rules/compile.py`` uses them too.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.spec import Invalid, PythonRule, Valid
from neuron_port.rules.helpers.calls import (
    arg_named,
    first_keyword_index,
    has_star_args,
    insert_arg,
    keyword_arg,
    quote_of,
)
from neuron_port.rules.helpers.nodes import expr, replace_string, string_value

Imports = tuple[tuple[str, Optional[str], Optional[str]], ...]


def device_type_expr(context, quote: str = '"', like: Optional[cst.SimpleString] = None) -> tuple[cst.BaseExpression, Imports]:
    """The device type the ported code names: ``"neuron"``, or on the accelerator target the type of
    the current accelerator (``torch.accelerator.current_accelerator().type``, ``"cuda"`` on a GPU
    host and ``"neuron"`` on Trainium)."""
    if context.target == "accelerator":
        torch_name, imports = context.torch_module_name()
        return expr(f"{torch_name}.accelerator.current_accelerator().type"), imports
    if like is not None:
        return replace_string(like, "neuron"), ()
    return cst.SimpleString(f"{quote}neuron{quote}"), ()


ACCELERATOR_CAVEAT = " (unsafe: `current_accelerator()` is None on CPU-only hosts)"


def target_safety(context) -> str:
    """Safe on the neuron target; unsafe on the accelerator target, where the device type becomes
    ``torch.accelerator.current_accelerator().type``: that raises on a CPU-only host, where the
    original ``"cuda"`` region or scaler merely disabled itself with a warning (NP101 rules the same)."""
    return "unsafe" if context.target == "accelerator" else "safe"


def is_cuda_literal(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.SimpleString) and string_value(node) == "cuda"


# --------------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------------

AUTOCAST_CUDA = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
AUTOCAST_GENERIC = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
# positional parameters of torch.cuda.amp.autocast, in order (torch.autocast orders them differently)
CUDA_AUTOCAST_PARAMS = ("enabled", "dtype", "cache_enabled")

GRAD_SCALER_CUDA = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
GRAD_SCALER_GENERIC = frozenset({"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler", "torch.GradScaler"})

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

DTYPE_NOTE = (
    "no dtype given: TorchNeuron's default autocast dtype is not documented (CUDA's is float16); "
    "bfloat16 is the recommended precision on Trainium, see NP302"
)


def _port_cuda_autocast(call: cst.Call, context) -> Optional[tuple[cst.Call, Imports]]:
    """``torch.cuda.amp.autocast(a, b)`` -> ``torch.autocast(device_type=..., enabled=a, dtype=b)``."""
    if has_star_args(call):
        return None
    args = []
    position = 0
    for arg in call.args:
        if arg.keyword is None:
            if position >= len(CUDA_AUTOCAST_PARAMS):
                return None
            arg = arg.with_changes(
                keyword=cst.Name(CUDA_AUTOCAST_PARAMS[position]),
                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                      whitespace_after=cst.SimpleWhitespace("")),
            )
            position += 1
        args.append(arg)
    torch_name, imports = context.torch_module_name()
    device, more = device_type_expr(context, quote_of(call))
    new = call.with_changes(func=expr(f"{torch_name}.autocast"), args=args)
    new = insert_arg(new, 0, keyword_arg("device_type", device))
    return new, tuple(dict.fromkeys(imports + more))


def _autocast_device(call: cst.Call) -> Optional[cst.Arg]:
    return arg_named(call, "device_type", 0)


def _autocast_dtype(call: cst.Call) -> Optional[cst.Arg]:
    # torch.cuda.amp.autocast(enabled, dtype, ...) and torch.autocast(device_type, dtype, ...) both
    # take the dtype second
    return arg_named(call, "dtype", 1)


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
    - shared/torchneuron.md section 4 (autocast on neuron) and section 7 item 3
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html
    - https://docs.pytorch.org/docs/stable/amp.html
    """

    CODE = "NP301"
    NAME = "cuda-autocast"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    MESSAGE = "autocast on the CUDA device type is disabled on Trainium (the region runs in float32): use `{new}`"
    TRIGGERS = ("autocast",)

    VALID = [
        Valid('import torch\nwith torch.autocast(device_type="neuron", dtype=torch.bfloat16):\n    y = model(x)\n'),
        Valid("import torch\nctx = torch.autocast(device_type=device_type, dtype=ptdtype)\n"),
        Valid("import torch\nwith torch.autocast('cpu'):\n    y = model(x)\n"),
        Valid("import torch\nwith torch.autocast(device_type=torch.accelerator.current_accelerator().type):\n    pass\n",
              target="accelerator"),
        Valid("from torch.cuda.amp import autocast\n"),  # the import itself is left alone
    ]
    INVALID = [
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast():\n    y = model(x)\n",
            'import torch\nwith torch.autocast(device_type="neuron"):\n    y = model(x)\n',
            message_contains="NP302",
        ),
        Invalid(
            "import torch\nwith torch.autocast('cuda', dtype=torch.bfloat16):\n    y = model(x)\n",
            "import torch\nwith torch.autocast('neuron', dtype=torch.bfloat16):\n    y = model(x)\n",
        ),
        Invalid(
            "import torch\nwith torch.amp.autocast(device_type='cuda', enabled=use_amp):\n    y = model(x)\n",
            "import torch\nwith torch.amp.autocast(device_type='neuron', enabled=use_amp):\n    y = model(x)\n",
        ),
        Invalid(
            "from torch.cuda import amp\nwith amp.autocast(use_amp, torch.bfloat16):\n    y = model(x)\n",
            "from torch.cuda import amp\nimport torch\n\n"
            'with torch.autocast(device_type="neuron", enabled=use_amp, dtype=torch.bfloat16):\n    y = model(x)\n',
        ),
        Invalid(
            "import torch as th\n\n@th.cuda.amp.autocast(dtype=th.float16)\ndef forward(x):\n    return x\n",
            'import torch as th\n\n@th.autocast(device_type="neuron", dtype=th.float16)\ndef forward(x):\n    return x\n',
        ),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(\n    enabled=True,\n    dtype=torch.bfloat16,\n):\n    pass\n",
            'import torch\nwith torch.autocast(\n    device_type="neuron",\n    enabled=True,\n'
            "    dtype=torch.bfloat16,\n):\n    pass\n",
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
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._called: set[cst.CSTNode] = set()

    def _message(self, new: str, has_dtype: bool) -> str:
        message = self.MESSAGE.format(new=new)
        if self.context.target == "accelerator":
            message += ACCELERATOR_CAVEAT
        if not has_dtype:
            if self.context.target == "neuron":
                message += f" ({DTYPE_NOTE})"
            else:
                message += " (no dtype given: each device uses its default autocast dtype)"
        return message

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in AUTOCAST_CUDA:
            self._called.add(node.func)
            has_dtype = _autocast_dtype(node) is not None
            ported = _port_cuda_autocast(node, self.context)
            new = 'torch.autocast(device_type="neuron", ...)' if self.context.target == "neuron" else (
                "torch.autocast(device_type=torch.accelerator.current_accelerator().type, ...)")
            if ported is None:
                self.report(node, self._message(new, has_dtype), effort="low")
                return
            replacement, imports = ported
            self.report(node, self._message(new, has_dtype), replacement=replacement, imports=imports,
                        safety=target_safety(self.context))
        elif qualname in AUTOCAST_GENERIC:
            device = _autocast_device(node)
            if device is None or not is_cuda_literal(device.value):
                return
            assert isinstance(device.value, cst.SimpleString)
            replacement, imports = device_type_expr(self.context, like=device.value)
            shown = "device_type=\"neuron\"" if self.context.target == "neuron" else (
                "device_type=torch.accelerator.current_accelerator().type")
            has_dtype = _autocast_dtype(node) is not None
            self.report(device.value, self._message(shown, has_dtype), replacement=replacement, imports=imports,
                        safety=target_safety(self.context))

    def _reference(self, node: cst.BaseExpression, last: str) -> None:
        if (last != "autocast" and last not in self.context.aliases) or node in self._called \
                or not self.context.is_reference(node):
            return
        if self.context.qualname(node) in AUTOCAST_CUDA:
            self.report(
                node,
                "`torch.cuda.amp.autocast` is disabled on Trainium; where it is called, call "
                '`torch.autocast(device_type="neuron", ...)` instead (or use '
                '`functools.partial(torch.autocast, "neuron")`)',
                effort="low",
            )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node, node.attr.value)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node, node.value)


class AutocastWithoutDtype(PythonRule):
    """Asks for an explicit autocast dtype on Trainium and offers bfloat16.

    ## What it does
    Reports autocast regions for CUDA or neuron (``torch.cuda.amp.autocast()``,
    ``torch.autocast("cuda")``, ``torch.autocast(device_type="neuron")``, ...) that do not pass a
    ``dtype``, and offers ``dtype=torch.bfloat16`` (moving a CUDA region to ``"neuron"`` in the same
    edit).

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
    - shared/torchneuron.md section 4 ("Default autocast dtype when dtype is omitted: NOT confirmed")
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html
    - https://docs.pytorch.org/docs/stable/amp.html#torch.autocast
    """

    CODE = "NP302"
    NAME = "autocast-without-dtype"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    MESSAGE = (
        "autocast without a dtype: TorchNeuron's default autocast dtype is not documented (CUDA's is "
        "float16); pass `dtype=torch.bfloat16`, the recommended precision on Trainium"
    )
    TRIGGERS = ("autocast",)
    TARGETS = ("neuron",)

    VALID = [
        Valid('import torch\nwith torch.autocast(device_type="neuron", dtype=torch.bfloat16):\n    pass\n'),
        Valid("import torch\nwith torch.autocast('neuron', torch.float16):\n    pass\n"),
        Valid("import torch\nwith torch.autocast('cpu'):\n    pass\n"),
        Valid("import torch\nctx = torch.autocast(device_type=device_type)\n"),
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
            'import torch\nwith torch.autocast(device_type="neuron", enabled=use_amp, dtype=torch.bfloat16):\n    pass\n',
            unsafe_fixes=True,
        ),
        Invalid(
            "from torch.amp import autocast\nwith autocast('cuda'):\n    pass\n",
            "from torch.amp import autocast\nimport torch\n\nwith autocast('neuron', dtype=torch.bfloat16):\n    pass\n",
            unsafe_fixes=True,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in AUTOCAST_CUDA:
            if _autocast_dtype(node) is not None:
                return
            ported = _port_cuda_autocast(node, self.context)
            if ported is None:
                self.report(node, effort="low")
                return
            call, imports = ported
        elif qualname in AUTOCAST_GENERIC:
            device = _autocast_device(node)
            if device is None or _autocast_dtype(node) is not None:
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


def _scaler_has_no_device(call: cst.Call) -> bool:
    return arg_named(call, "device", 0) is None


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
    - shared/torchneuron.md section 4 (GradScaler: NOT confirmed; used with fp16 only)
    - https://docs.pytorch.org/docs/stable/amp.html#gradient-scaling
    """

    CODE = "NP303"
    NAME = "cuda-grad-scaler"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "always"
    MESSAGE = (
        "a CUDA GradScaler disables itself on Trainium: use `{new}` (with bfloat16 autocast, recommended "
        "on Trainium, loss scaling is unnecessary: keep the scaler only for float16)"
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
        ),
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler()\n",
            'import torch\nscaler = torch.amp.GradScaler("neuron")\n',
        ),
        Invalid(
            "import torch\nscaler = torch.amp.GradScaler('cuda')\n",
            "import torch\nscaler = torch.amp.GradScaler('neuron')\n",
        ),
        Invalid(
            'import torch\nscaler = torch.amp.GradScaler(device="cuda", init_scale=1024)\n',
            'import torch\nscaler = torch.amp.GradScaler(device="neuron", init_scale=1024)\n',
        ),
        Invalid(
            "from torch.amp import GradScaler\nscaler = GradScaler(\n    init_scale=1024,\n    growth_interval=100,\n)\n",
            'from torch.amp import GradScaler\nscaler = GradScaler(\n    "neuron",\n    init_scale=1024,\n'
            "    growth_interval=100,\n)\n",
        ),
        Invalid(
            "from torch.cuda.amp import GradScaler\nscaler = GradScaler(2.0**16)\n",
            'from torch.cuda.amp import GradScaler\nimport torch\n\nscaler = torch.amp.GradScaler("neuron", 2.0**16)\n',
        ),
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler(enabled=use_amp)\n",
            "import torch\nscaler = torch.amp.GradScaler(torch.accelerator.current_accelerator().type, "
            "enabled=use_amp)\n",
            target="accelerator",
            unsafe_fixes=True,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname not in GRAD_SCALER_CUDA and qualname not in GRAD_SCALER_GENERIC:
            return
        shown = 'torch.amp.GradScaler("neuron", ...)' if self.context.target == "neuron" else (
            "torch.amp.GradScaler(torch.accelerator.current_accelerator().type, ...)")
        message = self.MESSAGE.format(new=shown)
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
    - shared/torchneuron.md section 4
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
        Valid("import torch\nscaler = torch.amp.GradScaler('neuron')\nwith torch.autocast('neuron', dtype=torch.float16):\n    pass\n"),
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
            dtype = _autocast_dtype(node)
            if dtype is not None and self.context.qualname(dtype.value) == "torch.bfloat16":
                self._bf16 = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._bf16:
            for node in self._scalers:
                self.report(node)


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
    - shared/torchneuron.md section 4
    """

    CODE = "NP305"
    NAME = "cuda-custom-fwd-bwd"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "always"
    MESSAGE = "`{old}` follows CUDA's autocast state, not neuron's: use `{new}`"
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
        ),
        Invalid(
            "from torch.cuda.amp import custom_fwd\n\n@custom_fwd(cast_inputs=torch.float32)\ndef forward(ctx, x):\n"
            "    return x\n",
            "from torch.cuda.amp import custom_fwd\nimport torch\n\n"
            '@torch.amp.custom_fwd(device_type="neuron", cast_inputs=torch.float32)\ndef forward(ctx, x):\n'
            "    return x\n",
        ),
        Invalid(
            "from torch.cuda import amp\n\n@amp.custom_bwd\ndef backward(ctx, g):\n    return g\n",
            'from torch.cuda import amp\nimport torch\n\n@torch.amp.custom_bwd(device_type="neuron")\n'
            "def backward(ctx, g):\n    return g\n",
        ),
        Invalid(
            "import torch\n\n@torch.amp.custom_bwd(device_type='cuda')\ndef backward(ctx, g):\n    return g\n",
            "import torch\n\n@torch.amp.custom_bwd(device_type='neuron')\ndef backward(ctx, g):\n    return g\n",
        ),
        Invalid(
            "import torch\nfwd = torch.cuda.amp.custom_fwd(forward_impl)\n",
            'import torch\nfwd = torch.amp.custom_fwd(forward_impl, device_type="neuron")\n',
        ),
        Invalid(
            "import torch\n\n@torch.cuda.amp.custom_fwd\ndef forward(ctx, x):\n    return x\n",
            "import torch\n\n@torch.amp.custom_fwd(device_type=torch.accelerator.current_accelerator().type)\n"
            "def forward(ctx, x):\n    return x\n",
            target="accelerator",
            unsafe_fixes=True,
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
