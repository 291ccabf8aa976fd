"""What NP306 (``amp_imports.py``) needs to read and edit import statements: the bindings an import
makes, version-guarded import groups (``try: ... except ImportError: ...`` and ``if ...: ... else: ...``
whose branches only import), and the edits that remove an imported name or point it at another module
while keeping the statement, the line and the guarded structure valid.

Used by NP306 only (a module of the mixed-precision family, not a shared helper).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence, Union

import libcst as cst

from neuron_port.rules.helpers.names import dotted_name, source_of
from neuron_port.rules.helpers.nodes import children

ImportNode = Union[cst.Import, cst.ImportFrom]
Group = Union[cst.Try, cst.If]
Replacement = Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel]


@dataclass(eq=False)
class Binding:
    """One name bound by one alias of an import statement."""

    local: str
    qualname: str
    line: cst.SimpleStatementLine
    small: ImportNode
    alias: cst.ImportAlias
    scope: str  # "module", "class" or "function"
    group: Optional[Group] = None
    # filled in by the rule: what happens to the binding, how safe that is and why
    action: str = "keep"  # keep | remove | repoint
    safety: Optional[str] = None
    reason: str = ""
    left: list = field(default_factory=list)  # uses that stay after the other fixes


def bindings_of(small: ImportNode) -> list[tuple[str, str, cst.ImportAlias]]:
    """(local name, qualified name, alias) for each name an import binds; ``import a.b`` binds ``a``."""
    out = []
    if isinstance(small, cst.Import):
        for alias in small.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                out.append((alias.asname.name.value, full, alias))
            else:
                head = full.split(".")[0]
                out.append((head, head, alias))
        return out
    if small.relative or small.module is None or isinstance(small.names, cst.ImportStar):
        return out
    module = dotted_name(small.module)
    if module is None:
        return out
    for alias in small.names:
        if not isinstance(alias.name, cst.Name):
            continue
        local = alias.name.value
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            local = alias.asname.name.value
        out.append((local, f"{module}.{alias.name.value}", alias))
    return out


# -- guarded import groups ---------------------------------------------------------------------------
def _import_only(block: cst.BaseSuite) -> Optional[list[cst.SimpleStatementLine]]:
    """The lines of a block whose statements are all imports or ``pass``, else None."""
    if not isinstance(block, cst.IndentedBlock):
        return None
    lines = []
    for statement in block.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            return None
        if not all(isinstance(s, (cst.Import, cst.ImportFrom, cst.Pass)) for s in statement.body):
            return None
        lines.append(statement)
    return lines


def group_blocks(node: Group) -> Optional[list[cst.IndentedBlock]]:
    """The blocks of a version-guarded import group (each one only imports), or None when ``node`` is
    not one: a ``try`` without ``finally`` whose body, handlers and ``else`` only import, or an
    ``if``/``elif``/``else`` chain whose branches only import."""
    blocks: list[cst.BaseSuite] = []
    if isinstance(node, cst.Try):
        if node.finalbody is not None:
            return None
        blocks = [node.body, *(h.body for h in node.handlers)]
        if node.orelse is not None:
            blocks.append(node.orelse.body)
    else:
        current: Optional[Union[cst.If, cst.Else]] = node
        while current is not None:
            blocks.append(current.body)
            if isinstance(current, cst.If):
                current = current.orelse
            else:
                current = None
    if len(blocks) < 2 or any(_import_only(b) is None for b in blocks):
        return None
    return blocks  # type: ignore[return-value]


def elif_nodes(node: cst.If) -> list[cst.If]:
    """The ``elif`` branches of an ``if`` chain (visited as ``If`` nodes of their own)."""
    out = []
    current = node.orelse
    while isinstance(current, cst.If):
        out.append(current)
        current = current.orelse
    return out


# -- edits -------------------------------------------------------------------------------------------
def _without_aliases(small: ImportNode, removed: set) -> Optional[ImportNode]:
    """The import without the given aliases (None when none is left); commas stay valid."""
    names = small.names
    assert not isinstance(names, cst.ImportStar)
    kept = [a for a in names if a not in removed]
    if not kept:
        return None
    if kept[-1] is not names[-1]:
        kept[-1] = kept[-1].with_changes(comma=names[-1].comma)
    return small.with_changes(names=kept)


def edit_line(line: cst.SimpleStatementLine, removed: set, repoint: dict) -> Union[cst.SimpleStatementLine,
                                                                                 cst.RemovalSentinel]:
    """``line`` with the ``removed`` aliases taken out and the imports in ``repoint`` (small statement ->
    new module name) importing from another module; the whole line goes when nothing is left."""
    body: list[cst.BaseSmallStatement] = []
    for small in line.body:
        if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar) and (
                small in repoint or any(a in removed for a in small.names)):
            edited = _without_aliases(small, removed)
            if edited is None:
                continue
            if small in repoint:
                assert isinstance(edited, cst.ImportFrom)
                edited = edited.with_changes(module=cst.parse_expression(repoint[small]))
            body.append(edited)
        else:
            body.append(small)
    if not body:
        return cst.RemovalSentinel.REMOVE
    if len(body) < len(line.body):
        body[-1] = body[-1].with_changes(semicolon=line.body[-1].semicolon)
    return line.with_changes(body=body)


PASS_LINE = cst.SimpleStatementLine(body=[cst.Pass()])


def _edited_block(block: cst.IndentedBlock, edits: dict) -> cst.IndentedBlock:
    body = []
    for statement in block.body:
        new = edits.get(statement, statement)
        if not isinstance(new, cst.RemovalSentinel):
            body.append(new)
    return block.with_changes(body=body or [PASS_LINE])


def _block_code(block: cst.IndentedBlock) -> list[str]:
    return [source_of(s.with_changes(leading_lines=[])).strip() for s in block.body
            if not (isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, cst.Pass) for x in s.body))]


def edit_group(group: Group, edits: dict, remove_all: bool) -> Replacement:
    """The group after its lines' edits (line -> new line or REMOVE): removed whole when ``remove_all``;
    collapsed to one branch's imports when every branch ends up importing the same; else each branch
    edited, an emptied one holding ``pass``."""
    if remove_all:
        return cst.RemovalSentinel.REMOVE
    if isinstance(group, cst.Try):
        new_group: Group = group.with_changes(
            body=_edited_block(group.body, edits),  # type: ignore[arg-type]
            handlers=[h.with_changes(body=_edited_block(h.body, edits)) for h in group.handlers],  # type: ignore[arg-type]
            orelse=None if group.orelse is None else group.orelse.with_changes(
                body=_edited_block(group.orelse.body, edits)),  # type: ignore[arg-type]
        )
    else:
        new_group = _edit_if(group, edits)
    blocks = group_blocks(new_group) or []
    codes = [_block_code(b) for b in blocks]
    if codes and codes[0] and all(c == codes[0] for c in codes):
        first = [s for s in blocks[0].body
                 if not (isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, cst.Pass) for x in s.body))]
        first[0] = first[0].with_changes(leading_lines=group.leading_lines)
        return cst.FlattenSentinel(first)
    return new_group


def _edit_if(node: Union[cst.If, cst.Else], edits: dict):
    body = _edited_block(node.body, edits)  # type: ignore[arg-type]
    if isinstance(node, cst.Else):
        return node.with_changes(body=body)
    orelse = None if node.orelse is None else _edit_if(node.orelse, edits)
    return node.with_changes(body=body, orelse=orelse)


def head_names(node: Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel, None]) -> set[str]:
    """The names a replacement refers to (not attribute names or keywords)."""
    if node is None or isinstance(node, cst.RemovalSentinel):
        return set()
    roots: Sequence[cst.CSTNode] = list(node.nodes) if isinstance(node, cst.FlattenSentinel) else [node]
    out: set[str] = set()
    stack = list(roots)
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            out.add(current.value)
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)
        elif isinstance(current, cst.Arg):
            stack.append(current.value)
        else:
            stack.extend(children(current))
    return out
