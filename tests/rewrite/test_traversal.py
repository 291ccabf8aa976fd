"""The engine's fast batched traversal makes exactly LibCST's calls, in LibCST's order; with a LibCST it
was not tested with, the engine falls back to LibCST's public batched visitor and gives the same results."""

from __future__ import annotations

import subprocess
import sys

import libcst as cst
import pytest

from conftest import FIXTURES, fixture_and_example_sources
from neuron_port.rewrite import traversal
from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rewrite.traversal import FastBatchedWalk, fast_walk_supported
from neuron_port.rules.registry import all_rules, select_rules


class _Events(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple] = []

    def on_visit(self, node):
        self.events.append(("visit", id(node)))
        return True

    def on_leave(self, original_node):
        self.events.append(("leave", id(original_node)))

    def on_visit_attribute(self, node, attribute):
        self.events.append(("visit_attr", id(node), attribute))

    def on_leave_attribute(self, original_node, attribute):
        self.events.append(("leave_attr", id(original_node), attribute))


class _WalkEvents(FastBatchedWalk):
    def __init__(self) -> None:
        super().__init__([], every_node=True)  # the full traversal; the rule example tests cover skipping
        self.events: list[tuple] = []

    on_visit = _Events.on_visit
    on_leave = _Events.on_leave
    on_visit_attribute = _Events.on_visit_attribute
    on_leave_attribute = _Events.on_leave_attribute


def _sources():
    yield from fixture_and_example_sources()
    yield 'f"{x!r:>{width}} {y=} {z:{w}.{p}}"\nasync def g[T](*, a: int = 1, **k) -> T:\n    yield\n'
    yield "from a import (b as c, d)\nfrom . import *\nmatch p:\n    case [1, *r] | {'k': _}:\n        pass\n"
    yield "lambda *a, b=1, **c: (yield from x)\nx: list[int] = [i async for i in y if i]\ndel a[1:2, ::3]\n"


def _modules():
    """(source, module) of every source that parses."""
    for source in _sources():
        try:
            yield source, cst.parse_module(source)
        except cst.ParserSyntaxError:
            continue


def test_walk_visits_like_libcst():
    count = 0
    for source, module in _modules():
        expected, got = _Events(), _WalkEvents()
        module.visit(expected)
        got.walk(module)
        assert got.events == expected.events, source[:200]
        count += 1
    assert count > 100


def test_children_are_libcsts_children():
    """rules/helpers/nodes.children: the nodes of ``node.children``, in its order, for every node."""
    from neuron_port.rules.helpers.nodes import children

    count = 0
    for source, module in _modules():
        for node in _all_nodes(module):
            expected = node.children
            got = children(node)
            assert len(got) == len(expected) and all(a is b for a, b in zip(got, expected)), (type(node), source[:200])
            count += 1
    assert count > 10_000


def test_method_names_are_those_dir_finds():
    """The visit_/leave_ methods the fast walk calls, found from the classes' own names: the same as a
    look-up of every name dir() gives (what LibCST's visit_batched does), for every rule class."""
    from neuron_port.rules.context import ImportTracker

    classes = [rule for rule in all_rules() if rule.KIND == "python"] + [ImportTracker]
    for cls in classes:
        expected = tuple(n for n in dir(cls) if n.startswith(("visit_", "leave_")) and callable(getattr(cls, n))
                         and not getattr(getattr(cls, n), "_is_no_op", False))
        assert traversal._method_names(cls) == expected, cls


def test_the_installed_libcst_is_one_the_fast_walk_was_tested_with():
    assert fast_walk_supported(), "pyproject.toml pins libcst to traversal.TESTED_LIBCST; update both together"


@pytest.mark.parametrize("installed, supported", [("1.9.0", True), ("1.1.0", True), ("1.10.0", False),
                                                  ("2.0.0", False), ("0.4.10", False), ("1.x", False)])
def test_an_untested_libcst_turns_the_fast_walk_off(monkeypatch, installed, supported):
    monkeypatch.setattr(traversal.cst, "LIBCST_VERSION", installed)
    assert fast_walk_supported() is supported


def test_the_version_comes_from_libcst_or_else_its_metadata(monkeypatch):
    from importlib.metadata import version

    assert traversal._libcst_version() == tuple(int(p) for p in version("libcst").split(".")[:2])
    monkeypatch.setattr(traversal.cst, "LIBCST_VERSION", "unknown")  # LibCST without its _version module
    assert traversal._libcst_version() == tuple(int(p) for p in version("libcst").split(".")[:2])


def test_leaf_types_hold_no_expression():
    """Helpers do not enter whitespace, comment and operator nodes (traversal.LEAF_TYPES): exact only
    while those classes' fields hold nothing but more of them."""
    import dataclasses
    import re

    assert traversal.LEAF_TYPES
    for kind in traversal.LEAF_TYPES:
        for field in dataclasses.fields(kind):
            for name in re.findall(r"libcst\.[\w.]+", str(field.type)):
                assert name.startswith(("libcst._nodes.whitespace.", "libcst._nodes.op.",
                                        "libcst._maybe_sentinel.")), (kind, field.name, name)


def test_walk_all_is_the_list_of_walk():
    from neuron_port.rules.helpers.names import walk, walk_all

    count = 0
    for source, module in _modules():
        assert [id(n) for n in walk_all(module)] == [id(n) for n in walk(module)], source[:200]
        count += 1
    assert count > 100


def test_the_public_fallback_gives_the_same_rewrite(monkeypatch):
    rules = select_rules(target="neuron")
    sources = [path.read_text(encoding="utf-8") for path in sorted(FIXTURES.rglob("*.py"))]
    options = EngineOptions(unsafe_fixes=True)
    fast = [transform_source(source, rules, options) for source in sources]
    monkeypatch.setattr(traversal, "FAST_WALK", False)
    slow = [transform_source(source, rules, options) for source in sources]
    assert [(o.code, o.findings) for o in fast] == [(o.code, o.findings) for o in slow]
    assert sum(len(o.findings) for o in fast) > 20


FIRST_NODE_PROBE = """
import sys, libcst as cst
from neuron_port.rewrite.traversal import FastBatchedWalk
class Events(cst.CSTVisitor):
    def __init__(self):
        super().__init__(); self.events = []
    def on_visit(self, node):
        self.events.append(("visit", id(node))); return True
    def on_leave(self, node):
        self.events.append(("leave", id(node)))
    def on_visit_attribute(self, node, attribute):
        self.events.append(("visit_attr", id(node), attribute))
    def on_leave_attribute(self, node, attribute):
        self.events.append(("leave_attr", id(node), attribute))
class Walk(FastBatchedWalk):
    def __init__(self):
        super().__init__([], every_node=True); self.events = []
    on_visit, on_leave = Events.on_visit, Events.on_leave
    on_visit_attribute, on_leave_attribute = Events.on_visit_attribute, Events.on_leave_attribute
module = cst.parse_module(sys.argv[1])
expected, got = Events(), Walk()
module.visit(expected)
got.walk(module)
sys.exit(0 if got.events == expected.events else 1)
"""


@pytest.mark.parametrize("source", ['f"{a:>{w}}"\nf"{b}"\n', 'f"{b}"\nf"{a:>{w}}"\n'])
def test_field_order_does_not_depend_on_which_node_of_a_type_came_first(source):
    """FormattedStringExpression visits format_spec only when it is set: learning the order from a node
    that has one must not make the walk visit the attribute of a node that has none (a fresh process
    per order, so nothing was learned before)."""
    probe = subprocess.run([sys.executable, "-c", FIRST_NODE_PROBE, source], capture_output=True, text=True,
                           timeout=120)
    assert probe.returncode == 0, probe.stderr


def test_ancestors_of_are_the_paths_down_to_the_targets():
    module = cst.parse_module("a = f(x.cuda())\nb = 1\nif c:\n    d = g(y)\n")
    call = module.body[0].body[0].value  # f(x.cuda())
    inner = call.args[0].value  # x.cuda(): nested in the other target
    y = module.body[2].body.body[0].body[0].value.args[0].value
    found = traversal.ancestors_of(module, {call, inner, y})
    # every node that contains a target, and no other (a target only when it contains another)
    expected = set()
    for target in (call, inner, y):
        expected |= {node for node in _all_nodes(module) if node is not target and _contains(node, target)}
    assert found == expected
    assert module in found and call in found and inner not in found and module.body[1] not in found


def _all_nodes(node):
    yield node
    for child in node.children:
        yield from _all_nodes(child)


def _contains(node, target):
    return any(child is target or _contains(child, target) for child in node.children)


def test_node_classes_tested_by_exact_type_have_no_subclasses():
    """The helpers test these classes with ``type(node) is ...`` (no ABCMeta instance check): exact only
    while LibCST defines no subclass of them, and neither does anything imported with the rules."""
    import neuron_port.rules.registry as registry
    from neuron_port.rules.helpers import ranks_guards

    registry.all_rules()
    for kind in (cst.Name, cst.Attribute, cst.Call, cst.Comparison, cst.Assign, cst.AugAssign, cst.AnnAssign,
                 cst.SimpleString, cst.ConcatenatedString, cst.Return, cst.Yield, cst.BooleanOperation,
                 cst.UnaryOperation, cst.Not, cst.List, cst.Tuple, cst.Set, cst.Element, cst.And, cst.Or,
                 cst.IndentedBlock, cst.SimpleStatementSuite, cst.SimpleStatementLine, cst.Raise, cst.Continue,
                 cst.Break, cst.Assert, cst.Expr, cst.Else,
                 cst.FunctionDef, cst.ClassDef, cst.ImportFrom, *ranks_guards._REGION_TYPES):
        assert kind.__subclasses__() == [], kind


def test_walk_all_is_the_walk_as_a_list():
    from neuron_port.rules.helpers.names import walk, walk_all

    count = 0
    for text in fixture_and_example_sources():
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError:  # an example of a file that does not parse
            continue
        expected, found = list(walk(module)), walk_all(module)
        assert len(found) == len(expected) and all(a is b for a, b in zip(found, expected))
        count += len(found)
    assert count > 10_000

