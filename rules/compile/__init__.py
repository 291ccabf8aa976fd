"""NP4xx: ``torch.compile`` and CUDA-only backend flags.

- NP401-NP405 look at ``torch.compile(...)`` calls and decorators: the backend (added or renamed to
  ``"neuron"``), ``mode=`` (ignored by the neuron backend), ``dynamic=True`` and dynamic-shape settings
  (rejected), Inductor ``options=`` (ignored).
- NP406-NP408 report settings that have no effect on Trainium: ``torch._inductor.config`` tweaks, cuDNN
  / TF32 / cuBLAS flags and ``torch.set_float32_matmul_precision``, SDPA kernel-selection contexts. The
  fix for a setting statement is to remove it (unsafe: it changes what the program does on a GPU).
- NP409 reports CUDA graphs, which have no Trainium equivalent.

The names and advice are data in ``compile_tables.py``; facts in shared/torchneuron.md sections 3 and 7.
"""

from __future__ import annotations

from typing import Optional, Union

import libcst as cst

from neuron_port.rules.spec import Invalid, PythonRule, Valid
from neuron_port.rules.compile.tables import (
    COMPILE_FUNCS,
    CUDA_BACKENDS,
    CUDA_FLAG_ASSIGNMENTS,
    CUDA_FLAG_CALLS,
    CUDA_FLAG_CONTEXTS,
    CUDA_GRAPH_APIS,
    CUDA_GRAPH_KEYWORDS,
    DYNAMO_DYNAMIC_CONFIG,
    DYNAMO_OPTIMIZE,
    INDUCTOR_CONFIG,
    INDUCTOR_CUDA_GRAPH_KEYS,
    MARK_DYNAMIC,
    MODE_NOTES,
    NEURON_COMPILE_OPTIONS,
    SDPA_CONTEXTS,
)
from neuron_port.rules.helpers.calls import arg_named, insert_arg, keyword_arg, quote_of, remove_arg
from neuron_port.rules.helpers.nodes import replace_string, string_value
from neuron_port.rules.helpers.statements import has_comment_above, statement_without

# --------------------------------------------------------------------------------------------------
# Shared matching
# --------------------------------------------------------------------------------------------------


def _is_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


class _CompileCallRule(PythonRule):
    """Visits ``torch.compile(...)`` calls (also as decorators) and hands them to ``check_compile``."""

    TRIGGERS = ("compile",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node.func) in COMPILE_FUNCS:
            self.check_compile(node)

    def check_compile(self, node: cst.Call) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class _StatementRule(PythonRule):
    """Reports setting statements (``x.y = v`` / ``f(...)`` lines) and offers to remove them.

    Subclasses implement ``match(small) -> message | None``. The removal is reported on the statement
    line, so a comment at the end of the line goes with it; a line with comment lines of its own above
    it is reported without a fix, so no comment is ever lost.
    """

    REMOVABLE_TARGETS = ("neuron",)  # on the accelerator target the setting still matters on GPUs

    def match(self, small: cst.BaseSmallStatement) -> Optional[str]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _statement(self, owner: Union[cst.SimpleStatementLine, cst.SimpleStatementSuite]) -> None:
        for small in owner.body:
            message = self.match(small)
            if message is None:
                continue
            node: cst.CSTNode = owner if len(owner.body) == 1 else small
            if self.context.target not in self.REMOVABLE_TARGETS:
                self.report(node, message, effort="low")
            elif isinstance(owner, cst.SimpleStatementLine) and has_comment_above(owner):
                self.report(node, message + " (not removed automatically: the line has a comment above it)",
                            effort="low")
            else:
                self.report(owner, message, replacement=statement_without(owner, small))  # type: ignore[arg-type]
                return  # one removal per line and pass; the engine's next pass finds the others

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statement(node)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._statement(node)

    # helpers for match()
    def assigned(self, small: cst.BaseSmallStatement) -> Optional[tuple[str, cst.BaseExpression]]:
        """(qualified target, value) of ``a.b.c = value`` with one attribute target."""
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            if isinstance(target, (cst.Attribute, cst.Name)):
                qualname = self.context.qualname(target)
                if qualname is not None:
                    return qualname, small.value
        return None

    def called(self, small: cst.BaseSmallStatement) -> Optional[tuple[str, cst.Call]]:
        """(qualified function, call) of a statement that is just a call."""
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            qualname = self.context.qualname(small.value.func)
            if qualname is not None:
                return qualname, small.value
        return None


# --------------------------------------------------------------------------------------------------
# torch.compile
# --------------------------------------------------------------------------------------------------


class CompileMissingBackend(_CompileCallRule):
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
    - shared/torchneuron.md sections 3.2 and 7 item 5
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
        ),
        Invalid(
            "import torch\n\n@torch.compile\ndef step(x):\n    return x\n",
            'import torch\n\n@torch.compile(backend="neuron")\ndef step(x):\n    return x\n',
        ),
        Invalid(
            "import torch as th\n\n@th.compile(fullgraph=True)\ndef step(x):\n    return x\n",
            'import torch as th\n\n@th.compile(fullgraph=True, backend="neuron")\ndef step(x):\n    return x\n',
        ),
        Invalid(
            "from torch import compile\nmodel = compile(\n    model,\n    fullgraph=True,\n)\n",
            'from torch import compile\nmodel = compile(\n    model,\n    fullgraph=True,\n    backend="neuron",\n)\n',
        ),
        Invalid(
            "import torch\nmodel = torch.compile(model, mode='reduce-overhead')\n",
            "import torch\nmodel = torch.compile(model, mode='reduce-overhead', backend='neuron')\n",
        ),
    ]

    def check_compile(self, node: cst.Call) -> None:
        if arg_named(node, "backend") is not None or any(a.star == "**" for a in node.args):
            return
        quote = quote_of(node)
        replacement = insert_arg(node, len(node.args), keyword_arg("backend", cst.SimpleString(f"{quote}neuron{quote}")))
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
    - shared/torchneuron.md section 3.1
    """

    CODE = "NP402"
    NAME = "compile-cuda-backend"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    MESSAGE = "torch.compile backend {backend!r} cannot compile for Trainium ({why}): use backend=\"neuron\""
    TRIGGERS = ("compile", "optimize")

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
        ),
        Invalid(
            "import torch\n\n@torch.compile(backend='cudagraphs')\ndef f(x):\n    return x\n",
            "import torch\n\n@torch.compile(backend='neuron')\ndef f(x):\n    return x\n",
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
        ),
        Invalid(
            'import torch\nmodel = torch.compile(model, backend="inductor", mode="max-autotune")\n',
            'import torch\nmodel = torch.compile(model, mode="max-autotune")\n',
            target="accelerator",
        ),
        Invalid('import torch\nmodel = torch.compile(model, backend="cudagraphs")\n', None, target="accelerator"),
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
                                  "drop it, the default is Inductor on a GPU and neuron on Trainium",
                            replacement=remove_arg(node, arg))
            else:
                self.report(arg.value, message + " on Trainium", effort="low")
            return
        self.report(arg.value, message, replacement=replace_string(arg.value, "neuron"), safety=info.safety)


class CompileMode(_CompileCallRule):
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
    - shared/torchneuron.md section 3.2
    """

    CODE = "NP403"
    NAME = "compile-mode"
    SEVERITY = "info"
    FIX_AVAILABILITY = "sometimes"
    MESSAGE = "torch.compile mode {mode} has no effect on Trainium (the neuron backend warns and uses the default mode{note})"

    VALID = [
        Valid('import torch\nmodel = torch.compile(model, backend="neuron")\n'),
        Valid('import torch\nmodel = torch.compile(model, backend="neuron", mode="default")\n'),
        Valid("import torch\nmodel = torch.compile(model, backend='neuron', mode=None)\n"),
    ]
    INVALID = [
        Invalid(
            'import torch\nmodel = torch.compile(model, backend="neuron", mode="max-autotune")\n',
            'import torch\nmodel = torch.compile(model, backend="neuron")\n',
        ),
        Invalid(
            "import torch\nmodel = torch.compile(\n    model,\n    mode='max-autotune-no-cudagraphs',\n"
            "    backend='neuron',\n)\n",
            "import torch\nmodel = torch.compile(\n    model,\n    backend='neuron',\n)\n",
        ),
        Invalid(
            "import torch\n\n@torch.compile(backend='neuron', mode='reduce-overhead')\ndef f(x):\n    return x\n",
            "import torch\n\n@torch.compile(backend='neuron')\ndef f(x):\n    return x\n",
            message_contains="CUDA graphs",
        ),
        Invalid("import torch\nmodel = torch.compile(model, backend='neuron', mode=args.compile_mode)\n", None),
        Invalid(
            "import torch\nmodel = torch.compile(model, backend='neuron', mode=args.compile_mode)\n",
            "import torch\nmodel = torch.compile(model, backend='neuron')\n",
            unsafe_fixes=True,
        ),
        Invalid("import torch\nmodel = torch.compile(model, mode='max-autotune')\n", None, target="accelerator"),
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


class CompileDynamicShapes(_StatementRule):
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
    - shared/torchneuron.md sections 3.2 and 3.3
    """

    CODE = "NP404"
    NAME = "compile-dynamic-shapes"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "medium"
    MESSAGE = (
        "dynamic shapes are rejected by the neuron torch.compile backend (static shapes only): pass "
        "`dynamic=False` and pad inputs to a few fixed sizes (buckets)"
    )
    TRIGGERS = ("dynamic", "assume_static_by_default")

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
            if arg is None or not _is_true(arg.value):
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
        if not ((wanted and _is_true(value)) or (not wanted and _is_false(value))):
            return None
        return (f"`{qualname}` = {wanted} turns dynamic shapes on, which the neuron torch.compile backend "
                "rejects (static shapes only): remove it and pad inputs to fixed sizes")


DYNAMIC_CONFIG_MATCH = frozenset(DYNAMO_DYNAMIC_CONFIG)


class CompileInductorOptions(_CompileCallRule):
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
    - shared/torchneuron.md section 3.2
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


# --------------------------------------------------------------------------------------------------
# Settings without effect on Trainium
# --------------------------------------------------------------------------------------------------


class InductorConfig(_StatementRule):
    """Reports ``torch._inductor.config`` tweaks, which have no effect with the neuron backend.

    ## What it does
    Finds assignments to ``torch._inductor.config.<setting>`` (any import spelling, e.g.
    ``import torch._inductor.config as inductor_config``) and calls such as
    ``torch._inductor.config.update(...)``, and offers to remove the statement;
    ``torch._inductor.config.patch(...)`` contexts and decorators are reported only. Neuron target only:
    on the accelerator target the settings still tune the GPU path.

    ## Why is this bad?
    TorchNeuron's ``torch.compile`` backend lowers to StableHLO and neuronx-cc and never runs
    TorchInductor, so these settings (coordinate-descent tuning, Triton CUDA graphs, fx graph cache,
    epilogue fusion, ...) do nothing on Trainium; they only suggest a tuning that is not happening.

    ## Example
    ```python
    torch._inductor.config.coordinate_descent_tuning = True
    model = torch.compile(model, backend="neuron")
    ```
    Use instead:
    ```python
    model = torch.compile(model, backend="neuron")
    ```

    ## Fix safety
    Unsafe: removing a statement is harmless on Trainium, but the file may still be run on a GPU, and a
    setting may be read back later in the program. A statement with a comment line above it is reported
    without a fix, so no comment is lost.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/about-torch-compile.html
      ("does not use TorchInductor")
    - shared/torchneuron.md section 3.1
    """

    CODE = "NP406"
    NAME = "inductor-config"
    SEVERITY = "info"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "low"
    MESSAGE = "`{name}` configures TorchInductor, which the neuron backend does not use: it has no effect on Trainium{note}"
    TRIGGERS = ("_inductor",)
    TARGETS = ("neuron",)

    VALID = [
        Valid("import torch\ntorch._dynamo.config.cache_size_limit = 64\n"),
        Valid("import torch\nprint(torch._inductor.config.max_autotune)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport torch._inductor.config\n\nmodel = Net()\ntorch._inductor.config.coordinate_descent_tuning = True\n"
            "model = torch.compile(model)\n",
            "import torch\nimport torch._inductor.config\n\nmodel = Net()\nmodel = torch.compile(model)\n",
            unsafe_fixes=True,
        ),
        Invalid("import torch\ntorch._inductor.config.coordinate_descent_tuning = True\n", None),
        Invalid(
            "import torch._inductor.config as inductor_config\n"
            "inductor_config.triton.cudagraphs = False; inductor_config.fx_graph_cache = True\n",
            "import torch._inductor.config as inductor_config\n",
            unsafe_fixes=True,
            message_contains="CUDA graphs",
        ),
        Invalid(
            "from torch._inductor import config\nif fast:\n    config.max_autotune = True\n",
            "from torch._inductor import config\nif fast:\n    pass\n",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch\n\n# tuning for H100\ntorch._inductor.config.max_autotune = True\n",
            None,
            unsafe_fixes=True,
            message_contains="comment",
        ),
        Invalid("import torch\nwith torch._inductor.config.patch(max_autotune=True):\n    pass\n", None),
    ]

    def _message(self, qualname: str) -> str:
        key = qualname[len(INDUCTOR_CONFIG) + 1:]
        note = " (CUDA graphs have no Trainium equivalent)" if key in INDUCTOR_CUDA_GRAPH_KEYS else ""
        return self.MESSAGE.format(name=qualname, note=note)

    def match(self, small: cst.BaseSmallStatement) -> Optional[str]:
        assigned = self.assigned(small)
        if assigned is not None and assigned[0].startswith(INDUCTOR_CONFIG + "."):
            return self._message(assigned[0])
        called = self.called(small)
        if called is not None and called[0].startswith(INDUCTOR_CONFIG + ".") and not called[0].endswith(".patch"):
            return self._message(called[0])
        return None

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node.func) == INDUCTOR_CONFIG + ".patch":
            self.report(node, self._message(INDUCTOR_CONFIG + ".patch") + "; drop the context", effort="low")


class CudaBackendFlag(_StatementRule):
    """Reports cuDNN, TF32 and cuBLAS settings, which have no effect on Trainium.

    ## What it does
    Finds assignments to ``torch.backends.cudnn.benchmark`` / ``deterministic`` / ``allow_tf32`` /
    ``enabled``, ``torch.backends.cuda.matmul.allow_tf32`` and the other cuBLAS/cuDNN precision flags,
    and statement calls of ``torch.set_float32_matmul_precision(...)`` and
    ``torch.backends.cuda.enable_flash_sdp(...)`` & co., and offers to remove the statement.
    ``with torch.backends.cudnn.flags(...)`` blocks are reported only. Neuron target only: on the
    accelerator target the flags still matter on GPUs.

    ## Why is this bad?
    They configure NVIDIA libraries (cuDNN autotuning, TF32 tensor-core math, cuBLAS reductions, the
    CUDA SDPA kernel choice). Trainium has none of them: neuron kernels come from the Neuron compiler and
    follow the tensor dtypes, and no Neuron documentation gives these flags a meaning (not confirmed
    either way). Left in place they suggest a speed-up or a determinism that is not there; for
    reproducibility use ``torch.use_deterministic_algorithms(True)``.

    ## Example
    ```python
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    ```
    Use instead: nothing (delete the lines); use bf16 autocast for fast matmuls.

    ## Fix safety
    Unsafe: removing the statements is harmless on Trainium but changes speed or determinism if the
    file still runs on a GPU, and a flag may be read back later. A statement with a comment line above
    it is reported without a fix, so no comment is lost.

    ## References
    - shared/torchneuron.md section 7 ("treat as no-ops to remove"; Neuron docs silent)
    - https://docs.pytorch.org/docs/stable/backends.html
    """

    CODE = "NP407"
    NAME = "cuda-backend-flag"
    SEVERITY = "info"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "low"
    MESSAGE = "`{name}` has no effect on Trainium: {why}"
    TRIGGERS = ("backends", "float32_matmul_precision")
    TARGETS = ("neuron",)

    VALID = [
        Valid("import torch\ntorch.use_deterministic_algorithms(True)\n"),
        Valid("import torch\nif torch.backends.cudnn.is_available():\n    pass\n"),
        Valid("import torch\nold = torch.backends.cudnn.benchmark\n"),
    ]
    INVALID = [
        Invalid("import torch\ntorch.backends.cudnn.benchmark = True\n", None),
        Invalid(
            "import torch\n\ntorch.backends.cudnn.benchmark = True  # faster convs\n"
            "torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True\n"
            "torch.set_float32_matmul_precision('high')\n\nmodel = Net()\n",
            "import torch\n\nmodel = Net()\n",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch\ntorch.backends.cudnn.deterministic = True\n",
            "import torch\n",
            unsafe_fixes=True,
            message_contains="use_deterministic_algorithms",
        ),
        Invalid(
            "from torch.backends import cudnn\nif args.benchmark: cudnn.benchmark = True\n",
            "from torch.backends import cudnn\nif args.benchmark: pass\n",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch as th\nth.backends.cuda.enable_flash_sdp(True)\n",
            "import torch as th\n",
            unsafe_fixes=True,
        ),
        Invalid("import torch\nwith torch.backends.cudnn.flags(enabled=False):\n    y = f(x)\n", None),
    ]

    def match(self, small: cst.BaseSmallStatement) -> Optional[str]:
        assigned = self.assigned(small)
        if assigned is not None and assigned[0] in CUDA_FLAG_ASSIGNMENTS:
            return self.MESSAGE.format(name=assigned[0], why=CUDA_FLAG_ASSIGNMENTS[assigned[0]])
        called = self.called(small)
        if called is not None and called[0] in CUDA_FLAG_CALLS:
            return self.MESSAGE.format(name=called[0], why=CUDA_FLAG_CALLS[called[0]])
        return None

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in CUDA_FLAG_CONTEXTS:
            self.report(node, self.MESSAGE.format(name=qualname, why=CUDA_FLAG_CONTEXTS[qualname]) +
                        "; the `with` can go", effort="low")


class SdpaKernelContext(PythonRule):
    """Reports SDPA kernel-selection contexts, which have no effect on Trainium.

    ## What it does
    Reports ``with torch.backends.cuda.sdp_kernel(...)`` (deprecated) and
    ``with torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION)`` (and their decorator or call
    uses). Neuron target only.

    ## Why is this bad?
    These contexts choose among the CUDA implementations of ``scaled_dot_product_attention`` (flash,
    memory-efficient, cuDNN, math). On Trainium, SDPA dispatches to its own NKI flash-attention path
    and ignores the selection, so the context has no effect (``sdp_kernel`` only adds a
    FutureWarning). Code that forces the math backend for a numerical reason should be re-checked on
    Trainium.

    ## Example
    ```python
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ```
    Use instead:
    ```python
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ```

    ## Fix safety
    No automatic fix: removing a ``with`` means dedenting its body, and the context still matters when
    the file runs on a GPU.

    ## References
    - shared/torchneuron.md section 7 (sdp_kernel benign on Neuron; SDPA -> NKI flash backend)
    - https://docs.pytorch.org/docs/stable/generated/torch.nn.attention.sdpa_kernel.html
    """

    CODE = "NP408"
    NAME = "sdpa-kernel-context"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = (
        "`{name}` selects a CUDA attention kernel and has no effect on Trainium: scaled_dot_product_attention "
        "picks its NKI flash-attention path itself; the context can go"
    )
    TRIGGERS = ("sdp_kernel", "sdpa_kernel")
    TARGETS = ("neuron",)

    VALID = [
        Valid("import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)\n"),
        Valid("from torch.nn.attention import sdpa_kernel, SDPBackend\n"),
    ]
    INVALID = [
        Invalid(
            "from torch.nn.attention import sdpa_kernel, SDPBackend\n"
            "with sdpa_kernel(SDPBackend.FLASH_ATTENTION):\n    y = attn(q, k, v)\n",
            None,
        ),
        Invalid(
            "import torch\nwith torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False):\n"
            "    y = attn(q, k, v)\n",
            None,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in SDPA_CONTEXTS:
            self.report(node, self.MESSAGE.format(name=qualname))


class CudaGraphs(PythonRule):
    """Reports CUDA graphs, which have no Trainium equivalent.

    ## What it does
    Reports ``torch.cuda.CUDAGraph``, ``torch.cuda.graph(...)`` capture contexts,
    ``torch.cuda.make_graphed_callables``, ``torch.cuda.graph_pool_handle``,
    ``torch.cuda.is_current_stream_capturing`` (any import spelling, also via ``torch.cuda.graphs``),
    and ``use_cuda_graph=True``-style keyword arguments of library calls, each with advice and an effort
    level. ``torch.compile(mode="reduce-overhead")`` and the ``"cudagraphs"`` backend are reported by
    NP403 and NP402.

    ## Why is this bad?
    CUDA graphs capture a sequence of GPU kernel launches and replay it to save launch overhead. There
    is no capture/replay API on Trainium ("Not in the initial release"); the code raises on a Trainium
    host. The nearest equivalent is whole-graph compilation with ``torch.compile(backend="neuron")``,
    which removes per-op launch overhead by compiling the step into one NEFF.

    ## Example
    ```python
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = model(static_in)
    g.replay()
    ```
    Use instead:
    ```python
    step = torch.compile(model, backend="neuron", fullgraph=True)
    out = step(x)
    ```

    ## Fix safety
    No automatic fix: capture code keeps static buffers, warm-up streams and replay calls whose
    removal restructures the program.

    ## References
    - shared/torchneuron.md section 3.1 (no CUDA-graph equivalent) and section 7
    - https://docs.pytorch.org/docs/stable/notes/cuda.html#cuda-graphs
    """

    CODE = "NP409"
    NAME = "cuda-graphs"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "CUDA graphs have no Trainium equivalent (`{name}`): {advice}"
    TRIGGERS = ("CUDAGraph", "graph(", "graphed_callables", "graph_pool", "capturing", "cuda_graph",
                "cudagraphs")

    VALID = [
        Valid("import torch\nstep = torch.compile(model, backend='neuron', fullgraph=True)\n"),
        Valid("from torch.cuda import graphs\n"),
        Valid("build(use_cuda_graph=False)\n"),
    ]
    INVALID = [
        Invalid("import torch\ng = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    out = model(x)\n", None),
        Invalid("from torch.cuda import make_graphed_callables\nmodel = make_graphed_callables(model, (x,))\n",
                None, message_contains="make_graphed_callables"),
        Invalid("import torch as th\ng = th.cuda.graphs.CUDAGraph()\n", None),
        Invalid("engine = build_engine(model, use_cuda_graph=True)\n", None, message_contains="use_cuda_graph"),
        Invalid("import torch\ng = torch.cuda.CUDAGraph()\n", None, target="accelerator"),
    ]

    def _check(self, node: cst.BaseExpression, last: str) -> None:
        # cheap test first: the last name of the chain must be a table entry (or a local alias of one)
        if (last not in CUDA_GRAPH_APIS and last not in self.context.aliases) or not self.context.is_reference(node):
            return
        qualname = self.context.qualname(node)
        if qualname is None or not qualname.startswith("torch.cuda."):
            return
        key = qualname[len("torch.cuda."):]
        if key.startswith("graphs."):
            key = key[len("graphs."):]
        if key in CUDA_GRAPH_APIS:
            advice, effort = CUDA_GRAPH_APIS[key]
            self.report(node, self.MESSAGE.format(name=qualname, advice=advice), effort=effort)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._check(node, node.attr.value)

    def visit_Name(self, node: cst.Name) -> None:
        self._check(node, node.value)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value in CUDA_GRAPH_KEYWORDS and _is_true(node.value):
            self.report(node, self.MESSAGE.format(
                name=f"{node.keyword.value}=True",
                advice="set it to False on Trainium (compile the step with torch.compile(backend=\"neuron\") "
                       "for the same launch-overhead saving)"), effort="low")
