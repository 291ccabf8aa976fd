"""Where a condition holds: the regions of a module that run only when some test is true (``if`` bodies,
``else`` branches of a negated test, the code after an early ``return``, the right side of ``and``).

Used by the rules that must not rewrite a test whose guarded code cannot run on Trainium: NP102 / NP104 and
NP720 (``x.is_cuda`` / ``device.type == "cuda"`` guarding Triton, flash-attn, CUDA extensions), and NP201 /
NP210 (``torch.cuda.is_available()`` guarding a compute-capability read).

The caller gives a ``polarity`` function for the condition it cares about: ``True`` for an expression that
asserts it (``x.is_cuda``), ``False`` for one that asserts its negation (``x.device.type != "cuda"``), ``None``
otherwise. ``not`` flips it. Tests are split on ``and`` / ``or`` only, so ``if x.is_cuda and HAS_TRITON:``
guards its body by ``x.is_cuda`` and ``if not x.is_cuda or not HAS_TRITON: return fallback(x)`` guards what
follows it.
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple, Optional

import libcst as cst

from neuron_port.rules.helpers.names import dotted_name, walk

Polarity = Callable[[cst.BaseExpression], Optional[bool]]
# (the atom of the test that asserts the condition, the nodes that run only when it holds)
Region = tuple[cst.BaseExpression, list[cst.CSTNode]]


# Exact types below (``type(x) is``): LibCST's concrete node classes have no subclasses
# (tests/rewrite/test_traversal.py), and these run for every test of a module, twice.


def _flatten(node: cst.BaseExpression, operator: type) -> list[cst.BaseExpression]:
    if type(node) is cst.BooleanOperation and type(node.operator) is operator and not node.lpar:
        return _flatten(node.left, operator) + _flatten(node.right, operator)
    return [node]


def guard_terms(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The terms of a test split on every ``and`` / ``or`` (``not`` kept on its term)."""
    if type(node) is cst.BooleanOperation and not node.lpar:
        return guard_terms(node.left) + guard_terms(node.right)
    return [node]


def term_polarity(node: cst.BaseExpression, polarity: Polarity) -> Optional[bool]:
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Not:
        inner = term_polarity(node.expression, polarity)
        return None if inner is None else not inner
    return polarity(node)


def _asserting(test: cst.BaseExpression, polarity: Polarity, when: bool) -> list[cst.BaseExpression]:
    """The atoms of ``test`` that make the condition hold where ``test`` is ``when``: the ``and`` terms that
    assert it (``when`` True), or the ``or`` terms that deny it (``when`` False)."""
    terms = _flatten(test, cst.And if when else cst.Or)
    return [guard_atom(t) for t in terms if term_polarity(t, polarity) is when]


def guard_atom(node: cst.BaseExpression) -> cst.BaseExpression:
    """``x.is_cuda`` for ``not not x.is_cuda`` / ``not x.is_cuda``: the test itself, without ``not``."""
    while type(node) is cst.UnaryOperation and type(node.operator) is cst.Not:
        node = node.expression
    return node


def _exits(block: cst.BaseSuite) -> bool:
    body = block.body if type(block) is cst.IndentedBlock or type(block) is cst.SimpleStatementSuite else ()
    if not body:
        return False
    last = body[-1]
    smalls = last.body if type(last) is cst.SimpleStatementLine else [last]
    return any(type(s) in _EXITS for s in smalls)


_EXITS = frozenset((cst.Return, cst.Raise, cst.Continue, cst.Break))


# torch's own asserts (torch/__init__.py): ``torch._check(cond, message)``; _check_with takes the error
# type first. They guard the rest of their block as ``assert`` does.
TORCH_CHECKS = {"torch._check": 0, "torch._check_value": 0, "torch._check_type": 0, "torch._check_index": 0,
                "torch._check_not_implemented": 0, "torch._assert": 0, "torch._check_with": 1}


class _Check(NamedTuple):
    test: cst.BaseExpression
    msg: Optional[cst.CSTNode]  # what runs when the test fails: the statement, judged as a whole


def _asserts(statement: cst.CSTNode) -> list[_Check]:
    """The preconditions a statement line states: ``assert`` and ``torch._check``-style calls."""
    if type(statement) is not cst.SimpleStatementLine:
        return []
    found = []
    for small in statement.body:
        if type(small) is cst.Assert:
            found.append(_Check(small.test, small if small.msg is not None else None))
        elif type(small) is cst.Expr and type(small.value) is cst.Call:
            index = TORCH_CHECKS.get(dotted_name(small.value.func) or "")
            args = small.value.args
            if index is not None and len(args) > index and args[index].keyword is None:
                found.append(_Check(args[index].value, small if len(args) > index + 1 else None))
    return found


def regions_where(module: cst.CSTNode, polarity: Polarity, nodes=None) -> Iterator[Region]:
    """Every region of ``module`` that runs only when the condition holds, with the atom that says so
    (``nodes``: a walk of ``module`` the caller already made)."""
    for node in nodes if nodes is not None else walk(module):
        if type(node) in _REGION_TYPES:
            yield from _node_regions(node, polarity)


def _negated(polarity: Polarity) -> Polarity:
    def negated(node: cst.BaseExpression) -> Optional[bool]:
        found = polarity(node)
        return None if found is None else not found
    return negated


def regions_either_way(nodes, polarity: Polarity) -> Iterator[tuple[cst.BaseExpression, list[cst.CSTNode], str]]:
    """For each atom of a test on the condition (``nodes``: a walk of the module, made once by the
    caller), every region whose running depends on it: ``"holds"`` (runs only when the condition holds),
    ``"fails"`` (runs only when it does not: the ``else`` of ``if x.is_cuda:``, the body of
    ``if not x.is_cuda: return ...``; the rest of a block after ``assert x.is_cuda`` holds) and ``"depends"`` (both branches of an ``if`` / ternary whose test has the atom among its ``and`` /
    ``or`` terms), ``"rest"`` (the other terms of the ``and`` / ``or`` chain the
    atom is part of, whose evaluation the atom decides). A fix that flips the atom on Trainium changes
    which of them run there."""
    negated = _negated(polarity)
    for node in nodes:
        if type(node) not in _REGION_TYPES:
            continue  # none of the cases below (and LibCST's node classes have no subclasses)
        for atom, region in _node_regions(node, polarity):
            yield atom, region, "holds"
        for atom, region in _node_regions(node, negated):
            yield atom, region, "fails"
        kind = type(node)
        if (kind is cst.If or kind is cst.IfExp) and any(
                term_polarity(t, polarity) is not None for t in guard_terms(node.test)):
            orelse = node.orelse.body if type(node.orelse) is cst.Else else node.orelse
            for atom in (guard_atom(t) for t in guard_terms(node.test) if term_polarity(t, polarity) is not None):
                yield atom, [node.body] + ([orelse] if orelse is not None else []), "depends"
        if kind is cst.BooleanOperation:
            terms = _flatten(node, type(node.operator))
            for term in terms:
                if term_polarity(term, polarity) is not None:
                    yield guard_atom(term), [t for t in terms if t is not term], "rest"


# the only node types _node_regions and regions_either_way find regions in
_REGION_TYPES = frozenset((cst.If, cst.IfExp, cst.BooleanOperation, cst.Module, cst.IndentedBlock))


def _node_regions(node: cst.CSTNode, polarity: Polarity) -> Iterator[Region]:
    kind = type(node)  # exact types: this runs for every region-type node of the module, twice
    if kind is cst.If or kind is cst.IfExp:
        orelse = node.orelse
        if type(orelse) is cst.Else:
            orelse = orelse.body
        for atom in _asserting(node.test, polarity, True):
            yield atom, [node.body]
        if orelse is not None:
            for atom in _asserting(node.test, polarity, False):
                yield atom, [orelse]
    elif kind is cst.BooleanOperation:
        when = type(node.operator) is cst.And
        for atom in _asserting(node.left, polarity, when):
            yield atom, [node.right]
    if kind is cst.Module or kind is cst.IndentedBlock:
        body = list(node.body)
        for i, statement in enumerate(body):
            if type(statement) is cst.If and statement.orelse is None and _exits(statement.body):
                for atom in _asserting(statement.test, polarity, False):  # `if not x.is_cuda: return ...`
                    yield atom, body[i + 1:]
            for check in _asserts(statement):  # `assert x.is_cuda`: a precondition of the rest of the block
                for atom in _asserting(check.test, polarity, True):
                    yield atom, body[i + 1:]
                if check.msg is not None:  # its message is what runs when the test fails
                    for atom in _asserting(check.test, polarity, False):
                        yield atom, [check.msg]  # judged as a statement: a message that names CUDA


def nodes_in(region: list[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    for root in region:
        yield from walk(root)
