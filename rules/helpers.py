"""Small node-building and matching helpers shared by rules."""

from __future__ import annotations

import re
from typing import Optional, Sequence, Union

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
        stack.extend(reversed(node.children))
    return '"'


def has_star_args(call: cst.Call) -> bool:
    return any(arg.star != "" for arg in call.args)


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


Removal = Union[cst.SimpleStatementLine, cst.SimpleStatementSuite, cst.RemovalSentinel]


def statement_without(owner: Union[cst.SimpleStatementLine, cst.SimpleStatementSuite],
             small: cst.BaseSmallStatement) -> Removal:
    """``owner`` with one small statement removed; the whole line goes when it was the only one."""
    body = [s for s in owner.body if s is not small]
    if not body:
        if isinstance(owner, cst.SimpleStatementLine):
            return cst.RemovalSentinel.REMOVE
        return owner.with_changes(body=[cst.Pass()])
    if owner.body[-1] is small:  # `a = 1; flag = x` -> `a = 1` (no dangling semicolon)
        body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
    return owner.with_changes(body=body)


def has_comment_above(line: cst.SimpleStatementLine) -> bool:
    """A comment line directly above the statement (removing the statement would lose it)."""
    return any(empty.comment is not None for empty in line.leading_lines)


class GuardedBlocks:
    """Mixin for rules that treat code inside some blocks as guarded (e.g. under an availability
    check): the subclass adds block nodes to ``_guarded_blocks``; ``_guard_depth`` is how many of them
    the visit is inside."""

    _guarded_blocks: set
    _guard_depth: int

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if node in self._guarded_blocks:
            self._guard_depth += 1

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        if original_node in self._guarded_blocks:
            self._guard_depth -= 1

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        if node in self._guarded_blocks:
            self._guard_depth += 1

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite) -> None:
        if original_node in self._guarded_blocks:
            self._guard_depth -= 1
