"""NP1xx: device placement (CUDA device strings, ``.cuda()``, ``is_cuda``, legacy tensor types, map_location).

Codes (stable):

- NP101 ``cuda-device-string``: ``'cuda'`` / ``'cuda:N'`` literals and templates used as device values.
- NP102 ``cuda-device-check``: the same strings in comparisons (``device.type == 'cuda'``, ``'cuda' in d``).
- NP103 ``cuda-method-call``: ``x.cuda()`` / ``x.cuda(i)`` / ``x.cuda(non_blocking=True)``.
- NP104 ``is-cuda-attribute``: ``x.is_cuda``.
- NP105 ``legacy-cuda-tensor-type``: ``torch.cuda.FloatTensor`` and friends.
- NP106 ``map-location-cuda``: ``torch.load(..., map_location=lambda storage, loc: storage.cuda())``.

NP101 and NP102 share one classification of where a string sits (``_DeviceStringRule``), so every
literal belongs to exactly one of them, and neither touches strings that are not devices: docstrings,
prose, ``getattr(torch, 'cuda')``, log messages, or strings other families own (autocast ``device_type``,
Hugging Face ``device_map``, Lightning ``accelerator``, ``init_device_mesh`` which is NP504).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.spec import Invalid, PythonRule, Valid
from neuron_port.rules.helpers.names import dotted_name
from neuron_port.rules.device_placement.tables import (
    FOREIGN_DEVICE_CALLEES,
    FOREIGN_DEVICE_KEYWORDS,
    FORMAT_TEMPLATE_RE,
    INDEX_NAME_RE,
    LEGACY_CUDA_TENSOR_TYPES,
    LEGACY_CUDA_TYPE_STRINGS,
    LOG_METHODS,
    NAME_ARG_FUNCS,
    ONE_CORE_PER_PROCESS,
    PERCENT_TEMPLATE_RE,
    PLUS_TEMPLATE,
    RANK_CALLS,
    RANK_ENV_VARS,
    RANK_NAME_RE,
)
from neuron_port.rules.device_placement.tables import CUDA_DEVICE_RE
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.guards import AvailabilityMixin, GuardedBlocks
from neuron_port.rules.helpers.nodes import expr, replace_string, string_value

NEURON_DEVICE_VALUES = ("neuron",)


def _last_segment(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def is_rank_expression(node: cst.BaseExpression, loop_names: frozenset[str] | set[str] = frozenset()) -> bool:
    """True for a process's rank used as a device index: ``local_rank``, ``args.gpu``, ``self.rank``,
    ``int(os.environ["LOCAL_RANK"])``, ``os.environ.get("LOCAL_RANK", 0)``, ``dist.get_rank()``.

    A plain name bound by a ``for`` loop or comprehension (``for gpu in range(n)``) iterates over
    devices and is not a rank.
    """
    if isinstance(node, cst.Name):
        return node.value not in loop_names and bool(RANK_NAME_RE.match(node.value))
    if isinstance(node, cst.Attribute):
        return bool(RANK_NAME_RE.match(node.attr.value))
    if isinstance(node, cst.Call):
        func = node.func
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if isinstance(func, cst.Name) and func.value in ("int", "str") and len(node.args) == 1 and positional:
            return is_rank_expression(positional[0].value, loop_names)
        if _last_segment(func) in RANK_CALLS:
            return True
        name = dotted_name(func) or ""
        if (name.endswith("environ.get") or name.endswith("getenv")) and positional:
            return string_value(positional[0].value) in RANK_ENV_VARS
        return False
    if isinstance(node, cst.Subscript):
        if not (dotted_name(node.value) or "").endswith("environ") or len(node.slice) != 1:
            return False
        index = node.slice[0].slice
        return isinstance(index, cst.Index) and string_value(index.value) in RANK_ENV_VARS
    return False


def loop_target_names(target: cst.BaseExpression) -> set[str]:
    """The plain names a ``for`` target binds (``i``, ``(i, gpu)``)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for element in target.elements:
            out |= loop_target_names(element.value)
        return out
    return set()


def _is_neuron_device_string(node: cst.CSTNode) -> bool:
    value = string_value(node)
    return value is not None and (value == "neuron" or value.startswith("neuron:"))


def _set_commas(args: list[cst.Arg], last_comma) -> list[cst.Arg]:
    out = []
    for i, arg in enumerate(args):
        if i < len(args) - 1:
            if not isinstance(arg.comma, cst.Comma):
                arg = arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        else:
            arg = arg.with_changes(comma=last_comma)
        out.append(arg)
    return out


def _kwarg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


# Where a candidate string sits; a stronger role wins when two parents mark the same node.
_PRIORITY = {"value": 0, "container": 1, "key": 2, "check": 3, "multibackend": 4, "skip": 5}


class _DeviceStringRule(AvailabilityMixin, GuardedBlocks, PythonRule):
    """Shared classification of device-string candidates for NP101 (values) and NP102 (checks)."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._roles: dict[cst.CSTNode, str] = {}
        self._maploc_dicts: set[cst.CSTNode] = set()
        self._guarded_nodes: set[cst.CSTNode] = set()
        self._guarded_blocks: set[cst.CSTNode] = set()
        self._guard_depth = 0
        # names bound by for loops / comprehensions (device loops, not ranks)
        self._loop_names: set[str] = set()
        # 'cuda' literal of torch.device('cuda', index) -> (the call, the index argument)
        self._device_calls: dict[cst.CSTNode, tuple[cst.Call, cst.Arg]] = {}

    def visit_For(self, node: cst.For) -> None:
        self._loop_names |= loop_target_names(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._loop_names |= loop_target_names(node.target)

    # -- marking ---------------------------------------------------------------------------------
    def _mark(self, node: cst.CSTNode, role: str) -> None:
        old = self._roles.get(node)
        if old is None or _PRIORITY[role] > _PRIORITY[old]:
            self._roles[node] = role

    def _role(self, node: cst.CSTNode) -> str:
        return self._roles.get(node, "value")

    def _guarded(self, node: cst.CSTNode) -> bool:
        return self._guard_depth > 0 or node in self._guarded_nodes

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            self._mark(node.value, "skip")  # docstrings and bare string statements

    def visit_ConcatenatedString(self, node: cst.ConcatenatedString) -> None:
        self._mark(node.left, "skip")
        self._mark(node.right, "skip")

    def visit_Dict(self, node: cst.Dict) -> None:
        role = "skip" if node in self._maploc_dicts else "key"  # map_location keys name the *saved* device
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                self._mark(element.key, role)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if _last_segment(node.value) == "Literal":
            return  # Literal['cpu', 'cuda'] annotations hold values
        for element in node.slice:
            if isinstance(element.slice, cst.Index):
                self._mark(element.slice.value, "key")

    def _mark_elements(self, node, role: str) -> None:
        for element in node.elements:
            if isinstance(element, cst.Element):
                self._mark(element.value, role)

    def visit_List(self, node: cst.List) -> None:
        self._mark_elements(node, "container")

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._mark_elements(node, "container")

    def visit_Set(self, node: cst.Set) -> None:
        self._mark_elements(node, "container")

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._mark(node.left, "check")
        for target in node.comparisons:
            self._mark(target.comparator, "check")
            if isinstance(target.operator, (cst.In, cst.NotIn)) and isinstance(
                target.comparator, (cst.List, cst.Tuple, cst.Set)
            ):
                self._mark_elements(target.comparator, "check")

    def visit_IfExp(self, node: cst.IfExp) -> None:
        role = self._roles.get(node)
        if role is not None:
            self._mark(node.body, role)
            self._mark(node.orelse, role)
        if self.is_availability_check(node.test):
            self._guarded_nodes.add(node.body)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        role = self._roles.get(node)
        if role is not None:
            self._mark(node.left, role)
            self._mark(node.right, role)

    def visit_If(self, node: cst.If) -> None:
        if self.is_availability_check(node.test):
            self._guarded_blocks.add(node.body)
        # An if/elif chain that already tests for neuron is multi-backend code: rewriting its CUDA
        # branch would shadow the neuron one.
        tests: list[cst.BaseExpression] = []
        current: object = node
        while isinstance(current, cst.If):
            tests.append(current.test)
            current = current.orelse
        comparisons = [c for t in tests for c in _comparisons(t)]
        operands = [o for c in comparisons for o in _operands(c)]
        if any(_is_neuron_device_string(o) for o in operands):
            for operand in operands:
                self._mark(operand, "multibackend")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        last = _last_segment(func)
        if isinstance(func, cst.Name) and func.value in NAME_ARG_FUNCS:
            for arg in node.args:
                self._mark(arg.value, "skip")
        elif isinstance(func, cst.Attribute) and func.attr.value in LOG_METHODS:
            receiver = (dotted_name(func.value) or "").lower()
            if "log" in receiver or receiver == "warnings":
                for arg in node.args:
                    self._mark(arg.value, "skip")
        elif isinstance(func, cst.Attribute) and func.attr.value in ("startswith", "endswith"):
            for arg in node.args:
                self._mark(arg.value, "check")
        if last in FOREIGN_DEVICE_CALLEES:
            for arg in node.args:
                if arg.keyword is None:
                    self._mark(arg.value, "skip")
        for arg in node.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value in FOREIGN_DEVICE_KEYWORDS:
                self._mark(arg.value, "skip")
            elif arg.keyword.value == "map_location" and isinstance(arg.value, cst.Dict):
                self._maploc_dicts.add(arg.value)
        # torch.device('cuda', index)
        if self.context.qualname(func) == "torch.device":
            type_arg, index_arg = arg_named(node, "type", 0), arg_named(node, "index", 1)
            if (
                type_arg is not None
                and index_arg is not None
                and len(node.args) == 2
                and isinstance(type_arg.value, cst.SimpleString)
                and string_value(type_arg.value) == "cuda"
            ):
                self._device_calls[type_arg.value] = (node, index_arg)
        # "cuda:{}".format(i)
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "format"
            and isinstance(func.value, cst.SimpleString)
            and FORMAT_TEMPLATE_RE.match(string_value(func.value) or "")
        ):
            self._candidate(node, func.value, "template")

    # -- candidates ------------------------------------------------------------------------------
    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is not None and CUDA_DEVICE_RE.match(value):
            self._candidate(node, node, "literal")

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        parts = node.parts
        if not parts or not isinstance(parts[0], cst.FormattedStringText):
            return
        text = parts[0].value
        if (text == PLUS_TEMPLATE and len(parts) == 2 and isinstance(parts[1], cst.FormattedStringExpression)) or (
            len(parts) == 1 and CUDA_DEVICE_RE.match(text)
        ):
            self._candidate(node, node, "fstring")

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        left = node.left
        if not isinstance(left, cst.SimpleString):
            return
        value = string_value(left) or ""
        if (isinstance(node.operator, cst.Modulo) and PERCENT_TEMPLATE_RE.match(value)) or (
            isinstance(node.operator, cst.Add) and value == PLUS_TEMPLATE
        ):
            self._candidate(node, left, "template")

    def _candidate(self, role_node: cst.CSTNode, literal: cst.CSTNode, kind: str) -> None:
        raise NotImplementedError

    # -- replacements ----------------------------------------------------------------------------
    @staticmethod
    def _neuron_version(literal: cst.CSTNode) -> cst.CSTNode:
        if isinstance(literal, cst.FormattedString):
            first = literal.parts[0]
            assert isinstance(first, cst.FormattedStringText)
            return literal.with_changes(parts=[first.with_changes(value="neuron" + first.value[4:]), *literal.parts[1:]])
        assert isinstance(literal, cst.SimpleString)
        return replace_string(literal, "neuron" + (string_value(literal) or "")[4:])

    def _accelerator_version(self, literal: cst.CSTNode, kind: str):
        """(replacement, imports) spelled with torch.accelerator, or None where there is no clean one."""
        torch_name, imports = self.context.torch_module_name()
        acc = f"{torch_name}.accelerator.current_accelerator().type"
        if kind == "literal" and isinstance(literal, cst.SimpleString):
            value = string_value(literal) or ""
            if value == "cuda":
                return expr(acc), imports
            quote = literal.quote
            return cst.parse_expression(f"f{quote}{{{acc}}}{value[4:]}{quote}"), imports
        if kind == "fstring" and isinstance(literal, cst.FormattedString):
            first = literal.parts[0]
            assert isinstance(first, cst.FormattedStringText)
            new_parts: list = [cst.FormattedStringExpression(expression=expr(acc))]
            rest = first.value[4:]
            if rest:
                new_parts.append(cst.FormattedStringText(rest))
            return literal.with_changes(parts=[*new_parts, *literal.parts[1:]]), imports
        return None


def _comparisons(node: cst.CSTNode):
    if isinstance(node, cst.Comparison):
        yield node
    if isinstance(node, (cst.BooleanOperation, cst.UnaryOperation, cst.Comparison)):
        for child in node.children:
            yield from _comparisons(child)


def _operands(node: cst.Comparison):
    yield node.left
    for target in node.comparisons:
        yield target.comparator
        if isinstance(target.comparator, (cst.List, cst.Tuple, cst.Set)):
            for element in target.comparator.elements:
                yield element.value


def _source(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


class CudaDeviceString(_DeviceStringRule):
    """Rewrites ``'cuda'`` / ``'cuda:N'`` device strings (and templates that build them) to ``neuron``.

    ## What it does
    Finds string literals that are exactly ``cuda`` or ``cuda:N`` where they are used as a device value:
    assignments (``device = 'cuda'``), ``torch.device('cuda', i)``, ``device='cuda'`` keywords in any call
    (factories, ``torch.Generator``, ``torch.set_default_device``) and function defaults, ``.to('cuda')``,
    argparse ``default='cuda'`` and ``choices=['cpu', 'cuda']``, config dict values, ternaries, and the
    templates ``f"cuda:{local_rank}"``, ``'cuda:%d' % i``, ``'cuda:' + str(i)`` and ``"cuda:{}".format(i)``.
    It rewrites them to ``neuron`` / ``neuron:N``, keeping the quote style. A device indexed by the
    process's rank (``f"cuda:{local_rank}"``, ``'cuda:%d' % args.gpu``, ``"cuda:{}".format(rank)``,
    ``'cuda:' + os.environ["LOCAL_RANK"]``, ``torch.device('cuda', local_rank)``; the index is a name or
    attribute ending in ``local_rank``, ``rank``, ``gpu``, ``gpu_id`` or ``device_id``, ``LOCAL_RANK`` /
    ``RANK`` from ``os.environ``, or ``dist.get_rank()``) becomes the plain ``"neuron"`` (and
    ``torch.device('neuron')``); any other index (``f"cuda:{i}"`` in a loop over devices, or a
    ``for gpu in ...`` loop variable) keeps it: ``f"neuron:{i}"``. Strings that are not devices
    stay: docstrings, prose (``"cuda is not available"``), log and print arguments, ``getattr(torch, 'cuda')``,
    and the keys of a ``map_location`` dict (they name the device the checkpoint was *saved* on).
    Comparisons are NP102; ``device_type=`` (autocast), ``device_map=`` and ``accelerator=`` belong to the
    NP3xx and NP6xx families and ``init_device_mesh('cuda', ...)`` to NP504.

    With ``--target accelerator``, ``'cuda' if torch.cuda.is_available() else 'cpu'`` (and a ``'cuda'``
    inside an ``if torch.cuda.is_available():`` block) becomes
    ``torch.accelerator.current_accelerator().type`` (NP201 rewrites the test). Elsewhere the same
    rewrite is an unsafe fix, and strings in lists, dict keys and %/+/format templates are reported only.

    ## Why is this bad?
    A ``'cuda'`` device raises "Torch not compiled with CUDA enabled" on a Trainium host; the device
    there is ``neuron`` (``torch.device("neuron")``, ``"neuron:0"``, ``device="neuron"``).

    ## Example
    ```python
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    parser.add_argument('--device', default='cuda', choices=['cpu', 'cuda'])
    device = f'cuda:{local_rank}'
    ```
    Use instead:
    ```python
    device = 'neuron' if torch.neuron.is_available() else 'cpu'
    parser.add_argument('--device', default='neuron', choices=['cpu', 'neuron'])
    device = 'neuron'  # under torchrun each process sees one NeuronCore
    ```

    ## Fix safety
    Safe on the neuron target: only exact device strings in value positions are changed. A ``'cuda'``
    used as a dict key or subscript (``{'cuda': ..., 'cpu': ...}[device.type]``) may be a label rather than
    a device, so that rewrite is unsafe. On the accelerator target the rewrite is safe only under an
    availability test: ``torch.accelerator.current_accelerator()`` is ``None`` on a CPU-only host, so an
    unguarded ``current_accelerator().type`` (say, an argparse default) raises where the literal did not.

    The rank-indexed rewrite to ``"neuron"`` is safe on the neuron target: TorchNeuron's
    ``init_process_group`` sets ``NEURON_RT_VISIBLE_CORES=<LOCAL_RANK>`` when it is unset and allows one
    device per process ("Attempted to have more than one device per process in distributed setup"), so
    under ``torchrun`` each process sees exactly one NeuronCore: ``neuron`` is ``neuron:0`` is that core,
    and ``neuron:{local_rank}`` is an invalid device for every rank but 0. On rank 0 the two spellings are
    the same device, so no run that worked before changes. (A single-process script that picks a core
    with ``--gpu 3`` now runs on the first visible core: set ``NEURON_RT_VISIBLE_CORES=3`` instead.)
    On the accelerator target the index is kept (``f"{...current_accelerator().type}:{local_rank}"``),
    which is what CUDA needs. See also NP502 (``set_device(local_rank)``) and NP503 (``device_ids``).

    ## References
    - shared/torchneuron.md section 7 ("`.to('cuda')` -> `.to('neuron')`")
    - shared/torchneuron.md section 6 (one NeuronCore per process; tensors on ``torch.device("neuron")``)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html
    - https://docs.pytorch.org/docs/stable/accelerator.html
    """

    CODE = "NP101"
    NAME = "cuda-device-string"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "`{old}` is a CUDA device string: use `{new}`"
    TRIGGERS = ("'cuda", '"cuda')

    def __init__(self, context) -> None:
        super().__init__(context)
        self._rank_pending: list = []

    VALID = [
        Valid("device = 'neuron' if torch.neuron.is_available() else 'cpu'\n"),
        Valid('"""Runs on cuda."""\nprint("cuda is not available")\nlogger.info("cuda")\n'),
        Valid("import torch\nhas = hasattr(torch, 'cuda')\nmod = getattr(torch, 'cuda')\n"),
        Valid("ctx = torch.autocast(device_type='cuda', dtype=torch.bfloat16)\n"),  # NP3xx
        Valid("model = AutoModel.from_pretrained(name, device_map='cuda')\n"),  # NP6xx
        Valid("if device.type == 'cuda':\n    pass\n"),  # NP102
        Valid("state = torch.load(f, map_location={'cuda:1': 'cpu'})\n"),
        Valid("x = torch.zeros(3, device='cpu')\ny = b'cuda'\nz = 'cudagraphs'\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n",
            "import torch\ndevice = 'neuron' if torch.cuda.is_available() else 'cpu'\n",
        ),
        Invalid(
            "parser.add_argument('--device', type=str, default='cuda', choices=['cpu', 'cuda'])\n",
            "parser.add_argument('--device', type=str, default='neuron', choices=['cpu', 'neuron'])\n",
        ),
        Invalid(
            'dev = torch.device("cuda", 1)\nx = torch.zeros(3, device="cuda:0")  # keep me\ny = x.to("cuda")\n',
            'dev = torch.device("neuron", 1)\nx = torch.zeros(3, device="neuron:0")  # keep me\ny = x.to("neuron")\n',
        ),
        Invalid(
            "def run(model, device='cuda'):\n    cfg = {'device': 'cuda', 'lr': 0.1}\n",
            "def run(model, device='neuron'):\n    cfg = {'device': 'neuron', 'lr': 0.1}\n",
        ),
        Invalid(
            "device = f'cuda:{local_rank}'\na = 'cuda:%d' % args.gpu\nb = 'cuda:' + str(int(os.environ['LOCAL_RANK']))\n"
            "c = \"cuda:{}\".format(rank)\nd = torch.device('cuda', local_rank)\n"
            "e = torch.device(f\"cuda:{os.environ.get('LOCAL_RANK', 0)}\")\nf = 'cuda:%d' % (dist.get_rank(),)\n",
            "device = 'neuron'\na = 'neuron'\nb = 'neuron'\nc = \"neuron\"\nd = torch.device('neuron')\n"
            "e = torch.device(\"neuron\")\nf = 'neuron'\n",
            message_contains="one NeuronCore",
        ),
        Invalid(
            "b = 'cuda:' + str(i)\nc = \"cuda:{}\".format(i)\nd = torch.device('cuda', idx)\n"
            "for gpu in range(n):\n    devs.append(f'cuda:{gpu}')\nall_devs = [f'cuda:{gpu_id}' for gpu_id in range(4)]\n",
            "b = 'neuron:' + str(i)\nc = \"neuron:{}\".format(i)\nd = torch.device('neuron', idx)\n"
            "for gpu in range(n):\n    devs.append(f'neuron:{gpu}')\nall_devs = [f'neuron:{gpu_id}' for gpu_id in range(4)]\n",
        ),
        Invalid(
            "torch.set_default_device('cuda')\ng = torch.Generator(device='cuda')\n"
            "ckpt = torch.load(p, map_location={'cuda:0': 'cuda:%d' % rank})\n",
            "torch.set_default_device('neuron')\ng = torch.Generator(device='neuron')\n"
            "ckpt = torch.load(p, map_location={'cuda:0': 'neuron'})\n",
        ),
        Invalid(
            "backend = {'cuda': 'nccl', 'cpu': 'gloo'}[device.type]\n",
            None,  # a dict key may be a label: unsafe fix only
            message_contains="dict key",
        ),
        Invalid(
            "backend = {'cuda': 'nccl', 'cpu': 'gloo'}[device.type]\n",
            "backend = {'neuron': 'nccl', 'cpu': 'gloo'}[device.type]\n",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "if torch.cuda.is_available():\n    dev = 'cuda'\n",
            "import torch\ndevice = torch.accelerator.current_accelerator().type if torch.cuda.is_available() else 'cpu'\n"
            "if torch.cuda.is_available():\n    dev = torch.accelerator.current_accelerator().type\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\nparser.add_argument('--device', default='cuda')\n",
            None,  # unguarded: current_accelerator() is None on CPU-only hosts
            target="accelerator",
        ),
        Invalid(
            "import torch as th\nparser.add_argument('--device', default='cuda')\nd = f'cuda:{rank}'\n",
            "import torch as th\nparser.add_argument('--device', default=th.accelerator.current_accelerator().type)\n"
            "d = f'{th.accelerator.current_accelerator().type}:{rank}'\n",
            target="accelerator",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    device = f'cuda:{local_rank}'\n    d2 = torch.device('cuda', local_rank)\n",
            "import torch\nif torch.cuda.is_available():\n    device = f'{torch.accelerator.current_accelerator().type}:{local_rank}'\n"
            "    d2 = torch.device(torch.accelerator.current_accelerator().type, local_rank)\n",
            target="accelerator",
        ),
    ]

    def _candidate(self, role_node: cst.CSTNode, literal: cst.CSTNode, kind: str) -> None:
        role = self._role(role_node)
        if role in ("skip", "check", "multibackend"):
            return
        old = _source(role_node)
        if self.context.target == "accelerator":
            built = None if role in ("key", "container") else self._accelerator_version(literal, kind)
            if built is None:
                self.report(
                    literal,
                    f"`{old}` is a CUDA device string; there is no torch.accelerator spelling for it here: "
                    "derive it from `torch.accelerator.current_accelerator()` (None on CPU-only hosts)",
                )
                return
            replacement, imports = built
            safety = "safe" if self._guarded(role_node) else "unsafe"
            self.report(
                literal,
                self.MESSAGE.format(old=old, new=_source(replacement))
                + ("" if safety == "safe" else " (unsafe: `current_accelerator()` is None on CPU-only hosts)"),
                replacement=replacement,
                safety=safety,
                imports=imports,
            )
            return
        if role in ("value", "container"):
            indexed = self._index_of(role_node, literal, kind)
            if indexed is not None:
                # decided at the end of the module: a comprehension binds its loop name after its element
                self._rank_pending.append((role_node, literal, indexed))
                return
        self._report_neuron(role_node, literal, role)

    def _index_of(self, role_node: cst.CSTNode, literal: cst.CSTNode, kind: str):
        """(index expression, node to replace) of a device built from an index, else None."""
        if kind == "fstring" and isinstance(literal, cst.FormattedString):
            parts = literal.parts
            if len(parts) == 2 and isinstance(parts[1], cst.FormattedStringExpression):
                return parts[1].expression, literal
            return None
        if kind == "template" and isinstance(role_node, cst.BinaryOperation):
            right = role_node.right
            if isinstance(right, cst.Tuple) and len(right.elements) == 1:
                right = right.elements[0].value
            return right, role_node
        if kind == "template" and isinstance(role_node, cst.Call):
            if len(role_node.args) == 1 and role_node.args[0].keyword is None and not role_node.args[0].star:
                return role_node.args[0].value, role_node
            return None
        if kind == "literal" and literal in self._device_calls:
            call, index_arg = self._device_calls[literal]
            return index_arg.value, call
        return None

    def leave_Module(self, original_node: cst.Module) -> None:
        for role_node, literal, (index, node) in self._rank_pending:
            if not is_rank_expression(index, self._loop_names):
                self._report_neuron(role_node, literal, "value")
                continue
            old = _source(node)
            if isinstance(node, cst.Call) and literal in self._device_calls:
                first = node.args[0]
                replacement: cst.CSTNode = node.with_changes(
                    args=[first.with_changes(value=replace_string(literal, "neuron"), comma=cst.MaybeSentinel.DEFAULT)]
                )
            elif isinstance(literal, cst.FormattedString):
                replacement = cst.SimpleString(f"{literal.end}neuron{literal.end}")
            else:
                assert isinstance(literal, cst.SimpleString)
                replacement = replace_string(literal, "neuron")
            self.report(
                node,
                f"`{old}` is a rank-indexed CUDA device: use `{_source(replacement)}`; {ONE_CORE_PER_PROCESS}",
                replacement=replacement,
                safety="safe",
            )

    def _report_neuron(self, role_node: cst.CSTNode, literal: cst.CSTNode, role: str) -> None:
        old = _source(role_node)
        replacement = self._neuron_version(literal)
        new = old.replace(_source(literal), _source(replacement), 1)
        if role == "key":
            self.report(
                literal,
                f"`{old}` is a CUDA device name used as a dict key or index: rename it to `{_source(replacement)}` "
                "if it is looked up by device type (unsafe: it may be a plain label)",
                replacement=replacement,
                safety="unsafe",
            )
            return
        self.report(literal, self.MESSAGE.format(old=old, new=new), replacement=replacement, safety="safe")


class CudaDeviceCheck(_DeviceStringRule):
    """Rewrites device checks against ``'cuda'`` (``device.type == 'cuda'``, ``'cuda' in device``).

    ## What it does
    Finds ``'cuda'`` / ``'cuda:N'`` strings (and the NP101 templates) used in comparisons: ``==``, ``!=``,
    ``in``, ``not in``, membership in a literal list or tuple, and ``str.startswith('cuda')``. On the
    neuron target they become ``'neuron'``. When the same ``if``/``elif`` chain already tests for
    ``'neuron'`` the code is multi-backend and is only reported.

    ## Why is this bad?
    On Trainium ``device.type`` is ``'neuron'``, so a ``== 'cuda'`` test is silently False: the program
    takes its CPU branch (no pinned memory, no fused optimizer, autocast off), which runs but slowly or
    differently, with no error.

    ## Example
    ```python
    device_type = 'cuda' if 'cuda' in device else 'cpu'
    if device.type == 'cuda':
        torch.cuda.synchronize()
    ```
    Use instead:
    ```python
    device_type = 'neuron' if 'neuron' in device else 'cpu'
    if device.type == 'neuron':
        torch.neuron.synchronize()
    ```

    ## Fix safety
    Safe on the neuron target, because NP101 rewrites the strings the compared values are made from, so
    both sides change together. Not fixed when the chain already has a neuron branch (the CUDA branch
    would shadow it) and not fixed on the accelerator target, where there is no device-agnostic spelling
    of "is this the accelerator": compare with ``torch.accelerator.current_accelerator().type`` after
    checking ``torch.accelerator.is_available()``.

    ## References
    - shared/patterns.md, device placement tier B
    - https://docs.pytorch.org/docs/stable/accelerator.html
    """

    CODE = "NP102"
    NAME = "cuda-device-check"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "device check against `{old}` is always False on Trainium: compare with `{new}`"
    TRIGGERS = ("'cuda", '"cuda')

    VALID = [
        Valid("if device.type == 'neuron':\n    pass\n"),
        Valid("device = 'cuda'\n"),  # NP101's business
        Valid("if x == 'cuda is slow':\n    pass\n"),
    ]
    INVALID = [
        Invalid(
            "device_type = 'cuda' if 'cuda' in device else 'cpu'\nif device.type == 'cuda':\n    pass\n",
            "device_type = 'cuda' if 'neuron' in device else 'cpu'\nif device.type == 'neuron':\n    pass\n",
        ),
        Invalid(
            'use_fused = args.device != "cuda:0"\nok = dev in ("cuda", "cpu")\nif d.startswith("cuda"):\n    pass\n',
            'use_fused = args.device != "neuron:0"\nok = dev in ("neuron", "cpu")\nif d.startswith("neuron"):\n    pass\n',
        ),
        Invalid(
            "if device.type == 'cuda':\n    a()\nelif device.type == 'neuron':\n    b()\n",
            None,
            message_contains="already",
        ),
        Invalid("if device.type == 'cuda':\n    pass\n", None, target="accelerator"),
    ]

    def _candidate(self, role_node: cst.CSTNode, literal: cst.CSTNode, kind: str) -> None:
        role = self._role(role_node)
        if role not in ("check", "multibackend"):
            return
        old = _source(role_node)
        if role == "multibackend":
            self.report(
                literal,
                f"device check against `{old}` in an if/elif chain that already handles neuron: review "
                "which branch should run on Trainium",
            )
            return
        if self.context.target == "accelerator":
            self.report(
                literal,
                f"device check against `{old}` is False on other accelerators: compare with "
                "`torch.accelerator.current_accelerator().type` (after `torch.accelerator.is_available()`)",
            )
            return
        replacement = self._neuron_version(literal)
        self.report(
            literal,
            self.MESSAGE.format(old=old, new=old.replace(_source(literal), _source(replacement), 1)),
            replacement=replacement,
        )


def _storage_lambda_call(node: cst.Lambda) -> Optional[cst.Call]:
    """``lambda storage, loc: storage.cuda(...)``: the body call, else None."""
    params = node.params.params
    if len(params) != 2:
        return None
    body = node.body
    if (
        isinstance(body, cst.Call)
        and isinstance(body.func, cst.Attribute)
        and body.func.attr.value == "cuda"
        and isinstance(body.func.value, cst.Name)
        and body.func.value.value == params[0].name.value
    ):
        return body
    return None


class CudaMethodCall(PythonRule):
    """Rewrites ``x.cuda()`` / ``x.cuda(i)`` / ``x.cuda(non_blocking=True)`` to ``x.to(...)``.

    ## What it does
    Finds calls of the ``.cuda()`` method of tensors and modules and rewrites them: ``.cuda()`` becomes
    ``.to("neuron")``, ``.cuda(0)`` becomes ``.to("neuron:0")``, ``.cuda(local_rank)`` (a rank: see NP101)
    becomes ``.to("neuron")``, other ``.cuda(i)`` / ``.cuda(device=i)`` become ``.to(i)`` (an integer
    device means the current accelerator, a ``torch.device`` passes through), and
    ``non_blocking=`` / ``memory_format=`` are kept. With ``--target accelerator`` ``.cuda()`` becomes
    ``.to(torch.accelerator.current_accelerator())``. The ``storage.cuda()`` in a ``map_location``
    lambda is NP106's.

    ## Why is this bad?
    ``.cuda()`` raises "Torch not compiled with CUDA enabled" on a Trainium host.

    ## Example
    ```python
    model.cuda()
    x = x.cuda(non_blocking=True)
    ```
    Use instead:
    ```python
    model.to("neuron")
    x = x.to("neuron", non_blocking=True)
    ```

    ## Fix safety
    Safe. ``.cuda(expr)`` becomes ``.to(expr)``; that is unsafe when ``expr`` is not named like a
    device index (``rank``, ``gpu``, ``idx``...), because ``.cuda(None)`` means the current device but
    ``.to(None)`` means no move. When the file defines its own ``cuda`` method the calls may be to it, so
    every fix in that file is unsafe. On the accelerator target ``.to(None)`` on a CPU-only host is a
    no-op where ``.cuda()`` raised. ``.cuda(local_rank)`` -> ``.to("neuron")`` is safe on the neuron target
    for the reason given in NP101: under ``torchrun`` each process sees one NeuronCore, so
    ``.to(local_rank)`` (``neuron:<local_rank>``) is invalid for every rank but 0, where the two agree.

    ## References
    - shared/torchneuron.md sections 1.1, 6 (one NeuronCore per process) and 7
    - https://docs.pytorch.org/docs/stable/generated/torch.Tensor.to.html
    """

    CODE = "NP103"
    NAME = "cuda-method-call"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "`.cuda()` fails on Trainium: use `{new}`"
    TRIGGERS = (".cuda(",)

    VALID = [
        Valid("x = x.to('neuron')\n"),
        Valid("fn = model.cuda\n"),
        Valid("ckpt = torch.load(p, map_location=lambda storage, loc: storage.cuda())\n"),  # NP106
    ]
    INVALID = [
        Invalid(
            "model.cuda()\nx = x.cuda(non_blocking=True)\ny = y.cuda(0)\n",
            'model.to("neuron")\nx = x.to("neuron", non_blocking=True)\ny = y.to("neuron:0")\n',
        ),
        Invalid(
            "model = model.cuda(args.gpu)\nt = t.cuda(device=local_rank, non_blocking=True)\n",
            'model = model.to("neuron")\nt = t.to("neuron", non_blocking=True)\n',
            message_contains="one NeuronCore",
        ),
        Invalid(
            "for gpu in range(4):\n    parts[gpu] = parts[gpu].cuda(gpu)\nm = m.cuda(idx)\n",
            "for gpu in range(4):\n    parts[gpu] = parts[gpu].to(gpu)\nm = m.to(idx)\n",
        ),
        Invalid(
            "model = model.cuda(args.gpu)\n",
            "model = model.to(args.gpu)\n",
            target="accelerator",
        ),
        Invalid("x = x.cuda(dev)\n", None, message_contains="unsafe"),
        Invalid(
            "class M:\n    def cuda(self):\n        return self\nm.cuda()\n",
            None,  # the file defines its own cuda(): unsafe
        ),
        Invalid(
            "import torch\nmodel.cuda()\nx = x.cuda(non_blocking=True)\n",
            "import torch\nmodel.to(torch.accelerator.current_accelerator())\n"
            "x = x.to(torch.accelerator.current_accelerator(), non_blocking=True)\n",
            target="accelerator",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._skip: set[cst.CSTNode] = set()
        self._pending: list[tuple[cst.Call, str, Optional[cst.Call], str, tuple]] = []
        self._defines_cuda = False
        self._loop_names: set[str] = set()
        self._rank_calls: dict[cst.Call, tuple[cst.BaseExpression, cst.Call]] = {}

    def visit_For(self, node: cst.For) -> None:
        self._loop_names |= loop_target_names(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._loop_names |= loop_target_names(node.target)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        call = _storage_lambda_call(node)
        if call is not None:
            self._skip.add(call)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value == "cuda":
            self._defines_cuda = True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "cuda" or node in self._skip:
            return
        qualname = self.context.qualname(func)
        if qualname is not None and qualname.startswith("torch"):
            return
        if any(a.star for a in node.args):
            self._pending.append((node, "`.cuda(*...)` fails on Trainium: use `.to(...)`", None, "none", ()))
            return
        device_arg = arg_named(node, "device", 0)
        rest = [a for a in node.args if a is not device_arg]
        safety = "safe"
        imports: tuple = ()
        rank_arg: Optional[cst.BaseExpression] = None
        if device_arg is None:
            if self.context.target == "accelerator":
                torch_name, imports = self.context.torch_module_name()
                device = expr(f"{torch_name}.accelerator.current_accelerator()")
            else:
                device = cst.SimpleString('"neuron"')
        elif isinstance(device_arg.value, cst.Integer) and self.context.target == "neuron":
            device = cst.SimpleString(f'"neuron:{device_arg.value.value}"')
        elif self.context.target == "neuron" and is_rank_expression(device_arg.value):
            device = cst.SimpleString('"neuron"')
            rank_arg = device_arg.value  # loop variables are checked at the end of the module
        else:
            device = device_arg.value
            if not self._index_like(device):
                safety = "unsafe"
        args = _set_commas([cst.Arg(value=device)] + rest, node.args[-1].comma if node.args else cst.MaybeSentinel.DEFAULT)
        replacement = node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=args)
        message = self.MESSAGE.format(new="." + _source(cst.Call(func=cst.Name("to"), args=args)))
        if safety == "unsafe":
            message += " (unsafe: `.cuda(None)` moves to the current device, `.to(None)` does not move)"
        if rank_arg is not None:
            message += f"; {ONE_CORE_PER_PROCESS}"
            # in a loop over devices the name is not a rank: fall back to .to(name)
            fallback = node.with_changes(
                func=func.with_changes(attr=cst.Name("to")),
                args=_set_commas([cst.Arg(value=rank_arg)] + rest, node.args[-1].comma),
            )
            self._rank_calls[node] = (rank_arg, fallback)
        self._pending.append((node, message, replacement, safety, imports))

    @staticmethod
    def _index_like(node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Integer):
            return True
        if isinstance(node, cst.Call) and _last_segment(node.func) in ("int", "current_device", "get_rank"):
            return True
        last = _last_segment(node)
        return last is not None and bool(INDEX_NAME_RE.search(last))

    def leave_Module(self, original_node: cst.Module) -> None:
        for node, message, replacement, safety, imports in self._pending:
            if replacement is None:
                self.report(node, message)
                continue
            if node in self._rank_calls:
                rank_arg, fallback = self._rank_calls[node]
                if not is_rank_expression(rank_arg, self._loop_names):
                    replacement = fallback
                    message = self.MESSAGE.format(new="." + _source(cst.Call(func=cst.Name("to"), args=fallback.args)))
            if self._defines_cuda and safety == "safe":
                safety = "unsafe"
                message += " (unsafe: this file defines its own `cuda` method)"
            self.report(node, message, replacement=replacement, safety=safety, imports=imports)


class IsCudaAttribute(PythonRule):
    """Rewrites ``x.is_cuda`` to ``x.is_neuron``.

    ## What it does
    Finds reads of the ``is_cuda`` tensor property and renames them to ``is_neuron``, the property
    TorchNeuron generates for the ``neuron`` backend. On the accelerator target it reports them.

    ## Why is this bad?
    ``is_cuda`` is False for every tensor on Trainium, so code that branches on it takes the CPU path.

    ## Example
    ```python
    if x.is_cuda:
        x = x.pin_memory()
    ```
    Use instead:
    ```python
    if x.is_neuron:
        x = x.pin_memory()
    ```

    ## Fix safety
    Safe: ``Tensor.is_neuron`` is generated by ``torch.utils.generate_methods_for_privateuse1_backend``.
    Unsafe when the file assigns or defines its own ``is_cuda`` (the name may be a user attribute).
    For ``--target accelerator`` use ``x.device.type == torch.accelerator.current_accelerator().type``
    (reported, not rewritten: ``current_accelerator()`` is None on CPU-only hosts).

    ## References
    - shared/torchneuron.md section 1.1
    - https://docs.pytorch.org/docs/stable/generated/torch.utils.generate_methods_for_privateuse1_backend.html
    """

    CODE = "NP104"
    NAME = "is-cuda-attribute"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "`is_cuda` is always False on Trainium: use `is_neuron`"
    TRIGGERS = ("is_cuda",)

    VALID = [Valid("if x.is_neuron:\n    pass\n"), Valid("is_cuda = True\n")]
    INVALID = [
        Invalid(
            "if x.is_cuda and next(model.parameters()).is_cuda:\n    pass\n",
            "if x.is_neuron and next(model.parameters()).is_neuron:\n    pass\n",
        ),
        Invalid("self.is_cuda = flag\nif self.is_cuda:\n    pass\n", None),
        Invalid("pin = x.is_cuda\n", None, target="accelerator", message_contains="current_accelerator"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._found: list[cst.Attribute] = []
        self._user_defined = False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "is_cuda":
            self._found.append(node)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if isinstance(node.target, cst.Attribute) and node.target.attr.value == "is_cuda":
            self._user_defined = True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value == "is_cuda":
            self._user_defined = True

    def leave_Module(self, original_node: cst.Module) -> None:
        for node in self._found:
            if self.context.target == "accelerator":
                self.report(
                    node,
                    "`is_cuda` is False on other accelerators: test "
                    "`x.device.type == torch.accelerator.current_accelerator().type`",
                )
            elif self._user_defined:
                self.report(
                    node,
                    self.MESSAGE + " (unsafe: this file assigns its own `is_cuda`)",
                    replacement=node.with_changes(attr=cst.Name("is_neuron")),
                    safety="unsafe",
                )
            else:
                self.report(node, replacement=node.with_changes(attr=cst.Name("is_neuron")))


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
    - shared/torchneuron.md section 7
    """

    CODE = "NP105"
    NAME = "legacy-cuda-tensor-type"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "`torch.cuda.{name}` does not exist on Trainium: {advice}"
    TRIGGERS = tuple(LEGACY_CUDA_TENSOR_TYPES)

    VALID = [
        Valid("import torch\nx = torch.FloatTensor([1.0])\n"),
        Valid("import torch\nx = torch.tensor([1], dtype=torch.int64, device='neuron')\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nmask = torch.cuda.LongTensor([0, 2])\nbuf = torch.cuda.FloatTensor(16, 32)\n",
            'import torch\nmask = torch.tensor([0, 2], dtype=torch.int64, device="neuron")\n'
            'buf = torch.empty(16, 32, dtype=torch.float32, device="neuron")\n',
        ),
        Invalid(
            "import torch as th\ny = x.type(th.cuda.HalfTensor)\n",
            'import torch as th\ny = x.to(device="neuron", dtype=th.float16)\n',
        ),
        Invalid("import torch\nok = isinstance(x, torch.cuda.FloatTensor)\n", None, message_contains="isinstance"),
        Invalid("from torch.cuda import LongTensor\nidx = LongTensor(indices)\n", None),
        Invalid("ok = x.type() == 'torch.cuda.FloatTensor'\n", None),
        Invalid(
            "import torch\nb = torch.cuda.ByteTensor(4)\n",
            "import torch\nb = torch.empty(4, dtype=torch.uint8, device=torch.accelerator.current_accelerator())\n",
            target="accelerator",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._handled: set[cst.CSTNode] = set()
        self._docstrings: set[cst.CSTNode] = set()

    def _type_name(self, node: cst.BaseExpression) -> Optional[str]:
        if not isinstance(node, (cst.Name, cst.Attribute)) or not self.context.is_reference(node):
            return None
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
                args=_set_commas([_kwarg("device", device), _kwarg("dtype", dtype)], cst.MaybeSentinel.DEFAULT),
            )
            self.report(
                node,
                self.MESSAGE.format(name=name, advice=f"use `.to(device=..., dtype=torch.{LEGACY_CUDA_TENSOR_TYPES[name]})`"),
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
                    advice=f"use `torch.tensor(data, dtype=torch.{dtype_name}, device=\"neuron\")` for data or "
                    f"`torch.empty(*sizes, dtype=torch.{dtype_name}, device=\"neuron\")` for sizes",
                ),
            )
            return
        device, torch_name, imports = self._device()
        dtype = expr(f"{torch_name}.{dtype_name}")
        new_args = _set_commas(
            [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args] + [_kwarg("dtype", dtype), _kwarg("device", device)],
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
        if node in self._handled:
            return
        name = self._type_name(node)
        if name is None:
            return
        dtype_name = LEGACY_CUDA_TENSOR_TYPES[name]
        self.report(
            node,
            self.MESSAGE.format(
                name=name,
                advice=f"for isinstance/type checks test `x.is_neuron and x.dtype == torch.{dtype_name}`; "
                f"to create tensors use `torch.tensor`/`torch.empty` with `dtype=torch.{dtype_name}, device=\"neuron\"`",
            ),
        )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)

    def visit_Expr(self, node: cst.Expr) -> None:
        self._docstrings.add(node.value)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if node in self._docstrings:
            return
        value = string_value(node)
        if value in LEGACY_CUDA_TYPE_STRINGS:
            name = value.rsplit(".", 1)[1]
            self.report(
                node,
                self.MESSAGE.format(
                    name=name,
                    advice=f"`x.type()` never returns this string on Trainium; test "
                    f"`x.is_neuron and x.dtype == torch.{LEGACY_CUDA_TENSOR_TYPES[name]}`",
                ),
            )


class MapLocationCuda(PythonRule):
    """Rewrites ``map_location=lambda storage, loc: storage.cuda()`` to a neuron device.

    ## What it does
    Finds the ``lambda storage, loc: storage.cuda(...)`` idiom (the ``map_location`` of ``torch.load``)
    and replaces the lambda by the device it moves to: ``"neuron"``, ``"neuron:0"``, ``f"neuron:{i}"``
    (or ``torch.accelerator.current_accelerator()`` on the accelerator target). ``storage.cuda(local_rank)``
    (a rank, see NP101) becomes ``"neuron"``: under ``torchrun`` each process sees one NeuronCore. ``map_location``
    strings and ``torch.device`` values are NP101's; the keys of a ``map_location`` dict (the device the
    checkpoint was saved on) are left alone on purpose.

    ## Why is this bad?
    ``storage.cuda()`` raises on a Trainium host, and rewriting it to ``storage.to("neuron")`` is not
    an option: ``UntypedStorage.to`` takes ``device`` as a keyword-only argument.

    ## Example
    ```python
    ckpt = torch.load(path, map_location=lambda storage, loc: storage.cuda())
    ```
    Use instead:
    ```python
    ckpt = torch.load(path, map_location="neuron")
    ```

    ## Fix safety
    Safe: ``map_location`` accepts a device string and the lambda did the same move for every storage.
    A rank index becomes ``"neuron"`` for the reason given in NP101 (``neuron:<local_rank>`` is invalid
    for every rank but 0 under ``torchrun``).

    ## References
    - https://docs.pytorch.org/docs/stable/generated/torch.load.html
    - shared/torchneuron.md section 6
    """

    CODE = "NP106"
    NAME = "map-location-cuda"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "`storage.cuda()` in map_location fails on Trainium: use `map_location={new}`"
    TRIGGERS = (".cuda(",)

    VALID = [
        Valid("ckpt = torch.load(p, map_location=lambda storage, loc: storage)\n"),
        Valid("ckpt = torch.load(p, map_location='neuron')\n"),
    ]
    INVALID = [
        Invalid(
            "ckpt = torch.load(p, map_location=lambda storage, loc: storage.cuda())\n",
            'ckpt = torch.load(p, map_location="neuron")\n',
        ),
        Invalid(
            "ckpt = torch.load(p, map_location=lambda s, l: s.cuda(args.gpu))\nc2 = torch.load(q, lambda s, l: s.cuda(1))\n"
            "c3 = torch.load(r, map_location=lambda s, l: s.cuda(dev_index))\n",
            'ckpt = torch.load(p, map_location="neuron")\nc2 = torch.load(q, "neuron:1")\n'
            'c3 = torch.load(r, map_location=f"neuron:{dev_index}")\n',
            message_contains="one NeuronCore",
        ),
        Invalid(
            "import torch\nckpt = torch.load(p, map_location=lambda storage, loc: storage.cuda())\n",
            "import torch\nckpt = torch.load(p, map_location=torch.accelerator.current_accelerator())\n",
            target="accelerator",
        ),
    ]

    def visit_Lambda(self, node: cst.Lambda) -> None:
        call = _storage_lambda_call(node)
        if call is None:
            return
        device_arg = arg_named(call, "device", 0)
        others = [a for a in call.args if a is not device_arg]
        if others or any(a.star for a in call.args):
            self.report(node, "`storage.cuda(...)` in map_location fails on Trainium: use a neuron device string")
            return
        imports: tuple = ()
        if self.context.target == "accelerator":
            torch_name, imports = self.context.torch_module_name()
            if device_arg is None:
                new = f"{torch_name}.accelerator.current_accelerator()"
            else:
                new = f"{torch_name}.device({torch_name}.accelerator.current_accelerator().type, {_source(device_arg.value)})"
        elif device_arg is None:
            new = '"neuron"'
        elif isinstance(device_arg.value, cst.Integer):
            new = f'"neuron:{device_arg.value.value}"'
        elif is_rank_expression(device_arg.value):
            new = '"neuron"'
        elif isinstance(device_arg.value, (cst.Name, cst.Attribute)):
            new = f'f"neuron:{{{_source(device_arg.value)}}}"'
        else:
            torch_name, imports = self.context.torch_module_name()
            new = f'{torch_name}.device("neuron", {_source(device_arg.value)})'
        replacement = expr(new)
        message = self.MESSAGE.format(new=new)
        if device_arg is not None and new == '"neuron"':
            message += f"; {ONE_CORE_PER_PROCESS}"
        self.report(node, message, replacement=replacement, imports=imports)
