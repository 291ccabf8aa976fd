"""NP105 ``legacy-cuda-tensor-type``: ``torch.cuda.FloatTensor`` and the other legacy typed-tensor classes
(constructors, ``x.type(...)``, references and ``Tensor.type()`` strings)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.device_placement.common import set_commas
from neuron_port.rules.device_placement.legacy_aliases import constructor_kind, device_choice, legacy_aliases
from neuron_port.rules.device_placement.tables import LEGACY_CUDA_TENSOR_TYPES, LEGACY_CUDA_TYPE_STRINGS
from neuron_port.rules.helpers.calls import keyword_arg
from neuron_port.rules.helpers.nodes import expr, string_value
from neuron_port.rules.spec import FRAGMENT, Invalid, PythonRule, Valid


# what a constructor's arguments become (legacy_aliases.constructor_kind)
_ADVICE = {
    "sizes": "torch.empty(..., dtype=torch.{dtype}, device=...)",
    "sequence": "torch.tensor(..., dtype=torch.{dtype}, device=...)",
    "numpy": "torch.{name}(...).to(device)",
}


class LegacyCudaTensorType(PythonRule):
    """Rewrites or reports the legacy ``torch.cuda.FloatTensor`` / ``LongTensor`` / ... types.

    ## What it does
    Finds the legacy typed-tensor classes under ``torch.cuda``. A legacy class is a dtype and a device in
    one name, so each use is rewritten to what it means there: a constructor from sizes (integer literals,
    ``x.size(0)``, ``x.shape[0]``, ``len(...)``, two or more arguments, no argument) becomes
    ``torch.empty(..., dtype=..., device="neuron")``; from a list or tuple literal,
    ``torch.tensor(..., dtype=..., device="neuron")``; from a NumPy value (``np.random.normal(...)``, or a
    name only ever assigned one), the CPU class of the same dtype then ``.to(device)`` (the CPU class reads a
    NumPy value exactly as the CUDA one: an array as data, a NumPy integer as a size); and
    ``x.type(torch.cuda.FloatTensor)`` becomes ``x.to(device="neuron", dtype=torch.float32)``.

    An alias is a device choice: ``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`` (both
    arms the same dtype; ``torch.Tensor`` counts as float32 unless the file changes the default dtype) has
    each use rewritten with the alias's choice, ``device="neuron" if cuda else "cpu"``, and the alias line
    goes; an unconditional ``Tensor = torch.cuda.FloatTensor`` chooses the device alone. The alias is one
    decision with its flag (``cuda = torch.cuda.is_available()``): they are ported together or kept
    together. It is kept whole, every use reported, when one use has no portable spelling
    (``isinstance(x, Tensor)``, a constructor from a name that may hold a tensor, the alias passed on),
    when the flag is assigned more than once or means another value where the alias is used, or when the
    flag is kept for another reason. Every other use (``isinstance`` checks, a constructor called with a
    name, the type strings ``'torch.cuda.FloatTensor'``) is reported with advice.

    ## Why is this bad?
    The ``torch.cuda.*Tensor`` types only exist for CUDA; on Trainium constructing one raises and
    ``isinstance`` checks against them are always False. There is no ``torch.neuron.FloatTensor``.

    ## Example
    ```python
    mask = torch.cuda.LongTensor([0, 2])
    buf = torch.cuda.FloatTensor(16, 32)
    cuda = torch.cuda.is_available()
    Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
    valid = Tensor(imgs.shape[0], 1).fill_(1.0)
    z = Tensor(np.random.normal(0, 1, (imgs.shape[0], 100)))
    real = imgs.type(Tensor)
    ```
    Use instead:
    ```python
    mask = torch.tensor([0, 2], dtype=torch.int64, device="neuron")
    buf = torch.empty(16, 32, dtype=torch.float32, device="neuron")
    cuda = torch.neuron.is_available()
    valid = torch.empty(imgs.shape[0], 1, dtype=torch.float32, device="neuron" if cuda else "cpu").fill_(1.0)
    z = torch.FloatTensor(np.random.normal(0, 1, (imgs.shape[0], 100))).to("neuron" if cuda else "cpu")
    real = imgs.to(device="neuron" if cuda else "cpu", dtype=torch.float32)
    ```

    ## Fix safety
    Safe for the rewritten forms (the legacy constructor allocates uninitialised memory like
    ``torch.empty``). A constructor called with a name that may hold a tensor is ambiguous (sizes, data,
    or a tensor of the device) and only reported. A module-level alias imported by another file
    (``from train import Tensor``) is removed all the same: that file is reported on its own.

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
            """
            import numpy as np
            import torch
            cuda = torch.cuda.is_available()
            Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
            LongTensor = torch.cuda.LongTensor if cuda else torch.LongTensor
            valid = Tensor(4, 1).fill_(1.0)
            z = Tensor(np.random.normal(0, 1, (4, 8)))
            labels = np.random.randint(0, 3, 4)
            x = torch.ones(4, 8, dtype=torch.float64).type(Tensor)
            print(valid.sum().item(), (z + x).shape, LongTensor(labels).dtype)
            """,
            """
            import numpy as np
            import torch
            cuda = torch.cuda.is_available()
            valid = torch.empty(4, 1, dtype=torch.float32, device="neuron" if cuda else "cpu").fill_(1.0)
            z = torch.FloatTensor(np.random.normal(0, 1, (4, 8))).to("neuron" if cuda else "cpu")
            labels = np.random.randint(0, 3, 4)
            x = torch.ones(4, 8, dtype=torch.float64).to(device="neuron" if cuda else "cpu", dtype=torch.float32)
            print(valid.sum().item(), (z + x).shape, torch.LongTensor(labels).to("neuron" if cuda else "cpu").dtype)
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch
            LongTensor = torch.cuda.LongTensor
            idx = LongTensor([0, 2])
            print(idx.device)
            """,
            """
            import torch
            idx = torch.tensor([0, 2], dtype=torch.int64, device="neuron")
            print(idx.device)
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch
            cuda = torch.cuda.is_available()
            Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
            x = Tensor(2, 3)
            ok = isinstance(x, Tensor)
            """,
            None,
            message_contains="no portable meaning",
        ),
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
        self._references: list[tuple[cst.CSTNode, str]] = []  # reported at the module's end (aliases first)

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
            return f"{torch_name}.accelerator.current_accelerator()", torch_name, imports
        return '"neuron"', torch_name, imports

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
            self.report(
                node,
                self.MESSAGE.format(
                    name=name, advice=f"use `.to(device=..., dtype=torch.{LEGACY_CUDA_TENSOR_TYPES[name]})`"
                ),
                replacement=self._conversion(node, name, device, torch_name),
                imports=imports,
            )

    def _conversion(self, node: cst.Call, name: str, device: str, torch_name: str) -> cst.Call:
        """``x.type(T)`` -> ``x.to(device=..., dtype=...)``."""
        dtype = expr(f"{torch_name}.{LEGACY_CUDA_TENSOR_TYPES[name]}")
        return node.with_changes(
            func=node.func.with_changes(attr=cst.Name("to")),
            args=set_commas([keyword_arg("device", expr(device)), keyword_arg("dtype", dtype)],
                            cst.MaybeSentinel.DEFAULT),
        )

    def _construction(self, node: cst.Call, kind: str, name: str, device: str, torch_name: str) -> cst.Call:
        """The portable spelling of a legacy constructor whose arguments mean ``kind`` (legacy_aliases.py)."""
        args = node.args
        if kind == "numpy":  # the CPU class reads a NumPy value as the CUDA one does, then the move
            cpu = node.with_changes(func=expr(f"{torch_name}.{name}"))
            return cst.Call(func=cst.Attribute(value=cpu, attr=cst.Name("to")), args=[cst.Arg(value=expr(device))])
        if not args:
            args = [cst.Arg(value=cst.Integer("0"))]
        dtype = expr(f"{torch_name}.{LEGACY_CUDA_TENSOR_TYPES[name]}")
        new_args = set_commas(
            [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]
            + [keyword_arg("dtype", dtype), keyword_arg("device", expr(device))],
            cst.MaybeSentinel.DEFAULT,
        )
        factory = "tensor" if kind == "sequence" else "empty"
        return node.with_changes(func=expr(f"{torch_name}.{factory}"), args=new_args)

    def _constructor(self, node: cst.Call, name: str) -> None:
        dtype_name = LEGACY_CUDA_TENSOR_TYPES[name]
        kind = constructor_kind(self.context, node)
        if kind is None:
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
        replacement = self._construction(node, kind, name, device, torch_name)
        self.report(
            node,
            self.MESSAGE.format(name=name, advice=f"use `{_ADVICE[kind].format(dtype=dtype_name, name=name)}`"),
            replacement=replacement,
            imports=imports,
        )

    def _reference(self, node: cst.BaseExpression) -> None:
        name = self._type_name(node)  # None for most names: asked before the set (a hash each)
        if name is None or node in self._handled:
            return
        self._references.append((node, name))

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._references:
            return
        taken: set[cst.CSTNode] = set()
        for alias in legacy_aliases(self.context, original_node).aliases:
            taken.update(alias.members())
            self._alias(alias)
        for node, name in self._references:
            if node in taken:
                continue
            dtype_name = LEGACY_CUDA_TENSOR_TYPES[name]
            self.report(
                node,
                self.MESSAGE.format(
                    name=name,
                    advice=f"for isinstance checks test `x.is_neuron and x.dtype == torch.{dtype_name}`",
                ),
            )

    def _alias(self, alias) -> None:
        """An alias and its uses: all ported (the alias line goes), or all reported (legacy_aliases.py)."""
        name, dtype_name = alias.type_name, alias.dtype
        if alias.why_kept is not None:
            self.report(alias.cuda_type, self.MESSAGE.format(
                name=name, advice=f"`{alias.name}` is kept: {alias.why_kept}; port its uses by hand"))
            for site in alias.sites:
                advice = (f"`{alias.name}` here has no portable meaning; use dtype torch.{dtype_name} and a device"
                          if site.kind == "other" else f"`{alias.name}` is kept with its other uses")
                self.report(site.node, self.MESSAGE.format(name=name, advice=advice))
            return
        device, torch_name, imports = self._device()
        choice = device_choice(alias, device)
        self.report(alias.line, self.MESSAGE.format(
            name=name, advice=f"alias `{alias.name}` removed; each use names torch.{dtype_name} and the device"),
            replacement=cst.RemovalSentinel.REMOVE)
        for site in alias.sites:
            if site.kind == "type":
                replacement = self._conversion(site.node, name, choice, torch_name)
                advice = f"use `.to(device=..., dtype=torch.{dtype_name})`"
            else:
                replacement = self._construction(site.node, site.kind, name, choice, torch_name)
                advice = f"use `{_ADVICE[site.kind].format(dtype=dtype_name, name=name)}`"
            message = f"`torch.cuda.{name}` (as `{alias.name}`) does not exist on Trainium: {advice}"
            self.report(site.node, message, replacement=replacement, imports=imports)

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
