"""NP401 ``compile-missing-backend`` (``torch.compile`` without a backend gets ``backend="neuron"``) and
NP402 ``compile-cuda-backend`` (GPU-only backends such as ``"inductor"`` become ``"neuron"``)."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.compile.common import CompileCallRule
from neuron_port.rules.compile.tables import COMPILE_FUNCS, CUDA_BACKENDS, DYNAMO_OPTIMIZE
from neuron_port.rules.helpers.calls import arg_named, insert_arg, keyword_arg, quote_of, remove_arg
from neuron_port.rules.helpers.nodes import replace_string, string_value
from neuron_port.rules.spec import FRAGMENT, Invalid, PythonRule, Valid


class CompileMissingBackend(CompileCallRule):
    """Makes the neuron backend of ``torch.compile`` explicit.

    ## What it does
    Adds ``backend="neuron"`` to ``torch.compile(model)``, ``torch.compile(fn, mode=...)``,
    ``@torch.compile(...)`` and bare ``@torch.compile`` when no backend is given. Calls that pass
    ``**kwargs`` (the backend may be in them) are left alone. Neuron target only: on the accelerator
    target the default is right on both devices.

    ## Why is this bad?
    Without a backend ``torch.compile`` uses TorchInductor on a GPU; TorchNeuron auto-selects its own
    ``"neuron"`` backend when running on a Neuron device, so the code works, but which compiler runs
    depends on where the code happens to run. The Neuron migration guide says to add
    ``backend="neuron"``; ``fullgraph=True`` is also recommended on the neuron path.

    ## Example
    ```python
    model = torch.compile(model)
    ```
    Use instead:
    ```python
    model = torch.compile(model, backend="neuron")
    ```

    ## Fix safety
    Safe: on Trainium the neuron backend is what runs either way.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/how-to-optimize-with-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
    """

    CODE = "NP401"
    NAME = "compile-missing-backend"
    SEVERITY = "info"
    FIX_AVAILABILITY = "always"
    MESSAGE = (
        'torch.compile without a backend: TorchNeuron picks "neuron" on a Neuron device, '
        'make it explicit with `backend="neuron"`'
    )
    TARGETS = ("neuron",)

    VALID = [
        Valid('import torch\nmodel = torch.compile(model, backend="neuron")\n'),
        Valid("import torch\nmodel = torch.compile(model, backend=args.backend)\n"),
        Valid("import torch\nmodel = torch.compile(model, **compile_kwargs)\n"),
        Valid("import re\npattern = re.compile(r'cuda:\\d+')\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nmodel = torch.compile(model)\n",
            'import torch\nmodel = torch.compile(model, backend="neuron")\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\n\n@torch.compile\ndef step(x):\n    return x\n",
            'import torch\n\n@torch.compile(backend="neuron")\ndef step(x):\n    return x\n',
            runs=True,
        ),
        Invalid(
            "import torch as th\n\n@th.compile(fullgraph=True)\ndef step(x):\n    return x\n",
            'import torch as th\n\n@th.compile(fullgraph=True, backend="neuron")\ndef step(x):\n    return x\n',
            runs=True,
        ),
        Invalid(
            "from torch import compile\nmodel = compile(\n    model,\n    fullgraph=True,\n)\n",
            'from torch import compile\nmodel = compile(\n    model,\n    fullgraph=True,\n    backend="neuron",\n)\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\nmodel = torch.compile(model, mode='reduce-overhead')\n",
            "import torch\nmodel = torch.compile(model, mode='reduce-overhead', backend='neuron')\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            """
            import torch

            model = torch.nn.Linear(4, 2).to('neuron')
            model = torch.compile(model)
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
            model = torch.compile(model, mode='reduce-overhead')
            y = model(torch.randn(3, 4, device='neuron'))
            """,
            """
            import torch

            model = torch.nn.Linear(4, 2).to('neuron')
            model = torch.compile(model, mode='reduce-overhead', backend='neuron')
            y = model(torch.randn(3, 4, device='neuron'))
            """,
            runs=True,
        ),
    ]

    def check_compile(self, node: cst.Call) -> None:
        if arg_named(node, "backend") is not None or any(a.star == "**" for a in node.args):
            return
        quote = quote_of(node)
        replacement = insert_arg(node, len(node.args),
                                 keyword_arg("backend", cst.SimpleString(f"{quote}neuron{quote}")))
        self.report(node, replacement=replacement)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        target = node.decorator
        if isinstance(target, (cst.Name, cst.Attribute)) and self.context.qualname(target) in COMPILE_FUNCS:
            call = cst.Call(func=target, args=[keyword_arg("backend", cst.SimpleString('"neuron"'))])
            self.report(target, replacement=call)


class CompileCudaBackend(PythonRule):
    """Replaces GPU-only ``torch.compile`` backends with ``"neuron"``.

    ## What it does
    Finds ``torch.compile(..., backend="inductor")`` and other GPU-only string backends
    (``"cudagraphs"``, ``"tensorrt"``, ``"onnxrt"``, ``"tvm"``; also the first argument of the older
    ``torch._dynamo.optimize("inductor")``) and renames the backend to ``"neuron"``. Device-agnostic
    debugging backends (``"eager"``, ``"aot_eager"``...) and backends held in variables are left alone.
    With ``--target accelerator``, ``backend="inductor"`` is removed instead (the default is Inductor on
    a GPU and the neuron backend on Trainium); the others are reported.

    ## Why is this bad?
    TorchNeuron compiles through StableHLO and neuronx-cc and does not use TorchInductor; Inductor,
    CUDA graphs and TensorRT cannot generate code for neuron tensors, so compilation fails.

    ## Example
    ```python
    model = torch.compile(model, backend="inductor")
    ```
    Use instead:
    ```python
    model = torch.compile(model, backend="neuron")
    ```

    ## Fix safety
    Safe for ``"inductor"`` and ``"cudagraphs"`` (GPU-only code generators). Unsafe for the other
    listed backends: they are third-party compilers whose ``options=`` the neuron backend ignores, so
    the result should be reviewed.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/about-torch-compile.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/about-torch-compile.html
    """

    CODE = "NP402"
    NAME = "compile-cuda-backend"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    MESSAGE = "torch.compile backend {backend!r} cannot compile for Trainium ({why}): use backend=\"neuron\""
    TRIGGERS = (r"\.[ \t]*(?:compile)\b(?<!\bre\.compile)", r"import\b[^\n]*\b(?:compile)\b", r"compile(?<=[\s(,]compile)\b[ \t]*(?:[,)\\]|as\b|\r?$)", r"\.[ \t]*(?:optimize)\b", r"import\b[^\n]*\b(?:optimize)\b", r"optimize(?<=[\s(,]optimize)\b[ \t]*(?:[,)\\]|as\b|\r?$)")

    VALID = [
        Valid('import torch\nmodel = torch.compile(model, backend="neuron")\n'),
        Valid('import torch\nmodel = torch.compile(model, backend="aot_eager")\n'),
        Valid("import torch\nmodel = torch.compile(model, backend=my_backend)\n"),
        Valid("import torch\nmodel = torch.compile(model)\n", target="accelerator"),
    ]
    INVALID = [
        Invalid(
            'import torch\nmodel = torch.compile(model, backend="inductor", fullgraph=True)\n',
            'import torch\nmodel = torch.compile(model, backend="neuron", fullgraph=True)\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\n\n@torch.compile(backend='cudagraphs')\ndef f(x):\n    return x\n",
            "import torch\n\n@torch.compile(backend='neuron')\ndef f(x):\n    return x\n",
            runs=True,
        ),
        Invalid("import torch\nm = torch.compile(m, backend='tensorrt')\n", None, message_contains="TensorRT"),
        Invalid(
            "import torch\nm = torch.compile(m, backend='tensorrt')\n",
            "import torch\nm = torch.compile(m, backend='neuron')\n",
            unsafe_fixes=True,
        ),
        Invalid(
            'import torch._dynamo\nopt = torch._dynamo.optimize("inductor")(model)\n',
            'import torch._dynamo\nopt = torch._dynamo.optimize("neuron")(model)\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            'import torch\nmodel = torch.compile(model, backend="inductor", mode="max-autotune")\n',
            'import torch\nmodel = torch.compile(model, mode="max-autotune")\n',
            target="accelerator",
            not_runnable=FRAGMENT,
        ),
        Invalid('import torch\nmodel = torch.compile(model, backend="cudagraphs")\n', None, target="accelerator"),
        Invalid(
            """
            import torch

            model = torch.nn.Linear(4, 2).to('neuron')
            model = torch.compile(model, backend="inductor", fullgraph=True)
            y = model(torch.randn(3, 4, device='neuron'))
            """,
            """
            import torch

            model = torch.nn.Linear(4, 2).to('neuron')
            model = torch.compile(model, backend="neuron", fullgraph=True)
            y = model(torch.randn(3, 4, device='neuron'))
            """,
            runs=True,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in COMPILE_FUNCS:
            arg = arg_named(node, "backend")
        elif qualname in DYNAMO_OPTIMIZE:
            arg = arg_named(node, "backend", 0)
        else:
            return
        if arg is None or not isinstance(arg.value, cst.SimpleString):
            return
        backend = string_value(arg.value)
        if backend not in CUDA_BACKENDS:
            return
        info = CUDA_BACKENDS[backend]
        message = self.MESSAGE.format(backend=backend, why=info.why)
        if self.context.target == "accelerator":
            if info.default and qualname in COMPILE_FUNCS:
                self.report(node, f"torch.compile backend {backend!r} cannot compile for Trainium ({info.why}): "
                                  "drop it (the default suits each device)",
                            replacement=remove_arg(node, arg))
            else:
                self.report(arg.value, message + " on Trainium", effort="low")
            return
        self.report(arg.value, message, replacement=replace_string(arg.value, "neuron"), safety=info.safety)
