"""Reading and editing the arguments of a call while keeping its layout (separators, trailing comma,
one argument per line)."""

from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from neuron_port.rules.helpers.nodes import children


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


def arg_separator(call: cst.Call) -> cst.BaseParenthesizableWhitespace:
    """The whitespace this call puts after a comma between two arguments (newline + indent in a
    one-argument-per-line call, a space otherwise)."""
    for arg in call.args[:-1]:
        if isinstance(arg.comma, cst.Comma):
            return arg.comma.whitespace_after
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return call.whitespace_before_args
    return cst.SimpleWhitespace(" ")


def insert_arg(call: cst.Call, index: int, new_arg: cst.Arg) -> cst.Call:
    """Insert ``new_arg`` before ``call.args[index]`` (or append when ``index >= len(args)``), keeping
    the call's separators, its trailing comma and the whitespace before the closing parenthesis."""
    args = list(call.args)
    sep = arg_separator(call)
    if not args:
        return call.with_changes(args=[new_arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)])
    if index < len(args):
        args.insert(index, new_arg.with_changes(comma=cst.Comma(whitespace_after=sep)))
        return call.with_changes(args=args)
    last = args[-1]
    # the new last argument inherits the old last one's ending (trailing comma, space before ")")
    new_arg = new_arg.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
    args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=sep), whitespace_after_arg=cst.SimpleWhitespace(""))
    args.append(new_arg)
    return call.with_changes(args=args)


def keyword_arg(keyword: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def first_keyword_index(call: cst.Call) -> int:
    """Where a keyword argument can go first: after the positional (and ``*args``) arguments."""
    for i, arg in enumerate(call.args):
        if arg.keyword is not None or arg.star == "**":
            return i
    return len(call.args)


def quote_of(call: cst.Call) -> str:
    """The quote character of the first string literal in the call's arguments (double quotes if
    there is none), so an inserted ``"neuron"`` matches the line's style."""
    stack: list[cst.CSTNode] = [arg.value for arg in reversed(call.args)]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleString):
            if node.quote in ("'", '"'):
                return node.quote
            continue
        stack.extend(reversed(children(node)))
    return '"'


def has_star_args(call: cst.Call) -> bool:
    return any(arg.star != "" for arg in call.args)
