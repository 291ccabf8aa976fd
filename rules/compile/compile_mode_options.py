"""NP403 ``compile-mode`` and NP405 ``compile-inductor-options``: the ``mode=`` and ``options=`` arguments
of ``torch.compile`` that the neuron backend ignores."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.compile.common import CompileCallRule
from neuron_port.rules.compile.tables import MODE_NOTES, NEURON_COMPILE_OPTIONS
from neuron_port.rules.helpers.calls import arg_named, remove_arg
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.spec import FRAGMENT, Invalid, Valid


class CompileMode(CompileCallRule):
    """Removes ``torch.compile`` modes that the neuron backend ignores.

    ## What it does
    Finds ``mode=`` arguments of ``torch.compile`` other than ``"default"`` (``"reduce-overhead"``,
    ``"max-autotune"``, ``"max-autotune-no-cudagraphs"``, or a value held in a variable) and removes
    them. On the accelerator target it only reports them.

    ## Why is this bad?
    TorchNeuron supports only the default mode: any other mode logs "Neuron backend does not support
    mode='...', falling back to default mode." and has no effect. The modes configure Inductor
    (Triton autotuning) and CUDA graphs (``"reduce-overhead"``), neither of which exists on Trainium;
    the Neuron migration guide says to remove them.

    ## Example
    ```python
    model = torch.compile(model, backend="neuron", mode="max-autotune")
    ```
    Use instead:
    ```python
    model = torch.compile(model, backend="neuron")
    ```

    ## Fix safety
    Safe for a literal mode on the neuron target: on Trainium the mode is ignored, so removing it only
    removes the warning. (On a GPU it would change what Inductor does, which is why the accelerator
    target does not remove it.) Unsafe when the mode comes from a variable, whose value may be
    ``"default"`` and which may be used elsewhere.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/how-to-optimize-with-torch-compile.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/how-to-optimize-with-torch-compile.html
    """

    CODE = "NP403"
    NAME = "compile-mode"
    SEVERITY = "info"
    FIX_AVAILABILITY = "sometimes"
    MESSAGE = (
        "torch.compile mode {mode} has no effect on Trainium (the default mode is used{note})"
    )

    VALID = [
        Valid('import torch\nmodel = torch.compile(model, backend="neuron")\n'),
        Valid('import torch\nmodel = torch.compile(model, backend="neuron", mode="default")\n'),
        Valid("import torch\nmodel = torch.compile(model, backend='neuron', mode=None)\n"),
    ]
    INVALID = [
        Invalid(
            'import torch\nmodel = torch.compile(model, backend="neuron", mode="max-autotune")\n',
            'import torch\nmodel = torch.compile(model, backend="neuron")\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\nmodel = torch.compile(\n    model,\n    mode='max-autotune-no-cudagraphs',\n"
            "    backend='neuron',\n)\n",
            "import torch\nmodel = torch.compile(\n    model,\n    backend='neuron',\n)\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\n\n@torch.compile(backend='neuron', mode='reduce-overhead')\ndef f(x):\n    return x\n",
            "import torch\n\n@torch.compile(backend='neuron')\ndef f(x):\n    return x\n",
            message_contains="CUDA graphs",
            runs=True,
        ),
        Invalid("import torch\nmodel = torch.compile(model, backend='neuron', mode=args.compile_mode)\n", None),
        Invalid(
            "import torch\nmodel = torch.compile(model, backend='neuron', mode=args.compile_mode)\n",
            "import torch\nmodel = torch.compile(model, backend='neuron')\n",
            unsafe_fixes=True,
        ),
        Invalid("import torch\nmodel = torch.compile(model, mode='max-autotune')\n", None, target="accelerator"),
        Invalid(
            """
            import torch

            model = torch.nn.Linear(4, 2).to('neuron')
            model = torch.compile(model, backend="neuron", mode="max-autotune")
            y = model(torch.randn(3, 4, device='neuron'))
            """,
            """
            import torch

            model = torch.nn.Linear(4, 2).to('neuron')
            model = torch.compile(model, backend="neuron")
            y = model(torch.randn(3, 4, device='neuron'))
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch
            model = torch.nn.Linear(4, 2).to('neuron')
            m = torch.compile(model, backend='neuron', mode='max-autotune-no-cudagraphs')
            y = m(torch.randn(3, 4, device='neuron'))
            """,
            """
            import torch
            model = torch.nn.Linear(4, 2).to('neuron')
            m = torch.compile(model, backend='neuron')
            y = m(torch.randn(3, 4, device='neuron'))
            """,
            runs=True,
        ),
    ]

    def check_compile(self, node: cst.Call) -> None:
        arg = arg_named(node, "mode")
        if arg is None or (isinstance(arg.value, cst.Name) and arg.value.value == "None"):
            return
        mode = string_value(arg.value)
        if mode == "default":
            return
        note = f": {MODE_NOTES[mode]}" if mode in MODE_NOTES else ""
        message = self.MESSAGE.format(mode=repr(mode) if mode is not None else "(from a variable)", note=note)
        if self.context.target != "neuron":
            self.report(node, message, effort="low")
            return
        self.report(node, message + "; remove it", replacement=remove_arg(node, arg),
                    safety="safe" if mode is not None else "unsafe")


class CompileInductorOptions(CompileCallRule):
    """Reports ``torch.compile(options={...})`` keys that only Inductor reads.

    ## What it does
    Lists the keys of a literal ``options=`` dictionary of ``torch.compile`` that the neuron backend
    does not read (everything but ``model_name`` and ``fallback_execution``), e.g. ``"triton.cudagraphs"``,
    ``"max_autotune"``, ``"epilogue_fusion"``, ``"shape_padding"``. Neuron target only.

    ## Why is this bad?
    The options are Inductor configuration; TorchNeuron does not use Inductor and reads only a few keys,
    so these settings silently do nothing on Trainium, and tuning done for a GPU does not carry over.

    ## Example
    ```python
    model = torch.compile(model, backend="neuron", options={"triton.cudagraphs": True})
    ```
    Use instead:
    ```python
    model = torch.compile(model, backend="neuron")
    ```

    ## Fix safety
    No automatic fix: the dictionary may also hold keys the neuron backend reads, and may be shared
    with GPU code paths.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html
      (``options``: "only a few keys are read internally")
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/how-to-optimize-with-torch-compile.html
    """

    CODE = "NP405"
    NAME = "compile-inductor-options"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = "torch.compile options {keys} configure Inductor and have no effect on Trainium"
    TARGETS = ("neuron",)

    VALID = [
        Valid('import torch\nm = torch.compile(m, backend="neuron", options={"model_name": "gpt"})\n'),
        Valid('import torch\nm = torch.compile(m, backend="neuron", options=compile_options)\n'),
    ]
    INVALID = [
        Invalid(
            'import torch\nm = torch.compile(m, backend="neuron", options={"triton.cudagraphs": True, '
            '"model_name": "gpt"})\n',
            None,
            message_contains="'triton.cudagraphs'",
        ),
        Invalid("import torch\nm = torch.compile(m, options=dict(max_autotune=True))\n", None),
    ]

    def check_compile(self, node: cst.Call) -> None:
        arg = arg_named(node, "options")
        if arg is None:
            return
        keys: list[Optional[str]] = []
        value = arg.value
        if isinstance(value, cst.Dict):
            for element in value.elements:
                keys.append(string_value(element.key) if isinstance(element, cst.DictElement) else None)
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
            keys.extend(a.keyword.value if a.keyword is not None else None for a in value.args)
        else:
            return
        inductor = [k for k in keys if k is not None and k not in NEURON_COMPILE_OPTIONS]
        if inductor:
            self.report(arg, self.MESSAGE.format(keys=", ".join(repr(k) for k in inductor)))
