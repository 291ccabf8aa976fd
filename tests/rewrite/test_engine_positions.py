"""The engine's own position render gives exactly LibCST's PositionProvider ranges, for every node, and
the findings' lines and columns do not depend on which of the two computed them."""

from __future__ import annotations

import random

import libcst as cst
import pytest
from libcst.metadata import PositionProvider

from conftest import FIXTURES
from neuron_port.rewrite import traversal
from neuron_port.rewrite.engine import EngineOptions, node_positions, transform_source
from neuron_port.rules.registry import all_rules, select_rules

# Line breaks of every kind, tabs, continuation lines, comments and strings spanning lines: the cases
# where a column count could go wrong.
ODD_LAYOUTS = [
    "x = 1\r\ny = torch.cuda.is_available()\r\n",
    "x = 1\ry = (a,\r     b).cuda()\r",
    "if x:\n\tdevice = 'cuda'  # gpu\n\tmodel.to(device)\n",
    's = """a\nb\n""" + torch.cuda.current_device()\nt = x \\\n    .cuda()\n',
    "def f():\n    return f'{a}\\n{b!r:>{w}}'.cuda()\n\n\n# trailing\n",
    "",
    "\n\n",
]


def _sources():
    for path in sorted(FIXTURES.rglob("*.py")):
        yield str(path), path.read_text(encoding="utf-8", errors="replace")
    for rule in all_rules():
        for number, example in enumerate(list(rule.VALID) + list(rule.INVALID)):
            yield f"{rule.CODE}#{number}", example if isinstance(example, str) else example.source()
    for number, source in enumerate(ODD_LAYOUTS):
        yield f"layout#{number}", source


def test_every_node_has_the_position_provider_range():
    """Asked for every node, or for a few nodes one at a time (which must still find the ranges of the
    children a statement's range is hoisted from)."""
    count = 0
    for name, source in _sources():
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError:
            continue
        expected = cst.MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        assert node_positions(module, expected) == dict(expected), name
        # one node at a time: its range must not depend on which other nodes were asked for
        for node in random.Random(name).sample(list(expected), min(len(expected), 8)):
            assert node_positions(module, [node]) == {node: expected[node]}, (name, node)
        count += 1
    assert count > 100


@pytest.mark.parametrize("source", ODD_LAYOUTS[:5])
def test_finding_positions_do_not_depend_on_the_position_render(monkeypatch, source):
    rules = select_rules(target="neuron")
    options = EngineOptions(unsafe_fixes=True)
    fast = transform_source(source, rules, options, path="odd.py")
    monkeypatch.setattr(traversal, "FAST_WALK", False)  # LibCST's public MetadataWrapper path
    slow = transform_source(source, rules, options, path="odd.py")
    assert fast.findings == slow.findings and fast.code == slow.code
    assert fast.findings, "each layout has something to report"


def test_the_render_gives_the_ancestors_a_fix_pass_rebuilds():
    """node_positions's ``ancestors`` (what _apply rebuilds to replace the nodes) are the ancestors the
    tree walk finds (traversal.ancestors_of), for any set of nodes."""
    chooser = random.Random(7)
    count = 0
    for _name, source in _sources():
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError:
            continue
        every = [n for n in _all_nodes(module) if n is not module]
        for _ in range(3):
            targets = chooser.sample(every, min(len(every), chooser.randint(1, 6))) if every else []
            if not targets:
                continue
            found: dict = {}
            node_positions(module, targets, found)
            assert {above for node in targets for above in found[node]} == traversal.ancestors_of(module, targets)
            count += 1
    assert count > 100


def _all_nodes(node):
    yield node
    for child in node.children:
        yield from _all_nodes(child)
