"""Device tests whose value leaves the test: where a flipped ``x.is_cuda`` is decided when it is not the
test of an ``if`` but a value (``use_fused = x.is_cuda and HAS_TRITON``, ``ok &= t.is_cuda``,
``return x.is_cuda``, ``helper(x.is_cuda)``).

A fix that flips such a test changes whatever the value decides later, so the value is followed through
the file: a name it is assigned (or ``&=``-ed) to, plain or an attribute (``self.use_fused``), stands for
the test wherever it is read; a function that returns it stands for it wherever it is called; passed to
a function or class of the file, it is held by the parameter it lands in; any other call it is passed to
must be portable (``rules/helpers/portable.py``). The flip is unsafe when any place the value
reaches decides code not known to run on Trainium, and when the value goes where the file cannot see:
stored into a subscript or tuple, or returned by a function no code of the file calls (its callers are
in other files).
"""

from __future__ import annotations

from typing import Callable, Iterator, Optional

import libcst as cst

from neuron_port.rules.helpers.names import code_children, dotted_name, source_of
from neuron_port.rules.helpers.ranks_guards import regions_either_way
from neuron_port.rules.helpers.unpacking import SEQUENCES, unpacked


class Escape(str):
    """What makes a flip unsafe when the test's value goes somewhere the file does not show (worded as a
    whole clause, not as guarded code)."""


def escaping_tests(nodes, is_device_test: Callable[[cst.CSTNode], bool], first_unportable) -> dict:
    """{device-test atom: what makes flipping it unsafe} for the tests whose value leaves the test
    (``nodes``: a walk of the module; ``first_unportable``: ``Portability.first_unportable``)."""
    flows = _Flows(nodes, is_device_test)
    if not flows.names and not flows.functions and not flows.passed and not flows.lost:
        return {}
    unsafe: dict[cst.CSTNode, str] = {}

    def mark(origins, why: str) -> None:
        for atom in origins:
            unsafe.setdefault(atom, why)

    for origins, why in flows.lost:
        mark(origins, why)
    for call, origins in flows.passed:
        found = first_unportable([call])
        if found is not None:
            mark(origins, found)
    for name, origins in flows.functions.items():
        if name not in flows.called:
            mark(origins, Escape(f"its value is returned by `{name}()`, whose callers are in other files"))
    for atom, region, _how in regions_either_way(nodes, flows.polarity):
        found = first_unportable(region)
        if found is not None:
            mark(flows.origins(atom) or (), found)
    return unsafe


class _Flows:
    """Where the values of a module's device tests go: names and functions that hold them (to a fixed
    point: ``a = x.is_cuda; b = a``), calls they are passed to, and values the file loses sight of."""

    def __init__(self, nodes, is_device_test: Callable[[cst.CSTNode], bool]) -> None:
        self.is_device_test = is_device_test
        self.names: dict[str, set] = {}  # dotted name -> the device-test atoms whose value it holds
        self.functions: dict[str, set] = {}  # function name -> the atoms it returns
        self.passed: list[tuple[cst.Call, set]] = []  # (call, atoms passed to it)
        self.lost: list[tuple[set, str]] = []  # (atoms, why)
        self.called: set[str] = set()  # functions of self.functions that code of the file calls
        # the rounds read only assignments and calls: picked once, in walk order, in one pass over the module
        # (exact types: LibCST's node classes have no subclasses), not by testing every node in every round
        defs: list[cst.FunctionDef] = []
        classes: list[cst.ClassDef] = []
        assignments: list[cst.CSTNode] = []
        calls: list[cst.Call] = []
        function_def, class_def, call = cst.FunctionDef, cst.ClassDef, cst.Call
        for node in nodes:
            kind = type(node)
            if kind is call:
                calls.append(node)
            elif kind in _ASSIGNMENTS:
                assignments.append(node)
            elif kind is function_def:
                defs.append(node)
            elif kind is class_def:
                classes.append(node)
        # the file's own functions and classes by name: a value passed to one of them goes into its parameter
        self.callees: dict[str, list[tuple[cst.FunctionDef, int]]] = {}  # name -> (def, parameters to skip)
        for node in classes:
            for init in (n for n in node.body.body if isinstance(n, cst.FunctionDef) and n.name.value == "__init__"):
                self.callees.setdefault(node.name.value, []).append((init, 1))
        for definition in defs:
            self.callees.setdefault(definition.name.value, []).append((definition, 0))
        returns = [(definition, list(_returned(definition.body))) for definition in defs]  # the same each round
        for _ in range(4):  # a -> b -> c: each round follows one more assignment or parameter
            grown = self._round(assignments, calls, returns)
            if not grown:
                break
        for node in calls:
            for arg in node.args:
                origins = self._value_origins(arg.value)
                if origins and not self._parameters(node, arg):
                    self.passed.append((node, origins))
            key = _callee_key(node.func)
            if key in self.functions:
                self.called.add(key)

    def _parameters(self, call: cst.Call, arg: cst.Arg) -> list[str]:
        """The parameters of the file's own function (or class) ``call`` calls that receive ``arg`` (none:
        not a function of this file, or an argument it cannot place, such as ``*args``)."""
        if arg.star:
            return []
        found = []
        for definition, skip in self.callees.get(_callee_key(call.func) or "", ()):
            if isinstance(call.func, cst.Attribute):
                skip = 1  # self.method(...): the bound method's first parameter is self
            params = definition.params
            if arg.keyword is not None:
                names = [q.name.value for q in (*params.posonly_params, *params.params, *params.kwonly_params)]
                found += [arg.keyword.value] if arg.keyword.value in names else []
                continue
            positional = [q.name.value for q in (*params.posonly_params, *params.params)][skip:]
            index = [a for a in call.args if a.keyword is None and not a.star].index(arg)
            if index < len(positional):
                found.append(positional[index])
        return found

    def _round(self, assignments, calls, returns) -> bool:
        grown = False
        for node in assignments:
            if node.value is not None:
                origins = self._value_origins(node.value)
                if not origins:  # (a tuple's origins are its items': none, and no item holds one)
                    continue
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                for whole in targets:
                    for target, value in unpacked(whole, node.value):
                        origins = self._value_origins(value)
                        if not origins:
                            continue
                        key = dotted_name(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
                        if key is None:
                            where = source_of(target if target is not None else whole)
                            self.lost.append((origins, Escape(f"its value is stored in `{where}`")))
                            continue
                        held = self.names.setdefault(key, set())
                        if not origins <= held:
                            held |= origins
                            grown = True
        for node in calls:  # a value passed to a function of the file is held by its parameter there
            for arg in node.args:
                origins = self._value_origins(arg.value)
                for name in self._parameters(node, arg) if origins else ():
                    held = self.names.setdefault(name, set())
                    if not origins <= held:
                        held |= origins
                        grown = True
        for definition, values in returns:
            for value in values:
                origins = self._value_origins(value)
                held = self.functions.setdefault(definition.name.value, set()) if origins else None
                if origins and not origins <= held:
                    held |= origins
                    grown = True
        return grown

    def origins(self, node: cst.CSTNode) -> Optional[set]:
        """The device-test atoms ``node`` stands for: itself, a name holding one, a call returning one."""
        if self.is_device_test(node):
            return {node}
        if isinstance(node, (cst.Name, cst.Attribute)):
            return self.names.get(dotted_name(node) or "")
        if isinstance(node, cst.Call):
            return self.functions.get(_callee_key(node.func) or "")
        if isinstance(node, cst.Subscript):  # an item of a tuple or list that holds the test
            return self.origins(node.value)
        return None

    def polarity(self, node: cst.BaseExpression) -> Optional[bool]:
        """A read of a name, or a call of a function, that holds a device test's value (direction does not
        matter: every region it decides, either way, is judged)."""
        if self.is_device_test(node):
            return None  # judged where the test itself stands
        return True if self.origins(node) else None

    def _value_origins(self, value: cst.BaseExpression) -> set:
        """The atoms whose value ``value`` is: through ``and`` / ``or`` / ``not``, and the items of a tuple or
        list (a value that holds the test: where it is unpacked, ``unpacked`` pairs the items with their
        names), not through a comparison, a call or a ternary (those consume the test where they stand)."""
        found: set = set()
        for term in _value_terms(value):
            if type(term) in SEQUENCES:
                for element in term.elements:
                    found |= self._value_origins(element.value)
            else:
                found |= self.origins(term) or set()
        return found



def _value_terms(node: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    kind = type(node)  # exact types: LibCST's node classes have no subclasses
    if kind is cst.BooleanOperation:
        yield from _value_terms(node.left)
        yield from _value_terms(node.right)
    elif kind is cst.UnaryOperation and type(node.operator) is cst.Not:
        yield from _value_terms(node.expression)
    else:
        yield node


def _returned(body: cst.CSTNode) -> Iterator[cst.BaseExpression]:
    """The values a function's own ``return`` / ``yield`` give (not those of functions nested in it)."""
    stack = [body]
    while stack:
        node = stack.pop()
        kind = type(node)  # exact types: LibCST's node classes have no subclasses
        if kind is cst.Return and node.value is not None:
            yield node.value
        elif kind is cst.Yield and isinstance(node.value, cst.BaseExpression):
            yield node.value
        # (whitespace and comments hold no statement: only the code fields are read; the order is not used)
        stack.extend(child for child in code_children(node) if _followed(type(child)))


_ASSIGNMENTS = frozenset((cst.Assign, cst.AugAssign, cst.AnnAssign))
_FOLLOWED: dict[type, bool] = {}


def _followed(kind: type) -> bool:
    """Whether _returned looks inside a child of this type: statements, suites and yields, not nested
    functions and classes (an ``isinstance`` answer, kept per type: ABCMeta's check is a Python call)."""
    found = _FOLLOWED.get(kind)
    if found is None:
        found = _FOLLOWED[kind] = (
            issubclass(kind, (cst.BaseStatement, cst.BaseSmallStatement, cst.BaseSuite, cst.Expr, cst.Yield,
                              cst.Else, cst.ExceptHandler, cst.Finally))
            and not issubclass(kind, (cst.FunctionDef, cst.ClassDef)))
    return found


def _callee_key(func: cst.BaseExpression) -> Optional[str]:
    """``f`` for ``f(...)``, ``self.f(...)`` and ``cls.f(...)``: how the file calls its own functions."""
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute) and dotted_name(func.value) in ("self", "cls"):
        return func.attr.value
    return None
