"""syntax.parse_unvalidated: LibCST's parse without its per-node re-validation gives the same trees."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst._nodes.base import CSTNode
from libcst._nodes.deep_equals import deep_equals

from neuron_port.rewrite import syntax
from test_chunks import _corpus, _same_tree


def _node_classes(kind: type) -> set[type]:
    found = set(kind.__subclasses__())
    for sub in list(found):
        found |= _node_classes(sub)
    return found


def test_no_node_class_has_its_own_post_init():
    # the switch replaces the one method every node's __init__ reaches; a class with its own would bypass it
    assert all("__post_init__" not in vars(kind) for kind in _node_classes(CSTNode))


def test_trees_equal_validated_parses_and_validation_is_back():
    for text in _corpus():
        try:
            whole = cst.parse_module(text)
        except cst.ParserSyntaxError:
            with pytest.raises(cst.ParserSyntaxError):
                syntax.parse_unvalidated(text)
            continue
        assert _same_tree(syntax.parse_unvalidated(text), whole, text)
        assert CSTNode.__post_init__ is syntax._VALIDATE_NODE
    with pytest.raises(cst.CSTValidationError):  # nodes built by hand are validated as before
        cst.Name("not a name")


def test_validation_is_back_after_a_syntax_error():
    with pytest.raises(cst.ParserSyntaxError):
        syntax.parse_unvalidated("def (:\n")
    assert CSTNode.__post_init__ is syntax._VALIDATE_NODE
    assert deep_equals(syntax.parse_unvalidated("x = 1\n"), cst.parse_module("x = 1\n"))
