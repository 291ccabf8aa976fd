"""NP306 ``cuda-amp-import``: imports of ``torch.cuda.amp`` names (``autocast``, ``GradScaler``,
``custom_fwd``, ``custom_bwd``, the ``amp`` module) left behind once NP301/NP303/NP305 have ported their
uses to ``torch.autocast`` / ``torch.amp``: removed, or pointed at ``torch.amp``, keeping version-guarded
``try``/``if`` imports valid."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.names import walk
from neuron_port.rules.helpers.statements import has_comment_above
from neuron_port.rules.mixed_precision.amp_import_decisions import (
    covering_fixes,
    decide,
    import_edits,
    is_amp_binding,
)
from neuron_port.rules.mixed_precision.amp_import_messages import import_message, skip_note
from neuron_port.rules.mixed_precision.import_groups import (
    Binding,
    bindings_of,
    edit_group,
    edit_line,
    elif_nodes,
    group_blocks,
)
from neuron_port.rules.spec import Invalid, PythonRule, Valid

_ORDER = {None: 0, "safe": 0, "unsafe": 1}


class CudaAmpImport(PythonRule):
    """Removes ``torch.cuda.amp`` imports left behind by the ported calls, or points them at ``torch.amp``.

    ## What it does
    Finds imports of ``torch.cuda.amp`` names (``from torch.cuda.amp import GradScaler, autocast``,
    ``from torch.cuda import amp``, ``import torch.cuda.amp as amp``), at module level, inside
    functions and in version-guarded imports (``try: from torch.amp import GradScaler`` / ``except
    ImportError: from torch.cuda.amp import GradScaler``, ``if version >= ...: ... else: ...``), and
    makes them match what the code uses after the rewrite:

    - a name whose every use NP301, NP303 or NP305 rewrites in the same run (they spell the new calls
      ``torch.autocast(device_type="neuron", ...)``, ``torch.amp.GradScaler("neuron", ...)``,
      ``torch.amp.custom_fwd(device_type="neuron")``) is removed from its import, and the import with
      it when nothing else is left; a guarded group whose names are all unused goes whole;
    - a name still used in a guarded group that also imports the ``torch.amp`` one (the rewritten calls
      use that one) is imported from ``torch.amp`` in every branch, and a group whose branches then
      import the same is collapsed to that one import;
    - a ``GradScaler`` used only in type annotations is imported from ``torch.amp`` (the CUDA class is
      a subclass of it);
    - a name still used where no rule could port it (``ctx = autocast if amp else nullcontext``) is
      reported; its uses are reported by NP301/NP303/NP305.

    A name never used in the file is removed too; at module level that fix is unsafe (another module
    may import the name from this one), and a name listed in ``__all__`` is only reported.

    ## Why is this bad?
    ``torch.cuda.amp`` is deprecated and bound to the CUDA device type. Once the calls are ported, an
    import left pointing at it is dead code that suggests the file still does CUDA mixed precision,
    and in a guarded import it keeps a branch that binds the name to a class with another signature
    (``torch.cuda.amp.GradScaler(init_scale)`` vs ``torch.amp.GradScaler(device, init_scale)``).

    ## Example
    ```python
    from torch.cuda.amp import GradScaler, autocast
    scaler = GradScaler()
    with autocast(dtype=torch.bfloat16):
        loss = model(x)
    ```
    After NP301 and NP303, NP306 removes the import:
    ```python
    import torch
    scaler = torch.amp.GradScaler("neuron")
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## Fix safety
    Safe when the rewrites of every use are applied in the same run (the fix takes the safety of
    those rewrites: unsafe on the accelerator target). Removing a name that was never used is unsafe at
    module level. Pointing an import at ``torch.amp`` is safe where it is done: in a guarded group the
    other branch already imports the ``torch.amp`` name, and annotations accept the subclass.

    Reported without a fix: an import with a comment line above it (no comment is lost; comments inside
    a guarded group that goes whole or is collapsed, such as ``except ImportError:  # PyTorch < 2.3``,
    describe the guard and go with it), every import in a file with a ``# neuron-port: ignore`` comment
    (a suppressed rewrite would leave a use behind) and in notebooks (later cells may use the name).

    ## References
    - https://docs.pytorch.org/docs/stable/amp.html (``torch.cuda.amp`` is deprecated in favour of ``torch.amp``)
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py and https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html
    """

    CODE = "NP306"
    NAME = "cuda-amp-import"
    SEVERITY = "info"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "`{import_}` (deprecated `torch.cuda.amp`): {what}"
    TRIGGERS = ("cuda.amp", "cuda import")

    VALID = [
        Valid("from torch.amp import GradScaler\nscaler = GradScaler('neuron')\n"),
        Valid("import torch.cuda.amp\nimport torch\n"),  # binds `torch`, not the amp module
        Valid("from torch.cuda import synchronize\nsynchronize()\n"),
    ]
    INVALID = [
        Invalid(
            "from torch.cuda.amp import GradScaler\nimport torch\nscaler = torch.amp.GradScaler('neuron')\n",
            "import torch\nscaler = torch.amp.GradScaler('neuron')\n",
            unsafe_fixes=True,
            message_contains="another module",
        ),
        Invalid(
            "import torch\n\n\ndef train(model, x):\n    from torch.cuda.amp import autocast\n"
            "    with torch.autocast('neuron', dtype=torch.bfloat16):\n        return model(x)\n",
            "import torch\n\n\ndef train(model, x):\n"
            "    with torch.autocast('neuron', dtype=torch.bfloat16):\n        return model(x)\n",
            runs=True,
        ),
        Invalid(
            "try:\n    from torch.amp import GradScaler\nexcept ImportError:\n    from torch.cuda.amp import GradScaler\n"
            "import torch\nscaler = torch.amp.GradScaler('neuron')\n",
            "import torch\nscaler = torch.amp.GradScaler('neuron')\n",
            unsafe_fixes=True,
        ),
        Invalid(
            "if TORCH_2_3:\n    from torch.amp import GradScaler\nelse:\n    from torch.cuda.amp import GradScaler\n"
            "scaler = GradScaler('neuron')\n",
            "from torch.amp import GradScaler\nscaler = GradScaler('neuron')\n",
            runs=True,
        ),
        Invalid(
            "from torch.cuda.amp import GradScaler\n\n\ndef save(scaler: GradScaler):\n    return scaler.state_dict()\n",
            "from torch.amp import GradScaler\n\n\ndef save(scaler: GradScaler):\n    return scaler.state_dict()\n",
            message_contains="annotations",
            runs=True,
        ),
        Invalid("from torch.cuda.amp import autocast\nctx = autocast if use_amp else nullcontext\n", None,
                message_contains="still used"),
        Invalid("from torch.cuda.amp import autocast\n__all__ = ['autocast']\n", None, message_contains="__all__"),
        Invalid(
            """
            import torch


            def make_scaler():
                from torch.cuda.amp import GradScaler


            make_scaler()
            """,
            """
            import torch


            def make_scaler():
                pass


            make_scaler()
            """,
            runs=True,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._active = False
        self._skip = False  # notebooks, files with suppression comments: report without fixes
        self._watch: set[str] = set()
        self._uses: dict[str, list[cst.Name]] = {}
        self._annotation_uses: set[cst.Name] = set()
        self._exported: set[str] = set()
        self._bindings: list[Binding] = []
        self._groups: dict[cst.SimpleStatementLine, cst.CSTNode] = {}
        self._elifs: set[cst.If] = set()
        self._line: Optional[cst.SimpleStatementLine] = None
        self._scopes: list[str] = []
        self._annotation_depth = 0
        self._sole: set[cst.CSTNode] = set()  # statements alone in their block: removed, they leave `pass`

    # -- collection ------------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        nodes = list(walk(node))
        found = [b for small in nodes if isinstance(small, (cst.Import, cst.ImportFrom)) for b in bindings_of(small)]
        self._watch = {local for local, qualname, _ in found if is_amp_binding(qualname)}
        self._active = bool(self._watch)
        if not self._active:
            return
        # the names bound in a guarded group with an amp import: the whole group may go
        for group in nodes:
            if isinstance(group, (cst.Try, cst.If)) and group_blocks(group):
                bound = [b for small in walk(group) if isinstance(small, (cst.Import, cst.ImportFrom))
                         for b in bindings_of(small)]
                if any(is_amp_binding(qualname) for _, qualname, _ in bound):
                    self._watch.update(local for local, _, _ in bound)
        self._skip = self.context.path.endswith(".ipynb") or "neuron-port:" in (
            self.context.code if self.context.code is not None else node.code)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append("function")

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scopes.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._scopes.append("class")

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()

    def visit_Annotation(self, node: cst.Annotation) -> None:
        self._annotation_depth += 1

    def leave_Annotation(self, original_node: cst.Annotation) -> None:
        self._annotation_depth -= 1

    def visit_Try(self, node: cst.Try) -> None:
        self._group(node)

    def visit_If(self, node: cst.If) -> None:
        if node not in self._elifs:
            self._elifs.update(elif_nodes(node))
            self._group(node)

    def _group(self, node) -> None:
        if not self._active:
            return
        blocks = group_blocks(node)
        for block in blocks or ():
            for line in block.body:
                self._groups[line] = node  # type: ignore[index]

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if len(node.body) == 1:
            self._sole.add(node.body[0])

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._line = node

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        self._line = None

    def visit_Import(self, node: cst.Import) -> None:
        self._binding(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._binding(node)

    def _binding(self, node) -> None:
        if not self._active or self._line is None:
            return
        scope = self._scopes[-1] if self._scopes else "module"
        for local, qualname, alias in bindings_of(node):
            if isinstance(node, cst.Import) and "." in qualname and local == qualname.split(".")[0]:
                continue  # `import torch.cuda.amp` binds torch
            self._bindings.append(Binding(local, qualname, self._line, node, alias, scope,
                                          self._groups.get(self._line)))  # type: ignore[arg-type]

    def visit_Name(self, node: cst.Name) -> None:
        if self._active and node.value in self._watch and self.context.is_reference(node):
            self._uses.setdefault(node.value, []).append(node)
            if self._annotation_depth:
                self._annotation_uses.add(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._active and not self._scopes and any(
                isinstance(t.target, cst.Name) and t.target.value == "__all__" for t in node.targets):
            self._exported.update(_strings(node.value))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._active and not self._scopes and isinstance(node.target, cst.Name) and node.target.value == "__all__":
            self._exported.update(_strings(node.value))

    # -- decisions -------------------------------------------------------------------------------
    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._active or not self._bindings:
            return
        covering = covering_fixes(self._uses, self.context.violations, type(self), self._skip)
        for binding in self._bindings:
            decide(binding, self._uses.get(binding.local, []), covering, self._exported, self._annotation_uses,
                   self._bindings)
        by_line: dict[cst.SimpleStatementLine, list[Binding]] = {}
        for binding in self._bindings:
            by_line.setdefault(binding.line, []).append(binding)
        done: set = set()
        for binding in self._bindings:
            if not is_amp_binding(binding.qualname):
                continue
            owner = binding.group if binding.group is not None else binding.line
            if owner in done:
                continue
            done.add(owner)
            if binding.group is not None:
                members = [b for b in self._bindings if b.group is binding.group]
                self._report_group(binding.group, members, by_line)
            else:
                self._report_line(binding.line, by_line[binding.line])

    # -- reports ---------------------------------------------------------------------------------
    def _report_line(self, line: cst.SimpleStatementLine, bindings: list[Binding]) -> None:
        mine = [b for b in bindings if is_amp_binding(b.qualname)]
        removed, repoint = import_edits(bindings)
        message = import_message(self.MESSAGE, line, mine, repoint)
        changes = [b for b in mine if b.alias in removed or b.small in repoint]
        if not changes or self._skip:
            self.report(line, message + skip_note(self._skip, self.context.path))
            return
        if has_comment_above(line):
            self.report(line, message + " (not changed: a comment above)")
            return
        safety = max((b.safety for b in changes), key=_ORDER.__getitem__) or "safe"
        self.report(line, message, replacement=self._or_pass(line, edit_line(line, removed, repoint)), safety=safety)

    def _report_group(self, group, members: list[Binding], by_line) -> None:
        mine = [b for b in members if is_amp_binding(b.qualname)]
        removed, repoint = import_edits(members)
        every_unused = all(b.action == "remove" for b in members)
        message = import_message(self.MESSAGE, mine[0].line, mine, repoint,
                                 guarded="whole" if every_unused else "kept")
        changes = members if every_unused else [b for b in mine if b.alias in removed or b.small in repoint]
        if not changes or self._skip:
            self.report(group, message + skip_note(self._skip, self.context.path))
            return
        if any(line.comment is not None for line in group.leading_lines):
            self.report(group, message + " (not changed: a comment above)")
            return
        if every_unused:
            all_removed = {b.alias for b in members}
            edits = {line: edit_line(line, all_removed, {}) for line in {b.line for b in members}}
        else:
            edits = {line: edit_line(line, removed, repoint) for line in {b.line for b in mine}}
        safety = max((b.safety for b in changes), key=_ORDER.__getitem__) or "safe"
        self.report(group, message, replacement=self._or_pass(group, edit_group(group, edits, every_unused)),
                    safety=safety)

    def _or_pass(self, node, replacement):
        """A statement alone in its block is replaced by ``pass`` rather than removed."""
        if isinstance(replacement, cst.RemovalSentinel) and node in self._sole:
            return cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=node.leading_lines)
        return replacement


def _strings(node: cst.BaseExpression) -> set[str]:
    out = set()
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        for element in node.elements:
            if isinstance(element.value, cst.SimpleString):
                value = element.value.evaluated_value
                if isinstance(value, str):
                    out.add(value)
    return out

