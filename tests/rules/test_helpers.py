"""The shared rule helpers (rules/helpers/): inserting arguments into a call keeps its layout."""

from __future__ import annotations

import libcst as cst
import pytest

from neuron_port.rules.helpers.calls import insert_arg, keyword_arg


# -- calls -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "source, index, expected",
    [
        ("f()", 0, "f(v)"),
        ("f(a)", 1, "f(a, v)"),
        ("f(a)", 0, "f(v, a)"),
        ("f(a,)", 1, "f(a, v,)"),
        ("f(\n    a,\n    b,\n)", 2, "f(\n    a,\n    b,\n    v,\n)"),
        ("f(\n    a,\n    b\n)", 2, "f(\n    a,\n    b,\n    v\n)"),
        ("f(\n    a,\n)", 0, "f(\n    v,\n    a,\n)"),
        ("f(\n    a=1, b=2)", 0, "f(\n    v, a=1, b=2)"),
    ],
)
def test_insert_arg_layout(source, index, expected):
    call = cst.parse_expression(source)
    assert isinstance(call, cst.Call)
    new = insert_arg(call, index, cst.Arg(value=cst.Name("v")))
    assert cst.Module(body=[]).code_for_node(new) == expected


def test_keyword_arg_appended_after_trailing_comma():
    call = cst.parse_expression("f(\n    a=1,\n)")
    assert isinstance(call, cst.Call)
    new = insert_arg(call, 1, keyword_arg("k", cst.Name("v")))
    assert cst.Module(body=[]).code_for_node(new) == "f(\n    a=1,\n    k=v,\n)"
