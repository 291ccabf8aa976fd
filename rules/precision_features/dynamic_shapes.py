"""NP811: data-dependent output shapes (``nonzero``, ``unique``, boolean-mask indexing, ...) inside code
compiled with ``torch.compile``.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.compile.tables import COMPILE_FUNCS
from neuron_port.rules.helpers.names import source_of
from neuron_port.rules.spec import Invalid, PythonRule, Valid


DYNAMIC_METHODS = {
    "nonzero": "`nonzero()`",
    "argwhere": "`argwhere()`",
    "masked_select": "`masked_select()`",
    "unique": "`unique()`",
    "unique_consecutive": "`unique_consecutive()`",
}


def _is_mask_index(node: cst.BaseExpression) -> bool:
    """``x[x > 0]``, ``x[mask]``, ``x[self.pad_mask]``, ``x[~mask]``: a boolean mask index (heuristic)."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
        return _is_mask_index(node.expression)
    if isinstance(node, cst.Comparison):
        return True
    if isinstance(node, (cst.Name, cst.Attribute)):
        last = node.value if isinstance(node, cst.Name) else node.attr.value
        return "mask" in last.lower()
    return False


class CompiledDynamicShape(PythonRule):
    """Reports data-dependent output shapes inside code compiled with ``torch.compile``.

    ## What it does
    Inside functions decorated with ``@torch.compile`` (with or without arguments), functions passed to
    ``torch.compile(fn)`` in the same file, and the ``forward`` of classes compiled as
    ``torch.compile(Model(...))`` / ``m = Model(...); torch.compile(m)``, reports ``nonzero``,
    ``argwhere``, ``masked_select``, ``unique`` / ``unique_consecutive``, one-argument
    ``torch.where(cond)`` and boolean-mask indexing (``x[mask]``, ``x[x > 0]``; a heuristic: the index
    is a comparison or a name containing ``mask``). Masked assignment (``x[mask] = 0``) has a static
    shape and is not reported.

    ## Why is this bad?
    These ops produce a tensor whose size depends on the data. Under ``torch.compile`` that is a
    symbolic (dynamic) shape or a graph break; the neuron backend requires static shapes ("Dynamic
    shapes detected in the model, but torch-neuronx requires static shapes").

    ## Example
    ```python
    @torch.compile(backend="neuron")
    def loss_fn(logits, labels):
        valid = labels != -100
        return F.cross_entropy(logits[valid], labels[valid])
    ```
    Use instead (static shapes: weight or mask instead of selecting):
    ```python
    @torch.compile(backend="neuron")
    def loss_fn(logits, labels):
        return F.cross_entropy(logits, labels, ignore_index=-100)
    ```

    ## Fix safety
    No automatic fix: the static formulation (``torch.where``, ``masked_fill``, multiplying by a mask,
    ``ignore_index``) depends on what is done with the selection.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://docs.pytorch.org/docs/2.13/generated/torch.compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (dynamic shapes rejected)
    """

    CODE = "NP811"
    NAME = "compiled-dynamic-shape"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = (
        "{what} inside compiled `{where}` has a data-dependent shape (neuron compiles static shapes): use "
        "torch.where / masked_fill"
    )
    TRIGGERS = (r"\.[ \t]*(?:compile)\b(?<!\bre\.compile)", r"import\b[^\n]*\b(?:compile)\b", r"compile(?<=[\s(,]compile)\b[ \t]*(?:[,)\\]|as\b|\r?$)")

    VALID = [
        Valid("import torch\n@torch.compile\ndef f(x, mask):\n    return torch.where(mask, x, 0).sum()\n"),
        Valid("import torch\ndef f(x):\n    return x[x > 0]\n"),  # not compiled
        Valid("import torch\n@torch.compile\ndef f(x, mask):\n    x[mask] = 0\n    return x\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\n@torch.compile(backend='neuron')\ndef f(x, mask):\n    idx = x.nonzero()\n"
            "    return x[mask].sum() + idx.sum()\n",
            None,
            message_contains="static shapes",
        ),
        Invalid("import torch\ndef step(x):\n    return torch.unique(x)\nstep = torch.compile(step)\n", None),
        Invalid(
            "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x[x > 0]\n"
            "model = Net()\nmodel = torch.compile(model)\n",
            None,
            target="accelerator",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        # (kind, name, compiled-by-decorator) frames of the enclosing defs and classes
        self._frames: list[tuple[str, str, bool]] = []
        self._candidates: list[tuple[cst.CSTNode, str, tuple]] = []
        self._compiled_names: set[str] = set()
        self._compiled_classes: set[str] = set()
        self._instances: dict[str, str] = {}
        self._skip: set[cst.CSTNode] = set()

    def _is_compile(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Call):
            node = node.func
        return self.context.qualname(node) in COMPILE_FUNCS

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        compiled = any(self._is_compile(d.decorator) for d in node.decorators)
        self._frames.append(("def", node.name.value, compiled))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._frames.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._frames.append(("class", node.name.value, False))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._frames.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        if (len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                and isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name)):
            self._instances[node.targets[0].target.value] = node.value.func.value
        for target in node.targets:
            self._skip.add(target.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._skip.add(node.target)

    def _candidate(self, node: cst.CSTNode, what: str) -> None:
        if any(kind == "def" for kind, _, _ in self._frames):
            self._candidates.append((node, what, tuple(self._frames)))

    def visit_Call(self, node: cst.Call) -> None:
        if self._is_compile(node.func) and node.args and node.args[0].keyword is None:
            target = node.args[0].value
            if isinstance(target, cst.Name):
                self._compiled_names.add(target.value)
            elif isinstance(target, cst.Call) and isinstance(target.func, cst.Name):
                self._compiled_classes.add(target.func.value)
            return
        if not self._frames:
            return
        func = node.func
        qualname = self.context.qualname(func) or ""
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        name = qualname[len("torch."):] if qualname.startswith("torch.") else method
        if name in DYNAMIC_METHODS and (qualname.startswith("torch.") or method is not None):
            self._candidate(node, DYNAMIC_METHODS[name])
        elif qualname == "torch.where" and len(node.args) == 1:
            self._candidate(node, "one-argument `torch.where(cond)`")

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if node in self._skip or not self._frames:
            return
        for element in node.slice:
            if isinstance(element.slice, cst.Index) and _is_mask_index(element.slice.value):
                self._candidate(node, f"boolean-mask indexing `{source_of(node)}`")
                return

    def leave_Module(self, original_node: cst.Module) -> None:
        classes = set(self._compiled_classes)
        functions = set()
        for name in self._compiled_names:
            if name in self._instances:
                classes.add(self._instances[name])
            else:
                functions.add(name)
                classes.add(name)
        for node, what, frames in self._candidates:
            where = self._compiled_frame(frames, functions, classes)
            if where is not None:
                self.report(node, self.MESSAGE.format(what=what, where=where))

    @staticmethod
    def _compiled_frame(frames: tuple, functions: set[str], classes: set[str]) -> Optional[str]:
        for i, (kind, name, decorated) in enumerate(frames):
            if kind != "def":
                continue
            if decorated or (name in functions and (i == 0 or frames[i - 1][0] != "class")):
                return name
            if name == "forward" and i > 0 and frames[i - 1][0] == "class" and frames[i - 1][1] in classes:
                return f"{frames[i - 1][1]}.forward"
        return None
