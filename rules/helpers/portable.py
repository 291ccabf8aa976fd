"""What is known to run on ``neuron``: the allow list a fix that flips a device test is checked against.

A fix that changes which branch a device test takes on Trainium (``x.is_cuda`` -> ``x.is_neuron``,
``device.type == "cuda"`` -> ``"neuron"``, ``torch.cuda.is_available()`` -> ``torch.neuron.is_available()``)
is safe only when everything the test decides is known to run there. ``Portability.first_unportable``
answers that for a region of code: ``None`` when every statement and expression in it is on the allow
list, else the source of the first thing that is not (so a finding can name it).

On the allow list:

- literals, containers, comprehensions, operators, f-strings, reads of local names and attributes
  (``x.shape``, ``args.steps``), assignments of such values, ``return`` / ``pass`` / ``break`` / ``del``
  and the compound statements made of them;
- calls of ``torch`` APIs the simulated device implements: the top-level tensor functions and dtypes
  (``torch.zeros``, ``torch.float32``; not ``torch._private`` or the float8 dtypes), ``torch.nn``,
  ``torch.optim``, autocast and ``torch.amp``, ``torch.autograd``, ``torch.distributed``, the data
  loader, ``torch.linalg`` / ``fft`` / ``special``, ``torch.neuron`` / ``torch.accelerator``, the
  ``torch.backends`` flags, and ``torch.cuda`` APIs NP201 renames (synchronisation, memory statistics,
  seeding, streams and events);
- the Python builtins that compute (``print``, ``len``, ``isinstance``...), the standard-library
  modules of pure computation, logging and warnings, and numpy;
- methods that PyTorch's tensors, modules, optimizers, streams and Python's own containers have
  (``x.pin_memory()``, ``model.eval()``, ``loss.backward()``, ``logger.info(...)``);
- functions, methods and classes of the same file whose bodies are portable, and names the file
  assigns only portable values (``model = nn.Linear(4, 2)`` ... ``model(x)``).

Not on it, whatever else it is: a string that names a CUDA or CPU build or provider of another library
(``"CUDAExecutionProvider"``, ``"onnxruntime-gpu"``, ``"tensorflow-cpu"``: the test chooses a capability, not a
device), an import, a call of anything else (another package, a parameter, a
kernel launch ``kernel[grid](...)``), a name or attribute the file sets to ``None`` somewhere (it may be
``None`` where CUDA is absent: ``self.cuda_config``), and a ``raise``, ``assert``, warning, log or
``print`` whose text, or an assignment whose target field (not a plain name), names a CUDA-only feature
(CUDA, GPU, FP8, quantization, Triton, flash-attn...): that code is about a feature Trainium lacks.

Code that a flip stops running on Trainium (``first_unportable(region, leaving=True)``: the ``else`` of
``if torch.cuda.is_available():``) is judged for what its messages say about the path it keeps the program
out of: ``raise ValueError("FP8 needs the GPU")`` says that path is FP8's, while ``raise
NotImplementedError("CUDA was not found")`` names only the device the port replaces.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.names import dotted_name, is_none, source_of, walk
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.helpers.ranks_guards import TORCH_CHECKS

# words that say a piece of code is about a feature Trainium does not have
CUDA_FEATURE_WORDS = re.compile(
    r"cuda|gpu|nvidia|fp8|float8|int8|int4|quantiz|bitsandbytes|bnb|triton|flash|xformers|cutlass|tensorrt|apex",
    re.IGNORECASE)
# the same, less the words that name the device itself (what the port replaces), not a feature of it
FEATURE_ONLY_WORDS = re.compile(
    r"fp8|float8|int8|int4|quantiz|bitsandbytes|bnb|triton|flash|xformers|cutlass|tensorrt|apex", re.IGNORECASE)

# torch namespaces the simulated device runs (see the module docstring)
PORTABLE_TORCH = ("torch.nn", "torch.optim", "torch.amp", "torch.autocast", "torch.autograd", "torch.neuron",
                  "torch.accelerator", "torch.distributed", "torch.utils.data", "torch.utils.checkpoint",
                  "torch.linalg", "torch.fft", "torch.special", "torch.random", "torch.backends", "torch.profiler",
                  "torch.testing", "torch.nested", "torch.func", "torch.compiler", "torch.jit")
PORTABLE_MODULES = frozenset({
    "math", "time", "logging", "warnings", "os", "sys", "random", "functools", "itertools", "collections",
    "contextlib", "dataclasses", "typing", "json", "re", "copy", "gc", "numpy", "pathlib", "datetime",
    "statistics", "operator", "string", "enum", "abc", "argparse", "pickle", "shutil", "tempfile", "traceback",
})
PORTABLE_BUILTINS = frozenset({
    "print", "len", "range", "min", "max", "abs", "int", "float", "bool", "str", "bytes", "isinstance",
    "issubclass", "hasattr", "getattr", "setattr", "list", "dict", "tuple", "set", "frozenset", "sorted",
    "reversed", "enumerate", "zip", "sum", "round", "any", "all", "iter", "next", "repr", "format", "id",
    "type", "super", "divmod", "pow", "map", "filter", "callable", "hash", "vars", "object", "slice", "open",
})
# methods of torch.Tensor, nn.Module, optimizers, GradScaler, streams and events, and Python's
# containers, strings and loggers
PORTABLE_METHODS = frozenset("""
to cuda cpu float half bfloat16 double int long bool byte char short contiguous view view_as reshape
reshape_as permute transpose t unsqueeze squeeze flatten unflatten expand expand_as repeat repeat_interleave
size dim ndimension numel nelement element_size item tolist numpy detach detach_ clone copy_ zero_ fill_
add add_ sub sub_ mul mul_ div div_ matmul mm bmm sum mean std var max min amax amin argmax argmin
softmax log_softmax exp log sqrt rsqrt pow abs neg clamp clamp_ masked_fill masked_fill_ split chunk
unbind narrow gather scatter scatter_ scatter_add_ index_select index_add_ index_copy_ type type_as
new_zeros new_ones new_empty new_full new_tensor pin_memory is_pinned record_stream backward
requires_grad_ retain_grad norm all any eq ne lt gt le ge stride is_contiguous uniform_ normal_
bernoulli_ random_ tril triu flip roll cumsum topk sort argsort where nonzero sigmoid tanh relu
float_power square sin cos floor ceil round lerp lerp_ baddbmm addmm addmm_ einsum
train eval parameters named_parameters buffers named_buffers modules named_modules children
named_children state_dict load_state_dict zero_grad forward apply register_buffer register_parameter
to_empty share_memory share_memory_
step update scale unscale_ add_param_group get_scale
record synchronize wait_stream wait_event elapsed_time query record_event
append extend insert pop remove get items keys values setdefault copy clear add discard join split
strip lstrip rstrip startswith endswith lower upper replace format encode decode count index
debug info warning warn error critical exception log
__init__ __call__ __enter__ __exit__
""".split())
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})


# in a portable namespace, but not on the device: one process over several devices (NP508; a Trainium host
# reports several NeuronCores, so a flipped `device_count() > 1` would enter it)
NOT_ON_NEURON = ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel")


def portable_torch(qualname: str, renamed_cuda: frozenset) -> bool:
    """A torch API on the allow list; ``renamed_cuda``: the ``torch.cuda`` names NP201 renames."""
    if any(qualname == p or qualname.startswith(p + ".") for p in NOT_ON_NEURON):
        return False
    if qualname.startswith("torch.cuda."):
        return qualname[len("torch.cuda."):] in renamed_cuda
    if any(qualname == p or qualname.startswith(p + ".") for p in PORTABLE_TORCH):
        return not CUDA_FEATURE_WORDS.search(qualname.split(".", 2)[-1]) or qualname.startswith("torch.backends.")
    rest = qualname[len("torch."):]
    return "." not in rest and not rest.startswith("_") and not CUDA_FEATURE_WORDS.search(rest)


# a device's name joined to another name: a build or a provider of some other library ("onnxruntime-gpu",
# "tensorflow-cpu", "CUDAExecutionProvider", "jax[cuda12]"), not a torch device ("cuda", "cuda:0")
_CAPABILITY_STRING = re.compile(r"(?i)[a-z0-9_-](?:cuda|gpu|cpu)|(?:cuda|gpu|cpu)[a-z0-9_-]")
_ENV_NAME = re.compile(r"^[A-Z0-9_]+$")  # CUDA_VISIBLE_DEVICES, NCCL_*: NP505 / NP507's


def capability_string(node: cst.SimpleString) -> bool:
    """A string literal that chooses a CUDA (or CPU) build or provider of another library: code holding it
    decides a capability of that library, not where torch puts its tensors, so a flip would make Trainium
    take the CUDA choice (``providers = ["CUDAExecutionProvider"]``, ``"onnxruntime-gpu"``)."""
    text = string_value(node)
    return bool(text) and not any(c.isspace() for c in text) and not _ENV_NAME.match(text) \
        and bool(_CAPABILITY_STRING.search(text))


def _names_feature(node: cst.CSTNode, words: re.Pattern = CUDA_FEATURE_WORDS) -> Optional[str]:
    """The first string literal under ``node`` that names a CUDA-only feature (one of ``words``)."""
    for child in walk(node):
        if isinstance(child, (cst.SimpleString, cst.FormattedStringText)):
            text = string_value(child) if isinstance(child, cst.SimpleString) else child.value
            if text and words.search(text):
                return text
    return None


class Portability:
    """The allow list applied to one module (``renamed_cuda``: the torch.cuda keys NP201 renames;
    ``skip``: nodes another safe fix replaces with a portable value, such as the capability comparisons
    NP210 rewrites; ``kept``: references of those keys that are kept all the same)."""

    def __init__(self, context, module: cst.Module, renamed_cuda: frozenset, skip: frozenset = frozenset(),
                 nodes=None, kept: frozenset = frozenset()) -> None:
        self.context = context
        self.kept = kept  # references another rule keeps as they are (they stay CUDA's)
        self.renamed_cuda = renamed_cuda
        self.skip = skip
        self.functions: dict[str, list[cst.CSTNode]] = {}  # name -> defs (functions, methods, classes)
        self.assigned: dict[str, list[cst.BaseExpression]] = {}  # dotted target -> values
        self.maybe_none: set[str] = set()
        self._memo: dict[object, Optional[str]] = {}
        self._words = CUDA_FEATURE_WORDS  # FEATURE_ONLY_WORDS while judging code a flip stops running
        for node in nodes if nodes is not None else walk(module):
            kind = type(node)  # exact types: LibCST's node classes have no subclasses (and this runs per node)
            if kind is cst.FunctionDef or kind is cst.ClassDef:
                self.functions.setdefault(node.name.value, []).append(node)
            elif (kind is cst.Assign or kind is cst.AnnAssign) and node.value is not None:
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                for target in targets:
                    name = dotted_name(target)
                    if name is not None:
                        self.assigned.setdefault(name, []).append(node.value)
                        if is_none(node.value):
                            self.maybe_none.add(name)

    # -- regions and statements -----------------------------------------------------------------------
    def first_unportable(self, region, leaving: bool = False) -> Optional[str]:
        """``leaving``: the region is code a flip stops running on Trainium (module docstring)."""
        self._words = FEATURE_ONLY_WORDS if leaving else CUDA_FEATURE_WORDS
        try:
            for root in region:
                key = ("node", id(root), leaving)
                if key not in self._memo:
                    self._memo[key] = self._node(root)
                if self._memo[key] is not None:
                    return self._memo[key]
            return None
        finally:
            self._words = CUDA_FEATURE_WORDS

    def _node(self, node: cst.CSTNode) -> Optional[str]:
        if node in self.skip:
            return None
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            return source_of(node)
        if isinstance(node, (cst.Raise, cst.Assert)):
            if _names_feature(node, self._words) is not None:
                return source_of(node)
            raised = node.exc if isinstance(node, cst.Raise) else node.test
            # `raise ValueError(...)`: the exception class is read, not called into (its arguments are)
            return self._children(raised) if isinstance(raised, cst.Call) else self._node(raised)
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                if self._target_names_feature(target):
                    return source_of(node)
                for part in (target.value, *target.slice) if isinstance(target, cst.Subscript) else (
                        (target.value,) if isinstance(target, cst.Attribute) else ()):
                    found = self._node(part)
                    if found is not None:
                        return found
            return None if node.value is None else self._node(node.value)
        if isinstance(node, cst.SimpleString) and capability_string(node):
            return source_of(node)
        if isinstance(node, cst.Call) and dotted_name(node.func) in TORCH_CHECKS:
            # torch._check(cond, message) runs anywhere; like a raise, a message naming CUDA says the
            # code it guards is CUDA's
            return source_of(node) if _names_feature(node, self._words) is not None else self._children(node.args)
        if isinstance(node, cst.Call):
            return self._call(node)
        if isinstance(node, cst.Name):
            return self._name(node)
        if isinstance(node, cst.Attribute):
            return self._attribute(node)
        if isinstance(node, cst.Subscript):
            return self._node(node.value) or self._children(node.slice)
        if isinstance(node, cst.Arg):
            return self._node(node.value)
        if isinstance(node, (cst.Param, cst.Parameters)):
            return None
        return self._children(node)

    def _children(self, node) -> Optional[str]:
        if node is None:
            return None
        for child in node if isinstance(node, (list, tuple)) else _children_of(node):
            found = self._node(child)
            if found is not None:
                return found
        return None

    def _target_names_feature(self, target: cst.BaseExpression) -> bool:
        """A field named after a CUDA-only feature (``self.use_fp8 = True``: state that other code reads). A
        plain name decides nothing by its name (``cuda_info = torch.cuda.memory_stats()``): what matters is
        the code that reads it, judged where it stands."""
        name = dotted_name(target) if isinstance(target, cst.Attribute) else None
        if name is None or (self.context.qualname(target) or "").startswith("torch.backends."):
            return False
        return bool(self._words.search(name.split(".")[-1]))

    # -- expressions ----------------------------------------------------------------------------------
    def _name(self, node: cst.Name) -> Optional[str]:
        if not self.context.is_reference(node):
            return None
        if node.value in self.maybe_none:
            return source_of(node)
        return self._imported(node)

    def _attribute(self, node: cst.Attribute) -> Optional[str]:
        name = dotted_name(node)
        if name is not None and name in self.maybe_none:
            return source_of(node)
        qualname = self.context.qualname(node)
        if qualname is not None:
            return self._imported(node)
        return self._node(node.value)

    def _imported(self, node: cst.BaseExpression) -> Optional[str]:
        """A name bound by an import (or a chain starting with one): portable when it is on the list."""
        qualname = self.context.qualname(node)
        if qualname is None:
            return None
        if node in self.kept:
            return source_of(node)
        if qualname == "torch" or qualname.startswith("torch."):
            return None if qualname == "torch" or portable_torch(qualname, self.renamed_cuda) else source_of(node)
        head, _, rest = qualname.partition(".")
        if head == "builtins":  # `_print = builtins.print`: the builtin itself, as when it is called by name
            return None if rest in PORTABLE_BUILTINS else source_of(node)
        return None if head in PORTABLE_MODULES else source_of(node)

    def _call(self, node: cst.Call) -> Optional[str]:
        func = node.func
        found = self._callee(func)
        if found is not None:
            return found
        text_matters = (isinstance(func, cst.Name) and func.value == "print") or (
            isinstance(func, cst.Attribute) and func.attr.value in _LOG_METHODS) or (
            (self.context.qualname(func) or "").startswith("warnings."))
        if text_matters and _names_feature(node, self._words) is not None:
            return source_of(node)
        return self._children(node.args)

    def _callee(self, func: cst.BaseExpression) -> Optional[str]:
        if self.context.qualname(func) is not None:
            return self._imported(func)
        if isinstance(func, cst.Name):
            if func.value in self.functions:
                return self._defined(func.value, func)
            if func.value in self.assigned:
                return self._values(func.value, func)
            return None if func.value in PORTABLE_BUILTINS else source_of(func)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = dotted_name(func.value)
            if receiver in ("self", "cls") and method in self.functions:
                return self._defined(method, func)
            if method in PORTABLE_METHODS:
                return self._node(func.value)
            name = dotted_name(func)
            if name is not None and name in self.assigned:
                return self._values(name, func)
        if isinstance(func, cst.Call):  # `Block()(x)`, `nn.Linear(4, 2)(x)`: what the portable object does
            return self._node(func)
        return source_of(func)  # a kernel launch `kernel[grid](...)`, a call of a parameter...

    def _defined(self, name: str, func: cst.CSTNode) -> Optional[str]:
        key = ("def", name, self._words is FEATURE_ONLY_WORDS)
        if key not in self._memo:
            self._memo[key] = None  # recursion: assume portable while deciding
            for definition in self.functions[name]:
                found = self._definition(definition)
                if found is not None:
                    self._memo[key] = found
                    break
        return None if self._memo[key] is None else f"{source_of(func)}(...), which runs `{self._memo[key]}`"

    def _definition(self, definition: cst.CSTNode) -> Optional[str]:
        for decorator in definition.decorators:  # type: ignore[attr-defined]
            found = self._node(decorator.decorator)
            if found is not None:
                return found
        return self._children(definition.body)  # type: ignore[attr-defined]

    def _values(self, name: str, func: cst.CSTNode) -> Optional[str]:
        key = ("assigned", name, self._words is FEATURE_ONLY_WORDS)
        if key not in self._memo:
            self._memo[key] = None
            for value in self.assigned[name]:
                found = self._node(value)
                if found is not None:
                    self._memo[key] = found
                    break
        return None if self._memo[key] is None else source_of(func)


def _children_of(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The direct code children of ``node``, without whitespace and comments."""
    names = _FIELDS.get(type(node))
    if names is None:
        names = _FIELDS[type(node)] = tuple(
            f.name for f in dataclasses.fields(type(node))
            if not any(word in f.name for word in ("whitespace", "comment", "lines", "lpar", "rpar")))
    out: list[cst.CSTNode] = []
    for name in names:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            out.extend(v for v in value if isinstance(v, cst.CSTNode))
    return out


_FIELDS: dict[type, tuple[str, ...]] = {}
