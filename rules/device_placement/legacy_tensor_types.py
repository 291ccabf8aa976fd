"""NP105 ``legacy-cuda-tensor-type``: ``torch.cuda.FloatTensor`` and the other legacy typed-tensor classes
(constructors, ``x.type(...)``, references and ``Tensor.type()`` strings)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.device_placement.common import set_commas
from neuron_port.rules.device_placement.tables import LEGACY_CUDA_TENSOR_TYPES, LEGACY_CUDA_TYPE_STRINGS
from neuron_port.rules.helpers.calls import keyword_arg
from neuron_port.rules.helpers.nodes import expr, string_value
from neuron_port.rules.spec import FRAGMENT, Invalid, PythonRule, Valid


class LegacyCudaTensorType(PythonRule):
    """Rewrites or reports the legacy ``torch.cuda.FloatTensor`` / ``LongTensor`` / ... types.

    ## What it does
    Finds the legacy typed-tensor classes under ``torch.cuda``. Constructor calls whose arguments show
    what they mean are rewritten: sizes (integer literals, or no argument) become
    ``torch.empty(..., dtype=..., device="neuron")``, a list or tuple literal becomes
    ``torch.tensor(..., dtype=..., device="neuron")``, and ``x.type(torch.cuda.FloatTensor)`` becomes
    ``x.to(device="neuron", dtype=torch.float32)``. Every other use (``isinstance`` checks, a constructor
    called with a variable, aliases such as ``Tensor = torch.cuda.FloatTensor``, the type strings
    ``'torch.cuda.FloatTensor'``) is reported with advice.

    ## Why is this bad?
    The ``torch.cuda.*Tensor`` types only exist for CUDA; on Trainium constructing one raises and
    ``isinstance`` checks against them are always False.

    ## Example
    ```python
    mask = torch.cuda.LongTensor([0, 2])
    buf = torch.cuda.FloatTensor(16, 32)
    ```
    Use instead:
    ```python
    mask = torch.tensor([0, 2], dtype=torch.int64, device="neuron")
    buf = torch.empty(16, 32, dtype=torch.float32, device="neuron")
    ```

    ## Fix safety
    Safe for the rewritten forms (the legacy constructor allocates uninitialised memory like
    ``torch.empty``). A constructor called with a variable is ambiguous (sizes or data) and only reported.

    ## References
    - https://docs.pytorch.org/docs/stable/tensors.html (legacy constructors)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
    """

    CODE = "NP105"
    NAME = "legacy-cuda-tensor-type"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "`torch.cuda.{name}` does not exist on Trainium: {advice}"
    TRIGGERS = ('cuda',)

    VALID = [
        Valid("import torch\nx = torch.FloatTensor([1.0])\n"),
        Valid("import torch\nx = torch.tensor([1], dtype=torch.int64, device='neuron')\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nmask = torch.cuda.LongTensor([0, 2])\nbuf = torch.cuda.FloatTensor(16, 32)\n",
            'import torch\nmask = torch.tensor([0, 2], dtype=torch.int64, device="neuron")\n'
            'buf = torch.empty(16, 32, dtype=torch.float32, device="neuron")\n',
            runs=True,
        ),
        Invalid(
            "import torch as th\ny = x.type(th.cuda.HalfTensor)\n",
            'import torch as th\ny = x.to(device="neuron", dtype=th.float16)\n',
            not_runnable=FRAGMENT,
        ),
        Invalid("import torch\nok = isinstance(x, torch.cuda.FloatTensor)\n", None, message_contains="isinstance"),
        Invalid("from torch.cuda import LongTensor\nidx = LongTensor(indices)\n", None),
        Invalid("ok = x.type() == 'torch.cuda.FloatTensor'\n", None),
        Invalid(
            "import torch\nb = torch.cuda.ByteTensor(4)\n",
            "import torch\nb = torch.empty(4, dtype=torch.uint8, device=torch.accelerator.current_accelerator())\n",
            target="accelerator",
            runs=True,
        ),
        Invalid(
            """
            import torch
            empty = torch.cuda.FloatTensor()
            pair = torch.cuda.FloatTensor((2, 3))
            x = torch.ones(2)
            y = x.type(torch.cuda.HalfTensor)
            print(empty.shape, pair.sum(), y.dtype)
            """,
            """
            import torch
            empty = torch.empty(0, dtype=torch.float32, device="neuron")
            pair = torch.tensor((2, 3), dtype=torch.float32, device="neuron")
            x = torch.ones(2)
            y = x.to(device="neuron", dtype=torch.float16)
            print(empty.shape, pair.sum(), y.dtype)
            """,
            runs=True,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._handled: set[cst.CSTNode] = set()
        self._docstrings: set[cst.CSTNode] = set()

    def _type_name(self, node: cst.BaseExpression) -> Optional[str]:
        # a Name/Attribute chain that is a reference: qualname is None for anything else
        qualname = self.context.qualname(node)
        if qualname is None or not qualname.startswith("torch.cuda."):
            return None
        name = qualname[len("torch.cuda."):]
        return name if name in LEGACY_CUDA_TENSOR_TYPES else None

    def _device(self):
        torch_name, imports = self.context.torch_module_name()
        if self.context.target == "accelerator":
            return expr(f"{torch_name}.accelerator.current_accelerator()"), torch_name, imports
        return cst.SimpleString('"neuron"'), torch_name, imports

    def visit_Call(self, node: cst.Call) -> None:
        name = self._type_name(node.func)
        if name is not None:
            self._handled.add(node.func)
            self._constructor(node, name)
            return
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "type"
            and len(node.args) == 1
            and node.args[0].keyword is None
            and not node.args[0].star
        ):
            name = self._type_name(node.args[0].value)
            if name is None:
                return
            self._handled.add(node.args[0].value)
            device, torch_name, imports = self._device()
            dtype = expr(f"{torch_name}.{LEGACY_CUDA_TENSOR_TYPES[name]}")
            replacement = node.with_changes(
                func=func.with_changes(attr=cst.Name("to")),
                args=set_commas([keyword_arg("device", device), keyword_arg("dtype", dtype)],
                                cst.MaybeSentinel.DEFAULT),
            )
            self.report(
                node,
                self.MESSAGE.format(
                    name=name, advice=f"use `.to(device=..., dtype=torch.{LEGACY_CUDA_TENSOR_TYPES[name]})`"
                ),
                replacement=replacement,
                imports=imports,
            )

    def _constructor(self, node: cst.Call, name: str) -> None:
        dtype_name = LEGACY_CUDA_TENSOR_TYPES[name]
        args = node.args
        plain = all(a.keyword is None and not a.star for a in args)
        factory = None
        if plain and not args:
            factory, args = "empty", [cst.Arg(value=cst.Integer("0"))]
        elif plain and len(args) == 1 and isinstance(args[0].value, (cst.List, cst.Tuple)):
            factory = "tensor"
        elif plain and all(isinstance(a.value, cst.Integer) for a in args):
            factory = "empty"
        if factory is None:
            self.report(
                node,
                self.MESSAGE.format(
                    name=name,
                    advice=f"use `torch.tensor(data, dtype=torch.{dtype_name}, device=\"neuron\")` (or "
                    "`torch.empty` for sizes)",
                ),
            )
            return
        device, torch_name, imports = self._device()
        dtype = expr(f"{torch_name}.{dtype_name}")
        new_args = set_commas(
            [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]
            + [keyword_arg("dtype", dtype), keyword_arg("device", device)],
            cst.MaybeSentinel.DEFAULT,
        )
        replacement = node.with_changes(func=expr(f"{torch_name}.{factory}"), args=new_args)
        self.report(
            node,
            self.MESSAGE.format(name=name, advice=f"use `torch.{factory}(..., dtype=torch.{dtype_name}, device=...)`"),
            replacement=replacement,
            imports=imports,
        )

    def _reference(self, node: cst.BaseExpression) -> None:
        name = self._type_name(node)  # None for most names: asked before the set (a hash each)
        if name is None or node in self._handled:
            return
        dtype_name = LEGACY_CUDA_TENSOR_TYPES[name]
        self.report(
            node,
            self.MESSAGE.format(
                name=name,
                advice=f"for isinstance checks test `x.is_neuron and x.dtype == torch.{dtype_name}`",
            ),
        )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)

    def visit_Expr(self, node: cst.Expr) -> None:
        self._docstrings.add(node.value)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)  # asked before the sets: a node's hash is a Python call (LibCST's __hash__)
        if value in LEGACY_CUDA_TYPE_STRINGS and node not in self._docstrings:
            name = value.rsplit(".", 1)[1]
            self.report(
                node,
                self.MESSAGE.format(
                    name=name,
                    advice=f"`x.type()` never returns this string on Trainium; test "
                    f"`x.is_neuron and x.dtype == torch.{LEGACY_CUDA_TENSOR_TYPES[name]}`",
                ),
            )
