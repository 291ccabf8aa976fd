"""Where the engine's findings are: PositionProvider's line and column ranges of the reported nodes, from
one render of the module that keeps a character offset (engine.py's ``_run_rules`` asks for them), and the
ancestors of each reported node (what a fix pass must rebuild to replace it)."""

from __future__ import annotations

from bisect import bisect_right
from contextlib import nullcontext
from typing import Iterable, Optional

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, PositionProvider
from libcst.metadata.position_provider import NEWLINE_RE as _LINE_BREAK
from libcst.metadata.position_provider import PositionProvidingCodegenState

from neuron_port.rewrite import traversal


class _Hoisted:
    """The ``with`` block of a wanted node's syntactic position: its range is the text rendered inside,
    or starts/ends where a child's does (``start_node``/``end_node``, as PositionProvider hoists them)."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: "_OffsetState", node, start_node, end_node) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = self.state.offset

    def __exit__(self, *exc_info) -> None:
        if exc_info[0] is not None:
            return  # the render stops (_AllFound): the range would be cut short
        ranges = self.state.ranges
        start = ranges[id(self.start_node)][0] if self.start_node is not None else self.start
        end = ranges[id(self.end_node)][1] if self.end_node is not None else self.state.offset
        ranges[id(self.node)] = (start, end)
        self.state.found(id(self.node))


class _AllFound(Exception):
    """Every wanted node has its range: the rest of the render would change none of them."""


_NOT_WANTED = nullcontext()


class _OffsetState(PositionProvidingCodegenState):
    """A render that keeps a character offset instead of PositionProvider's line and column per token
    (a regular-expression split each) and records ranges only for the wanted nodes and the children
    their ranges are hoisted from, under PositionProvider's rules: a syntactic range when the node
    declares one, else the whole text it rendered. It derives from PositionProvider's state (a public
    module) and replaces every method that tracks a position. It also keeps, for each wanted node, the
    nodes it is rendered inside (its ancestors: what a fix pass must rebuild to replace it). Nodes are
    keyed by ``id``: the tree is alive while it renders, and LibCST's ``__hash__`` is a Python call per
    node."""

    def __init__(self, module: cst.Module, wanted: Iterable[cst.CSTNode]) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline,
                         provider=None)
        self.offset = 0
        self.wanted = {id(node) for node in wanted}
        self._left = set(self.wanted)  # wanted nodes (not hoisted children) whose range is not known yet
        self.ranges: dict[int, tuple[int, int]] = {}
        self.paths: dict[int, tuple[cst.CSTNode, ...]] = {}
        # for each wanted node: the render start offsets of its ancestors and itself, and the indentation
        self.contexts: dict[int, tuple[tuple[int, ...], tuple[str, ...]]] = {}
        self._starts: list[int] = []
        self._open: list[cst.CSTNode] = []  # the nodes being rendered, outermost first
        self.popped = ""
        self.copies: Optional[dict[int, str]] = None  # id(statement) -> its text, copied (known_texts.py)

    def pop_trailing_newline(self) -> None:
        # gone from the text but not from the positions (PositionProvider counted it): keep it for them
        if self.tokens:
            self.popped = self.tokens.pop()

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        self.offset += sum(map(len, self.indent_tokens))

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._starts.append(self.offset)
        key = id(node)
        if key in self.wanted and key not in self.paths:
            self.paths[key] = tuple(self._open)
            self.contexts[key] = (tuple(self._starts), tuple(self.indent_tokens))
        self._open.append(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._starts.pop()
        self._open.pop()
        key = id(node)
        if key in self.wanted and key not in self.ranges:
            self.ranges[key] = (start, self.offset)
            self.found(key)

    def found(self, key: int) -> None:
        """``key``'s range is known; once every wanted node's is, the render stops."""
        self._left.discard(key)
        if not self._left:
            raise _AllFound

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):  # type: ignore[override]
        if id(node) not in self.wanted:
            return _NOT_WANTED
        # the children hoisted from are rendered inside this block, after this call: record them too
        self.wanted.update(id(n) for n in (start_node, end_node) if n is not None)
        return _Hoisted(self, node, start_node, end_node)


def _codegen_or_copy(self: cst.CSTNode, state, **kwargs) -> None:
    """CSTNode._codegen while a render with copies runs: a statement whose text is known is copied (only
    a state that carries ``copies``; every other render goes as LibCST's own method goes)."""
    copies = getattr(state, "copies", None)
    if copies:
        text = copies.get(id(self))
        if text is not None:
            state.add_token(text)
            return
    state.before_codegen(self)
    self._codegen_impl(state, **kwargs)
    state.after_codegen(self)


_CODEGEN = cst.CSTNode._codegen  # LibCST's own (what _codegen_or_copy does without copies)


def _render(module: cst.Module, state: "_OffsetState", copies: Optional[dict[int, str]]) -> None:
    patched = bool(copies) and cst.CSTNode._codegen is _CODEGEN
    if patched:
        state.copies = copies
        cst.CSTNode._codegen = _codegen_or_copy  # type: ignore[method-assign]
    try:
        module._codegen(state)
    except _AllFound:  # the text after the last wanted node places none of them
        pass
    finally:
        if patched:
            cst.CSTNode._codegen = _CODEGEN  # type: ignore[method-assign]


def node_positions(module: cst.Module, wanted: Iterable[cst.CSTNode],
                   ancestors: Optional[dict[cst.CSTNode, tuple[cst.CSTNode, ...]]] = None,
                   contexts: Optional[dict] = None, code: Optional[str] = None,
                   copies: Optional[dict[int, str]] = None) -> dict[cst.CSTNode, CodeRange]:
    """PositionProvider's range of each ``wanted`` node, from one render of ``module`` that tracks
    offsets; lines and columns are counted once, for those nodes only. Resolving PositionProvider through
    MetadataWrapper cost four times a plain render: a line/column update per token, a range per node, and
    a tree-rebuilding visit that computed nothing. ``ancestors``, when given, gets each wanted node's
    ancestors from the same render (outermost first; left empty with an untested LibCST); ``contexts``
    (with ``ancestors``), the render start offsets of those ancestors and of the node, and the indentation
    it renders at (rewrite/splice.py). ``copies`` (``id(statement) -> text``, known_texts.py; with
    ``code``, the text ``module`` renders): statements holding no wanted node whose text is copied, not
    rendered; when the text so made is not ``code``'s, the module is rendered again without copies."""
    wanted = list(wanted)
    if not traversal.FAST_WALK:  # an untested LibCST: its public API, whatever its internals
        every = cst.MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        return {node: every[node] for node in wanted}
    if code is None:
        copies = None
    state = _OffsetState(module, wanted)
    _render(module, state, copies)
    if copies and not code.startswith("".join(state.tokens)):  # a copy was not the statement's render
        state = _OffsetState(module, wanted)
        _render(module, state, None)
    if ancestors is not None:
        ancestors.update((node, state.paths[id(node)]) for node in wanted)
        if contexts is not None:
            contexts.update((node, state.contexts[id(node)]) for node in wanted)
    text = "".join(state.tokens) + state.popped
    line_starts = [0]
    line_starts.extend(match.end() for match in _LINE_BREAK.finditer(text))

    def position(offset: int) -> CodePosition:
        line = bisect_right(line_starts, offset)
        return CodePosition(line, offset - line_starts[line - 1])

    return {node: CodeRange(position(state.ranges[id(node)][0]), position(state.ranges[id(node)][1]))
            for node in wanted}
