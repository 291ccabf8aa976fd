"""Ranks: whether an expression is the process's rank used as a device index, and the per-file decision
that the rules rewriting rank devices share.

Under torchrun TorchNeuron gives each process one NeuronCore (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html), so a
device indexed by the rank becomes the plain ``neuron`` (index ``0`` where an integer is required:
``device_ids=[0]``, ``device_id=0``, ``torch.neuron.memory_allocated(0)``). One file writes its rank
devices in many ways, each owned by one rule: ``f"cuda:{rank}"`` and ``torch.device("cuda", rank)``
(NP101), ``.cuda(rank)`` (NP103), ``map_location=lambda s, l: s.cuda(rank)`` (NP106), ``.to(rank)``,
``torch.device(rank)``, ``device=rank`` and FSDP's ``device_id=rank`` (NP107), ``torch.cuda.<api>(rank)``
(NP201), ``set_device(rank)`` (NP502) and ``device_ids=[rank]`` / ``output_device=rank`` (NP503).
Rewriting some of them and not the others puts the tensors of one process on two devices
(``neuron:1`` next to ``neuron:0``), so the decision is taken per file, here, in one place:

- ``rank_devices(context, module)`` is computed once per file and pass, by the first rule that asks in
  its ``leave_Module`` (the whole tree and every import alias are known by then), and cached for the
  others;
- it knows the file's rank names (``is_rank``: the naming rule below plus the file's aliases of a rank),
  counts the rank-device sites and lists the *blockers*: rank devices that no rule can rewrite safely
  (``set_device(rank)`` inside an expression, or in a file that does not call ``init_process_group``;
  ``device_ids=[rank, ...]`` with several devices; ``storage.cuda(rank, ...)`` with other arguments;
  ``.cuda(rank)`` in a file that defines its own ``cuda`` method);
- with no blocker every rank fix is safe; with one, every rank fix of the file is unsafe (``safety`` and
  ``note``), so a default run changes none of them, and NP107 reports the blocker once.

The naming rule (``is_rank_expression``): a rank is a name or attribute whose last segment is ``rank``,
``local_rank``, ``*_local_rank`` (``ddp_local_rank``), ``gpu``, ``gpu_id`` or ``device_id`` (``args.gpu``,
``self.gpu_id``), a ``LOCAL_RANK`` / ``RANK`` read from ``os.environ``, ``dist.get_rank()``, ``int()`` or
``str()`` of one, or ``<rank> % n``; a name bound by a ``for`` loop or comprehension is not. The file
analysis adds its aliases: a name (or ``self.x``) every assignment of which in the file is a rank, and
that is no function parameter (``device = int(os.environ["LOCAL_RANK"])``).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.device_placement.common import storage_lambda_call
from neuron_port.rules.device_placement.rank_device_names import holds_rank_device
from neuron_port.rules.device_placement.tables import (
    CUDA_API_DEVICE_ARGS,
    FORMAT_TEMPLATE_RE,
    PERCENT_TEMPLATE_RE,
    PLUS_TEMPLATE,
    RANK_CALLS,
    RANK_ENV_VARS,
    RANK_NAME_RE,
)
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import dotted_name, last_segment, loop_target_names, source_of, walk
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.helpers.statements import statement_without
from neuron_port.rules.helpers.per_file import PerFileAnalysis, module_walk

# Qualified names the analysis needs (the NP5xx tables hold the same; kept here so this module imports
# no other family).
SET_DEVICE_QUALNAMES = frozenset({"torch.cuda.set_device", "torch.neuron.set_device", "torch.accelerator.set_device_index"})
DDP_QUALNAMES = frozenset(
    {"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"}
)
FSDP_NAMES = frozenset({"FullyShardedDataParallel", "FSDP"})
# Keywords whose rank value is an integer device slot (index 0 on Trainium), by callee (last segment).
INDEX_KEYWORD_CALLEES = {"device_id": FSDP_NAMES | {"init_process_group"}}


def is_rank_expression(node: cst.BaseExpression, loop_names: frozenset[str] | set[str] = frozenset(),
                       aliases: frozenset[str] | set[str] = frozenset()) -> bool:
    """True for a process's rank used as a device index: ``local_rank``, ``ddp_local_rank``, ``args.gpu``,
    ``self.gpu_id``, ``int(os.environ["LOCAL_RANK"])``, ``os.environ.get("LOCAL_RANK", 0)``,
    ``dist.get_rank()``, ``rank % torch.cuda.device_count()``, or one of ``aliases`` (dotted names).

    A plain name bound by a ``for`` loop or comprehension (``for gpu in range(n)``) iterates over
    devices and is not a rank.
    """
    if isinstance(node, cst.Name):
        return node.value not in loop_names and (bool(RANK_NAME_RE.match(node.value)) or node.value in aliases)
    if isinstance(node, cst.Attribute):
        return bool(RANK_NAME_RE.match(node.attr.value)) or dotted_name(node) in aliases
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
        return not isinstance(node.left, cst.BaseString) and is_rank_expression(node.left, loop_names, aliases)
    if isinstance(node, cst.Call):
        func = node.func
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if isinstance(func, cst.Name) and func.value in ("int", "str") and len(node.args) == 1 and positional:
            return is_rank_expression(positional[0].value, loop_names, aliases)
        if last_segment(func) in RANK_CALLS:
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


# The node types the scan reads (a type lookup per node: the scan visits every node of large files).
_SCANNED = frozenset({cst.For, cst.CompFor, cst.Param, cst.Assign, cst.AnnAssign, cst.AugAssign, cst.FunctionDef,
                      cst.Call, cst.FormattedString, cst.BinaryOperation, cst.Lambda, cst.Module, cst.IndentedBlock,
                      cst.SimpleStatementSuite})


class Blocker:
    """A rank device no rule rewrites safely: ``node`` (reported by its own rule), ``why`` in words."""

    def __init__(self, node: cst.CSTNode, why: str) -> None:
        self.node = node
        self.why = why
        self.what = source_of(node).strip()
        if len(self.what) > 60:
            self.what = self.what[:57] + "..."


class RankDevices:
    """The rank devices of one file (see the module docstring). Use ``rank_devices()``."""

    def __init__(self, context, module: cst.Module) -> None:
        self.module = module
        self.context = context
        self.loop_names: set[str] = set()
        self.aliases: set[str] = set()
        self.init_process_group = False
        self.defines_cuda = False
        self.sites = 0
        self.blockers: list[Blocker] = []
        # set_device(rank) call -> (node to replace, replacement) for NP502
        self.set_device_fixes: dict[cst.Call, tuple[cst.CSTNode, cst.CSTNode]] = {}
        self._index_required: set[cst.CSTNode] = set()
        self._index_names: set[str] = set()  # names passed as device_id= of init_process_group
        self._rank_templates: set = set()  # the rank's devices written as templates (``f"cuda:{rank}"``)
        self._statements: dict = {}
        self._scan(module)

    # -- the questions the rules ask --------------------------------------------------------------
    def is_rank(self, node: cst.BaseExpression) -> bool:
        return is_rank_expression(node, self.loop_names, self.aliases)

    @property
    def consistent(self) -> bool:
        """True when every rank device of the file can be rewritten safely."""
        return not self.blockers

    @property
    def safety(self) -> str:
        """The safety of every rank fix in this file."""
        return "safe" if self.consistent else "unsafe"

    def note(self) -> str:
        """What a rank fix's message adds when the file has a blocker ("" otherwise)."""
        if self.consistent:
            return ""
        return " (unsafe: rank devices change together or not at all, NP107)"

    def needs_index(self, node: cst.CSTNode) -> bool:
        """The node is (inside) a ``device_id=`` of ``init_process_group``, or the value of a name passed
        there (``device = torch.device("cuda", local_rank)`` ... ``device_id=device``), which needs a device
        with an index: ``torch.device("neuron", 0)``, not ``torch.device("neuron")`` (PyTorch rejects a
        device_id without one)."""
        return node in self._index_required

    # -- the scan ---------------------------------------------------------------------------------
    def _scan(self, module: cst.Module) -> None:
        params: set[str] = set()
        assigned: dict[str, list[Optional[cst.BaseExpression]]] = {}
        calls: list[cst.Call] = []
        templates: list[tuple[cst.CSTNode, cst.BaseExpression]] = []
        lambdas: list[cst.Lambda] = []
        # a call that is a whole small statement -> (its line or suite, the small statement, its block)
        statements: dict[cst.Call, tuple[cst.CSTNode, cst.BaseSmallStatement, cst.CSTNode]] = {}
        for node in module_walk(self.context, module).nodes:  # the walk other analyses of the pass share
            kind = type(node)
            if kind not in _SCANNED:
                continue
            if kind is cst.For or kind is cst.CompFor:
                self.loop_names |= loop_target_names(node.target)
            elif kind is cst.Param:
                params.add(node.name.value)
            elif kind is cst.Assign:
                for target in node.targets:
                    name = dotted_name(target.target)
                    if name is not None:
                        assigned.setdefault(name, []).append(node.value)
            elif kind is cst.AnnAssign or kind is cst.AugAssign:
                name = dotted_name(node.target)
                if name is not None:
                    assigned.setdefault(name, []).append(node.value if kind is cst.AnnAssign else None)
            elif kind is cst.FunctionDef:
                self.defines_cuda = self.defines_cuda or node.name.value == "cuda"
            elif kind is cst.Call:
                calls.append(node)
                if last_segment(node.func) == "init_process_group":
                    self.init_process_group = True
                _template_call(node, templates)
            elif kind is cst.FormattedString:
                _template_fstring(node, templates)
            elif kind is cst.BinaryOperation:
                _template_binop(node, templates)
            elif kind is cst.Lambda:
                lambdas.append(node)
            elif kind is cst.Module or kind is cst.IndentedBlock:
                for statement in node.body:
                    if isinstance(statement, cst.SimpleStatementLine):
                        _record_statements(statement, node, statements)
            elif kind is cst.SimpleStatementSuite:
                _record_statements(node, node, statements)
        self._aliases(assigned, params)
        self._statements = statements
        if self.context.target != "neuron":
            return  # the accelerator target keeps rank indices (what CUDA needs)
        rank_templates = set()
        for node, index in templates:
            if self.is_rank(index):
                self.sites += 1
                rank_templates.add(node)
        self._rank_templates = rank_templates
        for node in lambdas:
            self._storage_lambda(node)
        rank_set_devices = []
        for call in calls:
            if self._call(call):
                rank_set_devices.append(call)
        self._set_device_fixes(rank_set_devices, statements)
        for name in self._index_names:
            for value in assigned.get(name, ()):
                if value is not None:
                    self._index_required.update(walk(value))

    def _aliases(self, assigned: dict[str, list[Optional[cst.BaseExpression]]], params: set[str]) -> None:
        changed = True
        while changed:
            changed = False
            for name, values in assigned.items():
                if name in self.aliases or ("." not in name and (name in params or name in self.loop_names)):
                    continue
                if all(v is not None and is_rank_expression(v, self.loop_names, self.aliases) for v in values):
                    self.aliases.add(name)
                    changed = True

    def sets_rank_device(self, node: cst.BaseExpression, call: Optional[cst.Call] = None) -> bool:
        """``node``, the argument of ``call`` (a ``set_device``), is a rank or holds a rank's device."""
        return self.is_rank(node) or holds_rank_device(node, call, self._statements, self._rank_templates)

    def _block(self, node: cst.CSTNode, why: str) -> None:
        self.blockers.append(Blocker(node, why))

    def _storage_lambda(self, node: cst.Lambda) -> None:
        call = storage_lambda_call(node)
        if call is None:
            return
        device = arg_named(call, "device", 0)
        if device is None or device.star or not self.is_rank(device.value):
            return
        self.sites += 1
        if len(call.args) > 1:
            self._block(node, "has arguments besides the device, so NP106 does not rewrite it")

    def _call(self, call: cst.Call) -> bool:
        """Count the rank sites of one call; True for ``set_device(<rank>)``."""
        qualname = self.context.qualname(call.func) or ""
        last = last_segment(call.func)
        if qualname in SET_DEVICE_QUALNAMES:
            arg = arg_named(call, "device", 0)
            if arg is not None and not arg.star and self.sets_rank_device(arg.value, call):
                self.sites += 1
                return True
            return False
        if qualname in DDP_QUALNAMES or last == "DistributedDataParallel":
            ids = arg_named(call, "device_ids", 1)
            if ids is not None and isinstance(ids.value, (cst.List, cst.Tuple)):
                ranks = [e for e in ids.value.elements if isinstance(e, cst.Element) and self.is_rank(e.value)]
                if ranks:
                    self.sites += 1
                    if len(ids.value.elements) > 1:
                        self._block(call, "puts one process on several devices")
            output = arg_named(call, "output_device", 2)
            if output is not None and self.is_rank(output.value):
                self.sites += 1
            return False
        if last in ("to", "cuda") and isinstance(call.func, cst.Attribute) and not qualname.startswith("torch"):
            device = arg_named(call, "device", 0)
            if device is not None and not device.star and self.is_rank(device.value):
                self.sites += 1
                if last == "cuda" and self.defines_cuda:
                    self._block(call, "may call the `cuda` method this file defines, so NP103's fix is unsafe")
            return False
        for arg in call.args:
            if arg.star or not self.is_rank(arg.value):
                continue
            keyword = arg.keyword.value if arg.keyword is not None else None
            if qualname == "torch.device" or keyword == "device" or (
                    qualname.startswith("torch.cuda.") and qualname[len("torch.cuda."):] in CUDA_API_DEVICE_ARGS):
                self.sites += 1
            elif keyword in INDEX_KEYWORD_CALLEES and last in INDEX_KEYWORD_CALLEES[keyword]:
                self.sites += 1
        if last == "init_process_group":
            device_id = arg_named(call, "device_id")
            if device_id is not None:
                self._index_required.update(walk(device_id.value))
                name = dotted_name(device_id.value)
                if name is not None:  # device_id=device: the device it names needs its index too
                    self._index_names.add(name)
        return False

    def _set_device_fixes(self, calls: list[cst.Call], statements) -> None:
        """How NP502 removes each ``set_device(<rank>)``: the statement goes (``pass`` when its block
        would be left empty); one inside an expression cannot go."""
        by_block: dict[cst.CSTNode, list[tuple[cst.Call, cst.CSTNode, cst.BaseSmallStatement]]] = {}
        for call in calls:
            entry = statements.get(call)
            if entry is None:
                self._block(call, "is not a statement of its own, so NP502 cannot remove it")
                continue
            owner, small, block = entry
            by_block.setdefault(block, []).append((call, owner, small))
            if not self.init_process_group:
                self._block(call, "is in a file without init_process_group, so removing it is unsafe")
        for block, entries in by_block.items():
            body = block.body if isinstance(block, (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite)) else ()
            whole_lines = [owner for _, owner, _ in entries
                           if isinstance(owner, cst.SimpleStatementLine) and len(owner.body) == 1]
            empties = len(set(whole_lines)) == len(body)  # every statement of the block would go
            for call, owner, small in entries:
                if isinstance(owner, cst.SimpleStatementLine) and len(owner.body) == 1:
                    if empties and owner is whole_lines[0]:
                        replacement: cst.CSTNode = owner.with_changes(body=[cst.Pass()])
                    else:
                        replacement = cst.RemoveFromParent()
                    self.set_device_fixes[call] = (owner, replacement)
                else:
                    new_owner = statement_without(owner, small)  # type: ignore[arg-type]
                    if isinstance(new_owner, cst.RemovalSentinel):
                        new_owner = cst.RemoveFromParent()
                    self.set_device_fixes[call] = (owner, new_owner)


def _record_statements(owner, block, statements) -> None:
    for small in owner.body:
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            statements[small.value] = (owner, small, block)


def kind_rank_fstring(node: cst.FormattedString) -> Optional[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """``f"{device_type}:{index}"``: (the device-type expression, the index expression), else None."""
    parts = node.parts
    if (len(parts) == 3 and isinstance(parts[0], cst.FormattedStringExpression)
            and isinstance(parts[1], cst.FormattedStringText) and parts[1].value == ":"
            and isinstance(parts[2], cst.FormattedStringExpression)
            and parts[0].conversion is None and parts[0].format_spec is None
            and parts[2].conversion is None and parts[2].format_spec is None):
        return parts[0].expression, parts[2].expression
    return None


def _template_fstring(node: cst.FormattedString, out: list) -> None:
    parts = node.parts
    kind_rank = kind_rank_fstring(node)
    if kind_rank is not None and not is_rank_expression(kind_rank[0]):
        out.append((node, kind_rank[1]))
    if (len(parts) == 2 and isinstance(parts[0], cst.FormattedStringText) and parts[0].value == PLUS_TEMPLATE
            and isinstance(parts[1], cst.FormattedStringExpression)):
        out.append((node, parts[1].expression))


def _template_binop(node: cst.BinaryOperation, out: list) -> None:
    value = string_value(node.left) if isinstance(node.left, cst.SimpleString) else None
    if value is None:
        return
    right = node.right
    if isinstance(right, cst.Tuple) and len(right.elements) == 1:
        right = right.elements[0].value
    if (isinstance(node.operator, cst.Modulo) and PERCENT_TEMPLATE_RE.match(value)) or (
        isinstance(node.operator, cst.Add) and value == PLUS_TEMPLATE
    ):
        out.append((node, right))


def _template_call(node: cst.Call, out: list) -> None:
    func = node.func
    if (isinstance(func, cst.Attribute) and func.attr.value == "format" and isinstance(func.value, cst.SimpleString)
            and FORMAT_TEMPLATE_RE.match(string_value(func.value) or "") and len(node.args) == 1):
        out.append((node, node.args[0].value))


# The rank-device analysis of a module, once per file and pass.
rank_devices = PerFileAnalysis(RankDevices)
