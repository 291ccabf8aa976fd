"""Statements whose text the parse already knows, so that the render that places the findings
(positions.py) need not render them again (issue 38: the language server's latency on a 4k-line file).

The language server parses a buffer piece by piece (syntax.keep_parsed_pieces): each top-level statement
alone, and a long class's or function's body statement by statement (block_pieces.py, each segment inside
``class _:``). A segment's text is exactly what its statement renders to where it stands in the joined
tree, so the render may copy that text for every statement that holds no finding instead of rendering it:
on accelerate's ``accelerator.py`` the findings stand in about ten of its ~150 methods. (A top-level piece
after the first usually starts with blank lines, which LibCST gives to the piece's header; the join then
makes a new statement with them, which is rendered as before.) Which statements hold a finding comes from
the pass's walk of the module (preorder, one list): a statement's subtree is the stretch of that list up
to the next statement of the same block (the last statement of a block is never copied: what follows it in
the walk may be its parent's other fields). positions.py checks the text it made against the buffer's and
renders again without copies when they differ, so a wrong text costs time, never a wrong place.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Iterable, Optional, Sequence

import libcst as cst

from neuron_port.rewrite.block_pieces import unwrapped

# the last module parsed with its pieces kept and {statement: its text} (LibCST's nodes take no weak
# reference: the last module is held until the next parse, as the server holds its buffer's tree anyway)
_LAST: list = [None, {}]


def remember(module: cst.Module, parsed: dict[str, cst.Module]) -> None:
    """Keep the texts of ``module``'s statements that were parsed alone (``parsed``: text -> its tree, as
    syntax._parse_reusing used them). Only the last module is kept."""
    texts: dict[cst.CSTNode, str] = {}
    for text, tree in parsed.items():
        if tree.header or tree.footer or len(tree.body) != 1:
            continue
        statement = tree.body[0]
        segment = unwrapped(text)
        if segment is not None and type(statement) is cst.ClassDef and statement.name.value == "_":
            block = statement.body
            if type(block) is cst.IndentedBlock and len(block.body) == 1 and not block.footer:
                texts[block.body[0]] = segment
                continue
        if tree.has_trailing_newline:
            texts[statement] = text
    _LAST[:] = [module, texts]


def copies(module: cst.Module, nodes: Sequence[cst.CSTNode], wanted: Iterable[cst.CSTNode]) -> dict[int, str]:
    """``id(statement) -> text`` for the statements of ``module`` whose text is known and that hold none
    of ``wanted`` (``nodes``: the module's walk, names.walk_all's order); empty when none is known."""
    texts = known(module)
    if not texts:
        return {}
    blocks: list[Sequence[cst.CSTNode]] = [module.body]
    blocks += [s.body.body for s in module.body
               if type(s) in (cst.ClassDef, cst.FunctionDef) and type(s.body) is cst.IndentedBlock]
    # each statement that may be copied, with the statement after it in its block (its subtree's end)
    candidates = {id(a): (a, b) for block in blocks for a, b in zip(block, block[1:]) if a in texts}
    if not candidates:
        return {}
    ends = {id(b) for _a, b in candidates.values()}
    wanted_ids = {id(node) for node in wanted}
    where: dict[int, int] = {}
    held: list[int] = []  # walk indexes of the wanted nodes
    for index, node in enumerate(nodes):
        key = id(node)
        if key in candidates or key in ends:
            where[key] = index
        if key in wanted_ids:
            held.append(index)  # in walk order: sorted
    out: dict[int, str] = {}
    for key, (statement, after) in candidates.items():
        start, end = where.get(key), where.get(id(after))
        if start is None or end is None or end <= start:
            continue
        first_held = bisect_right(held, start - 1)  # the first wanted node at or after the statement
        if first_held < len(held) and held[first_held] < end:
            continue  # a wanted node stands in this statement: rendered
        out[key] = texts[statement]
    return out


def known(module: cst.Module) -> Optional[dict[cst.CSTNode, str]]:
    """The statement texts kept for ``module``, None when it is not the last module parsed with pieces kept."""
    return _LAST[1] if _LAST[0] is module else None
