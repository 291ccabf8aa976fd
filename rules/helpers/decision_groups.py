"""Decision groups: the device tests and device values of a file that the program's data and control flow
tie together, so that a rewrite flips them together or keeps them together (issue 34).

A group holds:
- the CUDA tests (``torch.cuda.is_available()``, ``x.is_cuda``, ``device.type == "cuda"``, a name holding
  ``torch.cuda.is_available()``) whose guarded code shares state: a name or field written under one and read
  or written under another (``fmt += " max mem..."`` under one test, ``fmt.format(memory=...)`` under the
  next; ``self.begin`` set in ``__enter__``, read in ``report``), names resolved by Python's scopes
  (``helpers/scopes.py``) and fields by their class;
- a device value and the tests of it: a ``"cuda"`` returned or assigned (``return "cuda" if
  torch.cuda.is_available() else "cpu"``), followed through names, parameters and calls of the file's own
  functions, with every comparison, ``assert`` or membership test of it and the tests that choose it;
- a test and the fixes in the code it guards.

``settle(context, reports)`` (called by the engine's fold step once the rules of a pass have reported)
makes each group one decision: when one of its fixes is not applied, none is (a kept test keeps the
code it guards unedited, its findings reported there, not fixed); when one is unsafe, all are; and a
test whose guarded code holds an unsafe fix (``torch.cuda.set_device`` dropped) is unsafe too. The
groups are built once per file and pass, only for files with at least one device test.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.names import dotted_name, source_of, walk
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.helpers.device_flags import (
    GPU_ACCELERATOR_NAMES, assigned_targets, enumerates_devices, flag_polarity, is_flag_value)
from neuron_port.rules.helpers.kept_values import KEPT_VALUES, seed_kept
from neuron_port.rules.helpers.per_file import ANALYSES, PerFileAnalysis, module_walk
from neuron_port.rules.helpers.ranks_guards import regions_where
from neuron_port.rules.helpers.scopes import Scopes
from neuron_port.rules.helpers.unpacking import unpacked

_ASSIGNMENTS = (cst.Assign, cst.AugAssign, cst.AnnAssign)
_SAFE, _UNSAFE, _KEPT = 0, 1, 2  # how far a member's fix gets: applied, only with --unsafe-fixes, never


def _is_cuda_value(node: cst.CSTNode) -> bool:
    value = string_value(node)
    return value is not None and (value == "cuda" or value.startswith("cuda:"))


def _is_device_choice(node: cst.CSTNode) -> bool:  # a "cuda" value, or "gpu" (device_flags.py)
    return _is_cuda_value(node) or string_value(node) in GPU_ACCELERATOR_NAMES


class _Unions:
    def __init__(self) -> None:
        self.up: dict[object, object] = {}

    def find(self, item: object) -> object:
        while self.up.get(item, item) is not item:
            item = self.up[item]
        return item

    def join(self, a: object, b: object) -> None:
        self.up.setdefault(a, a)
        self.up.setdefault(b, b)
        self.up[self.find(a)] = self.find(b)


class DecisionGroups:
    def __init__(self, context, module: cst.Module) -> None:
        from neuron_port.rules.no_port.cuda_only_guards import on_cuda_polarity

        self.module = module
        self.context = context
        self.member_group: dict[cst.CSTNode, object] = {}  # every node of a test or value -> its group
        self.cuda_literals_of = lambda value: set()  # an expression -> the "cuda" literals its value may hold
        self.member_test: dict[cst.CSTNode, cst.CSTNode] = {}  # every node of a test -> the test (for messages)
        self.bodies: dict[object, list[cst.CSTNode]] = {}  # group -> the code its tests guard
        nodes = module_walk(context, module).nodes
        # flags: a name or field assigned a device test, or an and / or / not of tests (`use_cuda =
        # torch.cuda.is_available()`, `cuda = True if torch.cuda.is_available() else False`, `self.is_cuda =
        # device.type == "cuda" and torch.cuda.is_available()`): a read of it is the same decision
        flags: dict[str, tuple[Optional[bool], list[cst.CSTNode]]] = {}  # dotted name -> (polarity, tests)
        tests: list[cst.CSTNode] = []
        literals: list[cst.SimpleString] = []
        assigns: list[tuple] = []  # (target, value) of each name assigned
        for node in nodes:  # one pass (exact types: LibCST's node classes have no subclasses)
            kind = type(node)
            if kind is cst.SimpleString:
                if _is_device_choice(node):
                    literals.append(node)
            elif on_cuda_polarity(node) is not None:
                tests.append(node)
            elif kind is cst.Assign and len(node.targets) == 1:
                # `use_cuda = ...`, and each name of an unpacking (`_, is_cuda = *q.shape, q.is_cuda`)
                assigns += [(target, value) for target, value in unpacked(node.targets[0].target, node.value)
                            if type(target) in (cst.Name, cst.Attribute)]
        if not tests:
            if literals:  # no test to group, but a kept device value may still hold one of these
                self._is_test = lambda node: False
                self._scopes_made = None
                self._device_values(nodes, _Unions())
            return
        for target, value in assigns:
            if not is_flag_value(value, on_cuda_polarity):
                continue  # `device = "cuda" if torch.cuda.is_available() else "cpu"`: a value, not a flag
            held = [n for n in walk(value) if on_cuda_polarity(n) is not None]
            name = dotted_name(target)
            if held and name is not None:
                found = flags.setdefault(name, (flag_polarity(value, on_cuda_polarity), []))
                if found[0] != flag_polarity(value, on_cuda_polarity):
                    flags[name] = (None, found[1])  # assigned tests of both senses: a member, not a guard
                flags[name][1].extend(held)
                if on_cuda_polarity(target) is not None:  # `self.is_cuda = ...`: its NP104 is this decision
                    flags[name][1].append(target)
        reads: dict[cst.CSTNode, list[cst.CSTNode]] = {}  # a read of a flag -> the tests it holds
        if flags:
            assigned = assigned_targets(nodes)
            for n in nodes:
                kind = type(n)
                if (kind is cst.Name or kind is cst.Attribute) and n not in assigned and (
                        kind is cst.Attribute or context.is_reference(n)):
                    name = dotted_name(n)
                    if name in flags:
                        reads[n] = flags[name][1]
            tests += [n for n in reads if n not in tests]

        def polarity(node: cst.BaseExpression) -> Optional[bool]:
            if node in reads:
                return flags[dotted_name(node)][0]
            return on_cuda_polarity(node)

        self._is_test = lambda node: node in reads or on_cuda_polarity(node) is not None
        regions: dict[cst.CSTNode, list[cst.CSTNode]] = {}
        for atom, region in regions_where(module, polarity, nodes):
            regions.setdefault(atom, []).extend(region)
        unions = _Unions()
        for atom in tests:
            unions.join(atom, atom)
        for read, held in reads.items():
            for test in held:
                unions.join(read, test)
        self._scopes_made: Optional[Scopes] = None
        if len(regions) > 1:  # state is shared between two guarded regions at least
            self._share_state(regions, unions)
        if literals:
            self._device_values(nodes, unions)
        for atom in tests:
            group = unions.find(atom)
            for node in walk(atom):
                self.member_group[node] = group
                self.member_test[node] = atom
            self.bodies.setdefault(group, []).extend(regions.get(atom, ()))
        for literal in literals:
            if literal in unions.up:
                self.member_group.setdefault(literal, unions.find(literal))
        self._legacy_aliases(context, module, unions)

    def _legacy_aliases(self, context, module: cst.Module, unions: _Unions) -> None:
        """A legacy tensor-type alias chosen by a flag (``Tensor = torch.cuda.FloatTensor if cuda else
        torch.FloatTensor``) is a device choice of that flag: the alias line and every use NP105 ports join
        the flag's group (device_placement/legacy_aliases.py)."""
        from neuron_port.rules.device_placement.legacy_aliases import legacy_aliases

        for alias in legacy_aliases(context, module).aliases:
            if alias.flag is None or alias.flag not in unions.up:
                continue
            group = unions.find(alias.flag)
            for node in alias.members():
                self.member_group.setdefault(node, group)
                self.member_test.setdefault(node, alias.flag)

    # -- tests of one predicate over shared state -----------------------------------------------------
    @property
    def _scopes(self) -> Scopes:
        """The module's scopes, made the first time a name is resolved (one walk)."""
        if self._scopes_made is None:
            self._scopes_made = Scopes(self.module)
        return self._scopes_made

    def _key(self, node: cst.CSTNode) -> Optional[tuple]:
        """What a name or field refers to: a name's binding, ``self.x``'s class, else the dotted name."""
        if type(node) is cst.Name:
            return ("name", self._scopes.binder(node), node.value)
        if type(node) is cst.Attribute:
            head = node.value
            if type(head) is cst.Name and head.value in ("self", "cls"):
                return ("field", self._scopes.class_of.get(head), node.attr.value)
            dotted = dotted_name(node)
            return ("dotted", dotted) if dotted is not None else None
        if type(node) is cst.Subscript:  # `stats["peak"] = ...` writes into `stats`
            return self._key(node.value)
        return None

    def _share_state(self, regions: dict, unions: _Unions) -> None:
        written: dict[tuple, list[cst.CSTNode]] = {}
        touched: dict[tuple, list[cst.CSTNode]] = {}
        for atom, region in regions.items():
            for root in region:
                for node in walk(root):
                    kind = type(node)
                    if kind in _ASSIGNMENTS:
                        targets = [t.target for t in node.targets] if kind is cst.Assign else [node.target]
                        for target in targets:
                            for part in (target.elements if type(target) in (cst.Tuple, cst.List) else [target]):
                                key = self._key(getattr(part, "value", part) if type(part) is cst.Element else part)
                                if key is not None:
                                    written.setdefault(key, []).append(atom)
                    elif ((kind is cst.Name or kind is cst.Attribute) and self.context.is_reference(node)
                          and self.context.qualname(node) is None):
                        key = self._key(node)
                        if key is not None:
                            touched.setdefault(key, []).append(atom)
        for key, writers in written.items():
            for other in (*writers, *touched.get(key, ())):
                unions.join(writers[0], other)

    # -- a device value and the tests of it ------------------------------------------------------------
    def _device_values(self, nodes, unions: _Unions) -> None:
        """``"cuda"`` values followed through assignments, returns and the file's own calls (a few rounds:
        each follows one more step), then the comparisons that test a value holding one."""
        functions = {n.name.value: n for n in nodes if type(n) is cst.FunctionDef}
        held: dict[object, set] = {}  # a name's key, or ("returns", function) -> the literals it holds

        def origins(value: cst.BaseExpression) -> set:
            kind = type(value)
            if kind is cst.SimpleString:
                return {value} if _is_device_choice(value) else set()
            if kind is cst.IfExp:  # `"cuda" if torch.cuda.is_available() else "cpu"`: the test chooses it
                found = origins(value.body) | origins(value.orelse)
                for atom in (n for n in walk(value.test) if self._is_test(n)):
                    for literal in found:
                        unions.join(atom, literal)
                return found
            if kind is cst.Call:
                name = dotted_name(value.func)
                if name in ("torch.device", "str") and value.args:
                    return origins(value.args[0].value)
                callee = value.func.attr.value if type(value.func) is cst.Attribute and dotted_name(
                    value.func.value) in ("self", "cls") else name
                return set(held.get(("returns", callee), ()))
            if kind is cst.Attribute and value.attr.value == "type":  # `device.type`
                return origins(value.value) | set(held.get(self._key(value) or (), ()))
            if kind is cst.Name or kind is cst.Attribute:
                return set(held.get(self._key(value) or (), ()))
            return set()

        def hold(key: object, found: set) -> bool:
            if not found or key is None:
                return False
            known = held.setdefault(key, set())
            grown = not found <= known
            known |= found
            return grown

        for _ in range(4):
            grown = False
            for node in nodes:
                kind = type(node)
                if (kind is cst.Assign or kind is cst.AnnAssign) and node.value is not None:
                    for whole in ([t.target for t in node.targets] if kind is cst.Assign else [node.target]):
                        for target, value in unpacked(whole, node.value):  # `dev, n = "cuda", 2`: item by item
                            if target is not None:
                                grown |= hold(self._key(target), origins(value))
                elif kind is cst.FunctionDef:
                    for returned in self._scopes.returns.get(node, ()):  # from the scopes' one walk
                        grown |= hold(("returns", node.name.value), origins(returned.value))
                elif kind is cst.Call and type(node.func) in (cst.Name, cst.Attribute):
                    grown |= self._pass_arguments(node, functions, origins, hold)
            if not grown:
                break
        for node in nodes:
            if type(node) is cst.Comparison and self._is_test(node) and enumerates_devices(node):
                for literal in origins(node.left):
                    unions.join(node, literal)
        self.cuda_literals_of = origins

    def _pass_arguments(self, call: cst.Call, functions: dict, origins, hold) -> bool:
        """A value passed to one of the file's functions is held by the parameter it lands in."""
        method = type(call.func) is cst.Attribute
        definition = functions.get(call.func.attr.value if method else call.func.value)
        if definition is None:
            return False
        params = definition.params
        positional = [p.name.value for p in (*params.posonly_params, *params.params)][1 if method else 0:]
        grown = False
        for index, arg in enumerate(a for a in call.args if not a.star):
            name = arg.keyword.value if arg.keyword is not None else (
                positional[index] if index < len(positional) else None)
            if name is not None:
                grown |= hold(("name", definition, name), origins(arg.value))
        return grown


# The decision groups of a module, once per file and pass.
decision_groups = PerFileAnalysis(DecisionGroups)


def settle(context, reports: list) -> list:
    """``reports`` (the pass's violations) with each group made one decision (module docstring)."""
    if all(r.replacement is not None and r.safety == "safe" for r in reports):
        return reports  # every fix applied: no verdict to share (most files; the groups are not built)
    module = _analysed_module(context)
    if module is None:
        return reports
    groups = decision_groups(context, module)
    kept_values = context.shared.get(KEPT_VALUES, [])
    if not groups.member_group and not kept_values:
        return reports
    inside: dict[cst.CSTNode, list[object]] = {}  # a node of guarded code -> the groups guarding it
    for group, body in groups.bodies.items():
        for root in body:
            for node in walk(root):
                inside.setdefault(node, []).append(group)
    level: dict[object, int] = {}
    why: dict[object, str] = {}
    kept_literals = seed_kept(kept_values, groups, inside, level, why, _KEPT)
    reports = list(reports)
    for index, report in enumerate(reports):  # the literal's own rename, in no group
        cause = next((kept_literals[n] for n in walk(report.node) if n in kept_literals), None)
        if report.replacement is not None and cause is not None:
            reports[index] = _downgraded(report, _KEPT, cause)
    for _ in range(4):  # a group's verdict can reach the code another group guards: until nothing changes
        for report in reports:
            member = groups.member_group.get(report.node)
            found = _level(context, report, member is not None)
            if found is None:
                continue
            for group in ([member] if member is not None else []) + inside.get(report.node, []):
                if found > level.get(group, _SAFE):
                    level[group] = found
                    why[group] = source_of(groups.member_test.get(report.node, report.node))
        changed = False
        for index, report in enumerate(reports):
            if report.replacement is None:
                continue
            member = groups.member_group.get(report.node)
            owners = ([member] if member is not None else []) + inside.get(report.node, [])
            worst = max((level.get(g, _SAFE) for g in owners), default=_SAFE)
            own = _level(context, report, True)
            if worst > own:
                group = next(g for g in owners if level.get(g, _SAFE) == worst)
                reports[index] = _downgraded(report, worst, why[group])
                changed = True
        if not changed:
            break
    return reports


def _level(context, report, is_member: bool) -> Optional[int]:
    """How far ``report``'s fix gets, as far as its group is concerned (None: it does not count). In the
    code a test guards, a fix counts only where, not applied, it leaves CUDA's code (a ``torch.cuda``
    reference, a ``"cuda"`` / ``"nccl"`` value) that would run on Trainium were the test flipped: a
    ``torch.backends.cudnn`` flag left as it is runs anywhere."""
    if not is_member and not _leaves_cuda(context, report.node):
        return None
    if report.replacement is not None:
        return _SAFE if report.safety == "safe" else _UNSAFE
    return _KEPT


def _leaves_cuda(context, node: cst.CSTNode) -> bool:
    for child in walk(node):
        kind = type(child)
        if kind is cst.SimpleString:
            value = string_value(child)
            if value is not None and (value == "nccl" or _is_cuda_value(child)):
                return True
        elif (kind is cst.Attribute or kind is cst.Name) and (context.qualname(child) or "").startswith("torch.cuda."):
            return True
    return False


_MESSAGE_ROOM = 160  # a finding's message stays one short line (tests/rules/test_messages.py)


def _downgraded(report, worst: int, cause: str):
    """``report`` taking its group's verdict, its message naming the member that decided it."""
    lines = cause.strip().splitlines()
    cause = lines[0] if lines else cause
    shown = cause if len(cause) <= 30 else cause[:27] + "..."
    if worst == _KEPT:
        notes = (f" (left as it is: tied to `{shown}`, which is kept)", " (left as it is: tied to a kept test)")
        changes = dict(replacement=None, safety=None, effort=report.effort or report.rule.EFFORT)
    else:
        notes = (f" (unsafe: tied to `{shown}`, whose fix is unsafe)", " (unsafe: tied to an unsafe fix)")
        changes = dict(safety="unsafe")
    note = next((n for n in notes if len(report.message) + len(n) <= _MESSAGE_ROOM), notes[-1])
    return dataclasses.replace(report, message=report.message + note, **changes)


def _analysed_module(context) -> Optional[cst.Module]:
    """The module node the analyses of this pass were built from (None when no rule analysed the file:
    then no rule decided a device test in it either)."""
    for analysis in context.shared.get(ANALYSES, {}).values():
        module = getattr(analysis, "module", None)
        if isinstance(module, cst.Module):
            return module
    return None
