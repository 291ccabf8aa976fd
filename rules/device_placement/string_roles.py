"""Where a device-string candidate sits: the classification NP101 (values) and NP102 (checks) share.

``DeviceStringRule`` marks each ``'cuda'`` / ``'cuda:N'`` literal and template with one role (value,
container, key, check, multi-backend check, or skip for strings that are not devices or belong to another
family), so every literal belongs to exactly one of the two rules; each rule implements ``_candidate``.
"""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.device_placement.device_subjects import is_backend_map_entry, names_a_device
from neuron_port.rules.device_placement.tables import (
    CUDA_DEVICE_RE,
    DEVICE_TYPE_NAMES,
    FOREIGN_DEVICE_CALLEES,
    FOREIGN_DEVICE_KEYWORDS,
    FORMAT_TEMPLATE_RE,
    LOG_METHODS,
    NAME_ARG_FUNCS,
    PERCENT_TEMPLATE_RE,
    PLUS_TEMPLATE,
    PRIVATEUSE1_NAME_CALL,
)
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.guards import AvailabilityMixin, GuardedBlocks
from neuron_port.rules.helpers.names import dotted_name, last_segment, walk
from neuron_port.rules.helpers.per_file import module_walk
from neuron_port.rules.helpers.nodes import children, expr, replace_string, string_value
from neuron_port.rules.spec import PythonRule


def _is_neuron_device_string(node: cst.CSTNode) -> bool:
    value = string_value(node)
    return value is not None and (value == "neuron" or value.startswith("neuron:"))


_ENUM_BASES = frozenset({"Enum", "StrEnum", "IntEnum", "Flag", "IntFlag"})

# Where a candidate string sits; a stronger role wins when two parents mark the same node.
_PRIORITY = {"value": 0, "container": 1, "key": 2, "check": 3, "multibackend": 4, "skip": 5}


class DeviceStringRule(AvailabilityMixin, GuardedBlocks, PythonRule):
    """Shared classification of device-string candidates for NP101 (values) and NP102 (checks)."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._roles: dict[cst.CSTNode, str] = {}
        self._maploc_dicts: set[cst.CSTNode] = set()
        self._guarded_nodes: set[cst.CSTNode] = set()
        self._guarded_blocks: set[cst.CSTNode] = set()
        self._guard_depth = 0
        # 'cuda' literal of torch.device('cuda', index) -> (the call, the index argument)
        self._device_calls: dict[cst.CSTNode, tuple[cst.Call, cst.Arg]] = {}
        self._cuda_calls = 0  # how many torch.cuda calls the visit is inside (their arguments may be kept)
        # device-type tables: their "cuda" element -> (the collection, the element); see _table_of
        self._tables: dict[cst.CSTNode, tuple[cst.CSTNode, cst.Element]] = {}
        self._positional: set[cst.CSTNode] = set()  # collections unpacked or indexed: pairs, not tables
        self._functions: list[cst.CSTNode] = []  # the functions the visit is inside
        self._table_names: dict[cst.CSTNode, str] = {}  # a table assigned to a name -> that name
        self._module: cst.Module | None = None

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

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        # `class TimerType(str, Enum): CUDA = "cuda"`: a member's value is what callers pass
        # (`TimerType("cuda")`, a config string), a name of the enum, not a device the program moves data to
        if not any(last_segment(b.value) in _ENUM_BASES or (self.context.qualname(b.value) or "").startswith("enum.")
                   for b in node.bases):
            return
        for statement in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
                        for part in (small.value, *children(small.value)):
                            self._mark(part, "skip")

    def visit_ConcatenatedString(self, node: cst.ConcatenatedString) -> None:
        self._mark(node.left, "skip")
        self._mark(node.right, "skip")

    def visit_Dict(self, node: cst.Dict) -> None:
        role = "skip" if node in self._maploc_dicts else "key"  # map_location keys name the *saved* device
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                # {"cuda": "nccl"}: NP501 rewrites key and value together (device_subjects.py)
                self._mark(element.key, "skip" if is_backend_map_entry(element) else role)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if last_segment(node.value) == "Literal":
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
        self._table_of(node)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._mark_elements(node, "container")
        self._table_of(node)

    def visit_Set(self, node: cst.Set) -> None:
        self._mark_elements(node, "container")
        self._table_of(node)

    # -- device-type tables ------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        self._module = node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        if type(node.value) in (cst.List, cst.Tuple, cst.Set):
            targets = [t.target for t in node.targets]
            if any(type(t) in (cst.Tuple, cst.List) for t in targets):
                self._positional.add(node.value)  # `a, b = "cuda", "cpu"`: a pair
            elif len(targets) == 1 and type(targets[0]) is cst.Name:
                self._table_names[node.value] = targets[0].value

    def visit_Return(self, node: cst.Return) -> None:
        if type(node.value) is cst.Tuple:
            self._positional.add(node.value)  # `return "cuda", "cpu"`: a pair the caller unpacks

    def visit_For(self, node: cst.For) -> None:
        self._positional.add(node.iter)  # `for device in ["cpu", "cuda"]:` each element is a device used in turn

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._positional.add(node.iter)

    def _table_of(self, node) -> None:
        """Record ``node`` as a table of device types: a literal holding the bare ``"cuda"`` and another
        device-type name (``["cuda", "xpu", "hpu"]``, ``dev in ("cuda", "mps")``, ``choices=["cpu", "cuda"]``),
        not unpacked or indexed (a pair of devices is two choices, not a table)."""
        if node in self._positional:
            return
        elements = [e for e in node.elements if type(e) is cst.Element]
        names = {string_value(e.value) for e in elements} & DEVICE_TYPE_NAMES
        if "cuda" not in names or len(names) < 2:
            return
        for element in elements:
            if string_value(element.value) == "cuda":
                self._tables[element.value] = (node, element)
                return

    def _table_fix(self, literal: cst.CSTNode):
        """(element, replacement) for the ``"cuda"`` of a device-type table: ``"neuron"`` added after it (the
        table keeps CUDA, as torch's tables keep it beside the PrivateUse1 name); False when the table holds
        ``"neuron"`` already or the code adds the PrivateUse1 name to it (it then holds ``"neuron"`` at run
        time); None when the name it is assigned to is indexed or iterated (a list of devices: renamed as before)."""
        collection, element = self._tables[literal]
        if any(type(e) is cst.Element and string_value(e.value) == "neuron" for e in collection.elements):
            return False
        if any(_calls_privateuse1_name(e) for e in collection.elements):
            return False
        name = self._table_names.get(collection)
        if name is not None and self._indexed(name):
            return None  # `DEVICES = ["cuda", "cpu"]` ... `DEVICES[0]`: devices, not a table (renamed as before)
        if name is not None and self._extended_with_privateuse1(name):
            return False
        comma = element.comma
        if isinstance(comma, cst.MaybeSentinel):
            comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        added = cst.Element(value=replace_string(literal, "neuron"), comma=element.comma)
        return element, cst.FlattenSentinel([element.with_changes(comma=comma), added])

    def _indexed(self, name: str) -> bool:
        """``name[...]`` is read or ``name`` iterated somewhere in the module (``DEVICES[0]``, ``for d in
        DEVICES:``): a list of devices used one by one, not a table."""
        if self._module is None:
            return False
        # the pass's one walk of the module (per_file.module_walk), not a walk of its own per table
        for n in module_walk(self.context, self._module).nodes:
            kind = type(n)
            used = n.value if kind is cst.Subscript else (n.iter if kind is cst.For or kind is cst.CompFor else None)
            if type(used) is cst.Name and used.value == name:
                return True
        return False

    def _extended_with_privateuse1(self, name: str) -> bool:
        """A statement of the enclosing function (or module) that reads ``name`` and calls
        ``torch._C._get_privateuse1_backend_name()`` (``supported.append(torch._C._get_privateuse1_backend_name())``)."""
        scope = self._functions[-1] if self._functions else self._module
        if scope is None:
            return False
        for node in walk(scope):
            if type(node) is cst.SimpleStatementLine and _calls_privateuse1_name(node) and any(
                    type(n) is cst.Name and n.value == name for n in walk(node)):
                return True
        return False

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

    def _in_cuda_call(self) -> bool:
        """Inside the arguments of a ``torch.cuda`` call (which may be kept whole: ``kept_arguments.py``)."""
        return self._cuda_calls > 0

    def leave_Call(self, original_node: cst.Call) -> None:
        if (self.context.qualname(original_node.func) or "").startswith("torch.cuda."):
            self._cuda_calls -= 1

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (self.context.qualname(func) or "").startswith("torch.cuda."):
            self._cuda_calls += 1
        last = last_segment(func)
        if isinstance(func, cst.Name) and func.value in NAME_ARG_FUNCS:
            for arg in node.args:
                self._mark(arg.value, "skip")
        elif isinstance(func, cst.Attribute) and func.attr.value in LOG_METHODS:
            receiver = (dotted_name(func.value) or "").lower()
            if "log" in receiver or receiver == "warnings":
                for arg in node.args:
                    self._mark(arg.value, "skip")
        elif isinstance(func, cst.Attribute) and func.attr.value in ("startswith", "endswith"):
            # a prefix test of this process's device, or of data naming another's (device_subjects.py)
            role = "check" if names_a_device(func.value) else "skip"
            for arg in node.args:
                self._mark(arg.value, role)
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
            new_first = first.with_changes(value="neuron" + first.value[4:])
            return literal.with_changes(parts=[new_first, *literal.parts[1:]])
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


def _calls_privateuse1_name(root: cst.CSTNode) -> bool:
    return any(type(n) is cst.Call and last_segment(n.func) == PRIVATEUSE1_NAME_CALL for n in walk(root))


def _comparisons(node: cst.CSTNode):
    kind = type(node)  # exact types: LibCST's node classes have no subclasses
    if kind is cst.Comparison:
        yield node
    if kind is cst.BooleanOperation or kind is cst.UnaryOperation or kind is cst.Comparison:
        for child in children(node):
            yield from _comparisons(child)


def _operands(node: cst.Comparison):
    yield node.left
    for target in node.comparisons:
        yield target.comparator
        if isinstance(target.comparator, (cst.List, cst.Tuple, cst.Set)):
            for element in target.comparator.elements:
                yield element.value
