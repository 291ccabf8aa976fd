"""Code shared by several NP1xx modules: the comma layout of a rebuilt argument list (NP103, NP105) and
the ``lambda storage, loc: storage.cuda(...)`` idiom of ``map_location`` (NP106 rewrites it, NP103 leaves it
to NP106).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst


def set_commas(args: list[cst.Arg], last_comma) -> list[cst.Arg]:
    """``args`` with a comma after each argument but the last (``, `` where one is missing) and
    ``last_comma`` after the last one."""
    out = []
    for i, arg in enumerate(args):
        if i < len(args) - 1:
            if not isinstance(arg.comma, cst.Comma):
                arg = arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        else:
            arg = arg.with_changes(comma=last_comma)
        out.append(arg)
    return out


def storage_lambda_call(node: cst.Lambda) -> Optional[cst.Call]:
    """``lambda storage, loc: storage.cuda(...)``: the body call, else None."""
    params = node.params.params
    if len(params) != 2:
        return None
    body = node.body
    if (
        isinstance(body, cst.Call)
        and isinstance(body.func, cst.Attribute)
        and body.func.attr.value == "cuda"
        and isinstance(body.func.value, cst.Name)
        and body.func.value.value == params[0].name.value
    ):
        return body
    return None
