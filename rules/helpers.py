"""Small node-building and matching helpers shared by rules."""

from __future__ import annotations

import re
from typing import Optional, Sequence

import libcst as cst

# A device string: "cuda", "cuda:0", "cuda:12". Anything longer (prose, log text) is not a device.
CUDA_DEVICE_RE = re.compile(r"^cuda(:\d+)?$")


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


def string_literal(value: str, like: Optional[cst.SimpleString] = None) -> cst.SimpleString:
    quote = like.quote if like is not None else '"'
    return cst.SimpleString(f"{quote}{value}{quote}")


def arg_named(call: cst.Call, keyword: str, position: Optional[int] = None) -> Optional[cst.Arg]:
    """The argument passed as ``keyword=`` or, failing that, at ``position`` (positional only)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    if position is not None:
        positional = [a for a in call.args if a.keyword is None and a.star == ""]
        if position < len(positional):
            return positional[position]
    return None


def keyword_names(call: cst.Call) -> Sequence[str]:
    return [a.keyword.value for a in call.args if a.keyword is not None]


def remove_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """Drop one argument and keep the comma layout of the rest valid."""
    args = [a for a in call.args if a is not arg]
    if args:
        last = args[-1]
        original_last = call.args[-1]
        # The new last argument takes the trailing comma style of the old last one.
        if last is not original_last:
            args[-1] = last.with_changes(comma=original_last.comma)
    return call.with_changes(args=args)


def add_keyword_arg(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """Append ``keyword=value`` after the existing arguments."""
    new_arg = cst.Arg(
        value=value,
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    args = list(call.args)
    if args:
        last = args[-1]
        if last.comma is cst.MaybeSentinel.DEFAULT or isinstance(last.comma, cst.MaybeSentinel):
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        else:
            # keep a trailing comma layout (multi-line calls): insert before the closing paren
            new_arg = new_arg.with_changes(comma=last.comma)
    args.append(new_arg)
    return call.with_changes(args=args)


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
