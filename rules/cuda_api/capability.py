"""NP210 ``cuda-capability-check``: compute-capability comparisons (``torch.cuda.get_device_capability()[0] >=
8``, ``torch.cuda.get_device_properties(d).major >= 8``) rewritten to what they mean on Trainium, and the
per-file analysis NP201 asks before it renames a capability read or the availability test guarding one.

``torch.neuron.get_device_properties(d)`` has ``name`` and ``total_memory`` (https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/neuron.py, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html; the simulator's ``neuron_backend/device/management.py`` returns the same two, plus ``logical_nc_config``, platform
and ``simulated``), and there is no ``get_device_capability``. So:

- a comparison whose meaning the code states is rewritten (``capability_checks().rewrites``): bf16
  (``torch.bfloat16`` in the branches it picks, ``use_bf16 = ...``) becomes
  ``torch.neuron.is_bf16_supported()`` (True on Trainium); flash-attn, TF32, FP8, Triton or xformers
  (named in the guarded code or the assigned name) become ``False`` (none of them exists there);
- any other read of a capability or of a property Trainium lacks (``.major``, ``.minor``,
  ``.multi_processor_count``) is *unresolved*: NP201 does not rename the ``get_device_properties`` call it
  comes from (``kept_properties``), nor the ``torch.cuda.is_available()`` test guarding it
  (``kept_guards``), so on Trainium the test is False and the CUDA call is never reached.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.names import dotted_name, int_value, source_of, walk
from neuron_port.rules.helpers.nodes import children, expr, string_value
from neuron_port.rules.helpers.ranks_guards import nodes_in, regions_where
from neuron_port.rules.helpers.per_file import PerFileAnalysis
from neuron_port.rules.helpers.scopes import Scopes
from neuron_port.rules.spec import Invalid, PythonRule, Valid

NEURON_PROPERTIES = frozenset({"name", "total_memory"})  # torch_neuronx/neuron.py of the TorchNeuron source (see NP206's references)
CAPABILITY = "torch.cuda.get_device_capability"
PROPERTIES = "torch.cuda.get_device_properties"
AVAILABLE = "torch.cuda.is_available"
CAPABILITY_CALLS = frozenset({CAPABILITY, PROPERTIES})  # without one of them there is nothing to decide
BF16_WORDS = re.compile(r"bf16|bfloat16")
ABSENT_WORDS = re.compile(r"flash|tf32|fp8|float8|triton|xformers")  # features Trainium does not have


def _words(node: Optional[cst.CSTNode]) -> set[str]:
    out: set[str] = set()
    if node is None:
        return out
    for child in walk(node):
        if isinstance(child, cst.Name):
            out.add(child.value.lower())
        elif isinstance(child, cst.SimpleString):
            out.add((string_value(child) or "").lower())
    return out


def _returns(function: cst.FunctionDef):
    """The ``return`` statements of ``function`` itself (not of functions or classes nested in it)."""
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Return):
            yield node
        elif not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(children(node))


class CapabilityChecks:
    """The capability reads of one module and what NP201 / NP210 do with them (module docstring)."""

    def __init__(self, context, module: cst.Module) -> None:
        self.module = module
        self.context = context
        self.rewrites: dict[cst.Comparison, tuple[cst.BaseExpression, str, tuple]] = {}
        self.rewritten: set[cst.CSTNode] = set()  # every node inside a rewritten comparison
        self.kept_properties: dict[cst.CSTNode, str] = {}  # get_device_properties reference -> attribute read
        self.kept_guards: dict[cst.CSTNode, str] = {}  # torch.cuda.is_available reference -> the read it guards
        words: dict[cst.Comparison, set[str]] = {}
        property_names: dict[object, list[cst.Call]] = {}
        attribute_reads: dict[object, set[str]] = {}
        calls: list[cst.Call] = []
        attributes: list[cst.Attribute] = []
        self._property_reads: set[cst.CSTNode] = set()
        for node in walk(module):
            if isinstance(node, cst.Call):
                calls.append(node)
            elif isinstance(node, cst.Attribute):
                attributes.append(node)
        if not any(self.context.qualname(c.func) in CAPABILITY_CALLS for c in calls):
            return  # nothing to decide (the common case: keep it one walk)
        # a read belongs to the value it is read from: `p.numel()` of another function's `p` is not a read
        # of this function's `p = torch.cuda.get_device_properties(i)` (helpers/scopes.py)
        self._scopes = Scopes(module)
        for node in attributes:
            base = self._holder_key(node.value)
            if base is not None:
                attribute_reads.setdefault(base, set()).add(node.attr.value)
        for node in walk(module):
            self._contexts(node, words, property_names)
        if context.target == "neuron":
            for comparison, found in words.items():
                self._rewrite(comparison, found)
        for call in calls:
            if self.context.qualname(call.func) != PROPERTIES or call in self.rewritten:
                continue
            names = [n for n, cs in property_names.items() if call in cs]
            attrs = {a for n in names for a in attribute_reads.get(n, ())} - NEURON_PROPERTIES
            if attrs:
                self.kept_properties[call.func] = sorted(attrs)[0]
        # `props.major` where `props = torch.cuda.get_device_properties(...)`: a read a guard must keep
        self._property_reads = {
            n for n in attributes if n.attr.value not in NEURON_PROPERTIES
            and self._holder_key(n.value) in property_names}
        for node in walk(module):
            if isinstance(node, cst.Attribute) and node.attr.value not in NEURON_PROPERTIES and \
                    isinstance(node.value, cst.Call) and self.context.qualname(node.value.func) == PROPERTIES \
                    and node not in self.rewritten:
                self.kept_properties[node.value.func] = node.attr.value
        self._guards(module)

    def _holder_key(self, node: cst.BaseExpression) -> object:
        """What a read or an assignment of ``node`` refers to: a plain name's binding (its scope and name),
        else the dotted name (``self.props``), else None."""
        if type(node) is cst.Name:
            return self._scopes.binder(node), node.value
        return dotted_name(node)

    # -- where a comparison sits, and what its surroundings say it means ------------------------------
    def _contexts(self, node: cst.CSTNode, words: dict, property_names: dict) -> None:
        def add(test: Optional[cst.CSTNode], said) -> None:
            """``said()`` (the words around the test) for each capability comparison in ``test``."""
            found = [c for c in walk(test) if isinstance(c, cst.Comparison) and self._capability_side(c) is not None] \
                if test is not None else []
            if found:
                text = said()
                for comparison in found:
                    words.setdefault(comparison, set()).update(text)

        if isinstance(node, cst.If):
            add(node.test, lambda: _words(node.body))
        elif isinstance(node, cst.IfExp):
            add(node.test, lambda: _words(node.body) | _words(node.orelse))
        elif isinstance(node, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            add(node.value, lambda: set().union(*(_words(t) for t in targets)))
            if isinstance(node.value, cst.Call) and self.context.qualname(node.value.func) == PROPERTIES:
                for target in targets:
                    name = self._holder_key(target)
                    if name is not None:
                        property_names.setdefault(name, []).append(node.value)
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            keyword = node.keyword
            add(node.value, lambda: {keyword.value.lower()})
        elif isinstance(node, cst.FunctionDef):
            name = node.name.value
            for returned in _returns(node):
                add(returned.value, lambda: {name.lower()})

    def _capability_side(self, comparison: cst.Comparison) -> Optional[bool]:
        """True when the capability is the left operand, False when the right, None if neither (or a
        chained comparison)."""
        if len(comparison.comparisons) != 1:
            return None
        if self._is_capability(comparison.left):
            return True
        if self._is_capability(comparison.comparisons[0].comparator):
            return False
        return None

    def _is_capability(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Subscript) and len(node.slice) == 1:
            index = node.slice[0].slice
            if isinstance(index, cst.Index) and int_value(index.value) in (0, 1):
                node = node.value
        if isinstance(node, cst.Call):
            return self.context.qualname(node.func) == CAPABILITY
        return (isinstance(node, cst.Attribute) and node.attr.value in ("major", "minor")
                and isinstance(node.value, cst.Call) and self.context.qualname(node.value.func) == PROPERTIES)

    def _rewrite(self, comparison: cst.Comparison, said: set[str]) -> None:
        left = self._capability_side(comparison)
        operator = comparison.comparisons[0].operator
        if left is None or not isinstance(operator, (cst.GreaterThan, cst.GreaterThanEqual, cst.LessThan,
                                                      cst.LessThanEqual)):
            return
        newer = isinstance(operator, (cst.GreaterThan, cst.GreaterThanEqual)) == left  # True on newer GPUs
        bf16 = any(BF16_WORDS.search(w) for w in said)
        absent = any(ABSENT_WORDS.search(w) for w in said)
        if bf16 == absent:
            return  # nothing said, or both: report only (NP202 / NP201)
        imports: tuple = ()
        if bf16:
            torch_name, imports = self.context.torch_module_name()
            call = f"{torch_name}.neuron.is_bf16_supported()"
            replacement, meaning = expr(call if newer else f"not {call}"), "bf16 (always on Trainium)"
        else:
            replacement = cst.Name("False" if newer else "True")
            meaning = "flash-attn / TF32 / FP8 / Triton (none on Trainium)"
        replacement = replacement.with_changes(lpar=comparison.lpar, rpar=comparison.rpar)
        self.rewrites[comparison] = (replacement, meaning, imports)
        self.rewritten.update(walk(comparison))

    # -- availability tests that must stay CUDA's ------------------------------------------------------
    def _unresolved(self, node: cst.CSTNode) -> Optional[str]:
        if node in self.rewritten:
            return None
        if isinstance(node, cst.Call) and self.context.qualname(node.func) == CAPABILITY:
            return source_of(node)
        if isinstance(node, (cst.Name, cst.Attribute)) and node in self.kept_properties:
            return f"{source_of(node)}(...).{self.kept_properties[node]}"
        if node in self._property_reads:
            return source_of(node)
        return None

    def _guards(self, module: cst.Module) -> None:
        def available(node: cst.BaseExpression) -> Optional[bool]:
            if isinstance(node, cst.Call) and not node.args and self.context.qualname(node.func) == AVAILABLE:
                return True
            return None

        for atom, region in regions_where(module, available):
            assert isinstance(atom, cst.Call)
            if atom.func in self.kept_guards:
                continue
            for node in nodes_in(region):
                read = self._unresolved(node)
                if read is not None:
                    self.kept_guards[atom.func] = read
                    break


# The capability analysis of a module, once per file and pass.
capability_checks = PerFileAnalysis(CapabilityChecks)


class CudaCapabilityCheck(PythonRule):
    """Rewrites compute-capability comparisons to what they mean on Trainium, where the code says it.

    ## What it does
    Finds comparisons of a CUDA compute capability: ``torch.cuda.get_device_capability()[0] >= 8``,
    ``torch.cuda.get_device_capability() >= (8, 0)``, ``torch.cuda.get_device_properties(d).major < 8``. When
    the surrounding code says what the check is for, it rewrites the comparison:

    - bf16 (the ternary picks ``torch.bfloat16``, the guarded block sets it, the assigned name, keyword or
      function says ``bf16`` / ``bfloat16``): ``torch.neuron.is_bf16_supported()`` (``not ...`` for ``< 8``);
    - flash-attn, TF32, FP8, Triton or xformers (named the same way): ``False`` (``True`` for ``< 8``), since
      Trainium has none of them (it runs SDPA on its own kernels and has no TF32 mode).

    Comparisons whose purpose is not stated, or that mention both, are left to NP202 (which reports
    ``get_device_capability``) and NP201 (which keeps ``get_device_properties(d).major`` and the
    ``torch.cuda.is_available()`` test that guards such a read as they are, so Trainium skips the check).

    ## Why is this bad?
    There is no compute capability on Trainium: ``torch.cuda.get_device_capability()`` raises there, and
    ``torch.neuron.get_device_properties(d)`` has ``name`` and ``total_memory`` only, so a renamed
    ``.major`` raises ``AttributeError: '_DeviceProperties' object has no attribute 'major'``.

    ## Example
    ```python
    dtype = torch.bfloat16 if torch.cuda.get_device_capability()[0] >= 8 else torch.float16
    use_flash = torch.cuda.get_device_properties(0).major >= 8
    ```
    Use instead:
    ```python
    dtype = torch.bfloat16 if torch.neuron.is_bf16_supported() else torch.float16
    use_flash = False
    ```

    ## Fix safety
    Safe: the rewrite is made only where the code names the feature, and it gives the answer Trainium has
    (``is_bf16_supported()`` is True; flash-attn, TF32, FP8 matmuls and Triton do not exist there); the
    original raised on Trainium. The neuron target only: with ``--target accelerator`` the CUDA check
    stays (NP201 keeps its availability guard).

    ## References
    - https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/neuron.py, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html (``get_device_properties``: ``name``, ``total_memory``;
      ``is_bf16_supported()`` is True); https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (bf16, FP8: no ``_scaled_mm``); https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html (flash-attention
      -> SDPA; TF32 flags have no documented effect)
    - https://docs.pytorch.org/docs/stable/generated/torch.cuda.get_device_capability.html
    """

    CODE = "NP210"
    NAME = "cuda-capability-check"
    SEVERITY = "error"
    FIX_AVAILABILITY = "always"
    EFFORT = "low"
    MESSAGE = "`{old}` reads a CUDA compute capability; it checks for {meaning}: use `{new}`"
    TARGETS = ("neuron",)
    TRIGGERS = ("get_device_capability", "get_device_properties")

    VALID = [
        Valid("import torch\nmem = torch.cuda.get_device_properties(0).total_memory\n"),
        Valid("import torch\nif torch.cuda.get_device_capability()[0] >= 8:\n    print('ampere')\n"),  # NP202
        Valid("import torch\nok = torch.cuda.get_device_capability() == (9, 0)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\ndtype = torch.bfloat16 if torch.cuda.get_device_capability()[0] >= 8 else torch.float16\n"
            "use_flash = torch.cuda.get_device_properties(0).major >= 8\n",
            "import torch\ndtype = torch.bfloat16 if torch.neuron.is_bf16_supported() else torch.float16\n"
            "use_flash = False\n",
            runs=True,
        ),
        Invalid(
            "import torch as th\nif th.cuda.is_available() and (8, 0) > th.cuda.get_device_capability():\n"
            "    th.backends.cuda.matmul.allow_tf32 = False\n",
            "import torch as th\nif th.cuda.is_available() and True:\n    th.backends.cuda.matmul.allow_tf32 = False\n",
            message_contains="flash-attn / TF32",
            runs=True,
        ),
        Invalid(
            "import torch\n\n\ndef supports_bf16():\n    return torch.cuda.get_device_capability()[0] >= 8\n",
            "import torch\n\n\ndef supports_bf16():\n    return torch.neuron.is_bf16_supported()\n",
            runs=True,
        ),
    ]

    def leave_Module(self, original_node: cst.Module) -> None:
        for comparison, (replacement, meaning, imports) in capability_checks(self.context, original_node).rewrites.items():
            self.report(comparison, self.MESSAGE.format(old=source_of(comparison), meaning=meaning,
                                                        new=source_of(replacement)),
                        replacement=replacement, imports=imports)
