"""Building and reading expressions and string literals while keeping the user's spelling (quote
style, prefixes)."""

from __future__ import annotations

from typing import Optional

import libcst as cst


def expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def string_value(node: cst.CSTNode) -> Optional[str]:
    """The value of a plain (non-f, non-bytes) string literal, else None."""
    if isinstance(node, cst.SimpleString):
        prefix = node.prefix.lower()
        if "b" in prefix or "f" in prefix:
            return None
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        left, right = string_value(node.left), string_value(node.right)
        if left is None or right is None:
            return None
        return left + right
    return None


def replace_string(node: cst.SimpleString, new_value: str) -> cst.SimpleString:
    """The same literal (prefix and quote style kept) with a new value (no escapes needed)."""
    prefix = node.prefix
    quote = node.quote
    return node.with_changes(value=f"{prefix}{quote}{new_value}{quote}")


def replace_attr_chain_head(node: cst.BaseExpression, old: str, new: str) -> Optional[cst.BaseExpression]:
    """In ``th.cuda.x`` replace the attribute ``cuda`` by ``neuron`` keeping the user's alias."""
    if isinstance(node, cst.Attribute):
        if node.attr.value == old:
            return node.with_changes(attr=cst.Name(new))
        inner = replace_attr_chain_head(node.value, old, new)
        if inner is None:
            return None
        return node.with_changes(value=inner)
    return None
