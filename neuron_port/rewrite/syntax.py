"""Parsing a file without risk to the process, and saying clearly why a file does not parse.

LibCST's native parser recurses on the C stack: about 1,300 nested brackets overflow the main thread's
8 MB stack and kill the process with SIGSEGV (no report, no other file written). So the parse runs in
a thread with a large stack (PARSE_STACK_BYTES, reserved address space: only the pages a deep file
touches are used), and a text long enough to nest deeper than that stack can hold goes through
CPython's own parser first, which refuses deep nesting with a SyntaxError instead of crashing
(200 brackets, ~6,000 parser levels) and is ~7x faster than LibCST's parse.

A file the running Python cannot parse but a newer one can (PEP 695 ``type X = ...`` and ``def f[T]()``,
PEP 701 f-strings, PEP 758 ``except A, B:``) is reported as "needs Python 3.12 (running 3.11)" rather
than as a syntax error or an internal error: the rewritten file could not be checked here.
"""

from __future__ import annotations

import ast
import re
import sys
import threading
from collections import OrderedDict
from typing import Callable, Optional, TypeVar

import libcst as cst
from libcst._nodes.base import CSTNode

from neuron_port.rewrite.chunks import CHUNK_CHARS, parse_in_pieces, run_in_pieces, segments
from neuron_port.rewrite.block_pieces import body_segments, each_segment, parse_definition
from neuron_port.rewrite.known_texts import remember

PARSE_STACK_BYTES = 256 * 2**20
# Measured: one nesting level costs LibCST up to ~6.4 KB of stack (a bracket: 2 characters); an unclosed
# bracket is one character per level. Texts up to this many characters cannot overflow PARSE_STACK_BYTES
# (2.5x margin); longer ones are checked by CPython's parser first.
SHALLOW_CHARS = PARSE_STACK_BYTES // (6400 * 5 // 2)

RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"

# (regex on the line CPython's SyntaxError points at, minimum version, what the syntax is). Checked only
# after a failed parse, and only believed when LibCST (whose grammar knows the newer syntax) parses it.
_NEWER_SYNTAX: tuple[tuple[re.Pattern, tuple[int, int], str], ...] = (
    (re.compile(r"^\s*type\s+[A-Za-z_]\w*\s*[=\[]"), (3, 12), "a `type` alias statement (PEP 695)"),
    (re.compile(r"\b(?:def|class)\s+[A-Za-z_]\w*\s*\["), (3, 12), "type parameters (PEP 695)"),
    (re.compile(r"^\s*except\*?\s*[^\s(:][^:]*,[^:]*:"), (3, 14), "`except` with unparenthesised types (PEP 758)"),
)

_T = TypeVar("_T")
_stack_size_lock = threading.Lock()


class NestingError(Exception):
    """The file nests deeper than can be parsed safely."""


def run_with_big_stack(function: Callable[[], _T]) -> _T:
    """``function()`` in a thread whose C stack is PARSE_STACK_BYTES; its exception is re-raised here.
    The thread is a daemon: Ctrl-C (raised in the waiting main thread) does not wait for it."""
    outcome: list = []

    def target() -> None:
        try:
            outcome.append((True, function()))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append((False, exc))

    with _stack_size_lock:  # stack_size() is process-wide: set it only for this thread's creation
        previous = threading.stack_size(PARSE_STACK_BYTES)
        try:
            thread = threading.Thread(target=target, name="neuron-port-parse", daemon=True)
            thread.start()
        finally:
            threading.stack_size(previous)
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _no_validation(_node: CSTNode) -> None:
    return None


# LibCST's own: a node's dataclass __init__ calls it, and it runs the node's _validate().
_VALIDATE_NODE = CSTNode.__post_init__


def parse_unvalidated(text: str) -> cst.Module:
    """``cst.parse_module(text)``, without re-validating each node the native parser builds. LibCST's
    parser makes its Python tree by calling every node class, whose ``__post_init__`` runs ``_validate``
    (parentheses balanced, whitespace where a keyword needs it): checks of what a hand-built node may get
    wrong, which the parser's output meets by construction (its grammar is what they check), and about an
    eighth of the parse. Switched off only for the parse itself (the engine waits for the parse thread;
    nodes the rules build are still validated) and only while ``CSTNode.__post_init__`` is the method
    this was written against (tests/rewrite/test_parse_unvalidated.py compares the trees with validated parses)."""
    if CSTNode.__post_init__ is not _VALIDATE_NODE:
        return cst.parse_module(text)
    CSTNode.__post_init__ = _no_validation  # type: ignore[method-assign]
    try:
        return cst.parse_module(text)
    finally:
        CSTNode.__post_init__ = _VALIDATE_NODE  # type: ignore[method-assign]


def needs_newer_python(code: str, error: SyntaxError) -> Optional[str]:
    """"needs Python 3.12 (running 3.11): <what>" when ``code`` failed CPython's parser only because it
    uses syntax of a newer Python; else None."""
    lines = code.splitlines()
    line = lines[error.lineno - 1] if error.lineno and 0 < error.lineno <= len(lines) else ""
    found: Optional[tuple[tuple[int, int], str]] = None
    for pattern, version, what in _NEWER_SYNTAX:
        if sys.version_info < version and pattern.search(line):
            found = (version, what)
            break
    if found is None and sys.version_info < (3, 12) and (error.msg or "").startswith("f-string"):
        found = ((3, 12), f"an f-string that only Python 3.12 accepts (PEP 701: {error.msg})")
    if found is None:
        return None
    try:
        run_with_big_stack(lambda: cst.parse_module(code))
    except (cst.ParserSyntaxError, RecursionError):
        return None  # not valid in the newer grammar either: an ordinary syntax error
    version, what = found
    return f"needs Python {version[0]}.{version[1]} (running {RUNNING}): {what}"


# The last text CPython accepted: the engine asks about a rewritten text twice (before re-parsing it with
# LibCST and when checking the output), and on a long file each ast.parse costs half a LibCST parse.
_last_accepted: list[str] = [""]
# The top-level pieces of the last two long texts CPython accepted piece by piece: a rewritten text's
# pieces that are unchanged need no second parse, nor (the language server) the next edit's buffer's,
# whose last accepted text before it was the previous buffer's rewrite.
_accepted_pieces: list[frozenset] = [frozenset(), frozenset()]


def _cpython_error(code: str) -> Optional[SyntaxError]:
    try:
        ast.parse(code)
    except (RecursionError, MemoryError):
        raise NestingError("nested too deeply to parse") from None
    except SyntaxError as exc:
        if "too many nested" in (exc.msg or "") or "too complex" in (exc.msg or ""):
            raise NestingError(f"nested too deeply to parse ({exc.msg}, line {exc.lineno})") from None
        return exc
    except ValueError as exc:  # e.g. "source code string cannot contain null bytes"
        return SyntaxError(str(exc))
    return None


def _accepted_in_pieces(code: str) -> bool:
    """True when CPython accepts every top-level piece of ``code`` (then it accepts the whole text:
    chunks.py); False when a piece fails, even after joining it with the next (the whole text then gives
    CPython's exact verdict). ast.parse of a 2 MB text peaks near 250 MB; its pieces, near nothing."""
    if "barry_as_FLUFL" in code:
        return False
    older, before = _accepted_pieces
    accepted: set[str] = set()

    def attempt(text: str) -> Optional[bool]:
        if text not in before and text not in older:
            try:
                if _cpython_error(text) is not None:
                    return None
            except NestingError:
                return None
        accepted.add(text)
        return True

    def attempt_piece(text: str) -> Optional[bool]:
        # a long class or function: its body's segments (block_pieces.py), each after the first inside
        # `class _:` (the tokenizer stands there as in the whole text; ast.parse accepts `return`, `await`
        # and the like in a class body: those are the compiler's errors, not the parser's), so that an edit
        # of one method re-checks that method; the whole piece when a segment fails
        if text in before or text in older:
            accepted.add(text)
            return True
        cut = body_segments(text)
        if cut is not None and each_segment(cut, attempt) is not None:
            return True
        return attempt(text)

    if run_in_pieces(segments(code), attempt_piece) is None:
        return False
    _accepted_pieces[:] = [before, frozenset(accepted)]
    return True


def cpython_syntax_error(code: str) -> Optional[SyntaxError]:
    """CPython's SyntaxError for ``code`` (None when it parses). Deep nesting becomes NestingError."""
    if code is _last_accepted[0] or code == _last_accepted[0]:
        return None
    if len(code) > CHUNK_CHARS and _accepted_in_pieces(code):
        _last_accepted[0] = code
        return None
    error = _cpython_error(code)
    if error is None:
        _last_accepted[0] = code
    return error


def describe_syntax_error(code: str, error: SyntaxError, path: str) -> str:
    """``path:line:col: <why>`` for a file CPython does not parse."""
    where = f"{path}:{error.lineno}:{(error.offset or 0) or 1}" if error.lineno else path
    newer = needs_newer_python(code, error)
    if newer:
        return f"{where}: {newer}; file left unchanged"
    return f"{where}: syntax error: {error.msg}"


# Parse reuse (issue 38 item 1): for a process that parses the same files again and again (the language
# server: one parse per edit of a buffer), the top-level pieces of each file's last parse, by their text.
# Off (None) unless keep_parsed_pieces() turns it on: a one-shot run would only hold the last file's tree
# in memory for nothing. A piece's tree is a function of its text alone (chunks.py: every piece starts as
# at its line of the whole text), and LibCST trees are immutable, so a kept piece joins the new tree as a
# fresh parse of the same text would; a text that occurs twice in one file is parsed twice (a node object
# stands at one place of a tree only: rules key their state by node).
_kept_pieces: Optional["OrderedDict[str, dict[str, cst.Module]]"] = None
_kept_files = 0
# The kept pieces' size: 1 makes every top-level statement its own piece, so an edit changes one piece's
# text only (chunks.pieces groups statements up to its limit, and a grown group moves every later cut).
KEPT_PIECE_CHARS = 1
# (pieces parsed, pieces reused) by the last parse_module call with the pieces kept: tests and benches
last_reuse: list[int] = [0, 0]


def keep_parsed_pieces(files: int) -> None:
    """Keep the top-level pieces of the last parse of up to ``files`` files (0: keep none, the default)."""
    global _kept_pieces, _kept_files
    _kept_files = files
    _kept_pieces = OrderedDict() if files > 0 else None


def _parse_reusing(code: str, path: str) -> cst.Module:
    kept = _kept_pieces
    if kept is None:
        return parse_in_pieces(code, parse_piece) or parse_unvalidated(code)
    before = kept.pop(path, {})
    used: dict[str, cst.Module] = {}
    counts = [0, 0]

    def parse(text: str) -> Optional[cst.Module]:
        tree = before.get(text) if text not in used else None
        if tree is None:
            tree = parse_piece(text)
            counts[0] += 1
        else:
            counts[1] += 1
        if tree is not None:
            used.setdefault(text, tree)
        return tree

    def parse_top(text: str) -> Optional[cst.Module]:
        # a long class or function is kept by its body's segments (block_pieces.py); its own tree is rebuilt
        if text in before and text not in used:
            return parse(text)
        return parse_definition(text, parse) or parse(text)

    module = parse_in_pieces(code, parse_top, limit=KEPT_PIECE_CHARS)
    if module is None:  # one piece, or pieces that disagree: the whole text is one piece of its own
        used.clear()
        module = before.get(code)
        if module is None:
            module = parse_unvalidated(code)
            counts[0] += 1
        else:
            counts[1] += 1
        used[code] = module
    kept[path] = used
    remember(module, used)  # the statements parsed alone: the positions' render copies their text
    while len(kept) > _kept_files:
        kept.popitem(last=False)
    last_reuse[:] = counts
    return module


def parse_module(code: str, path: str) -> cst.Module:
    """LibCST's parse of ``code``, never crashing the process. Raises NestingError for nesting it cannot
    parse safely, SyntaxError (with a message from describe_syntax_error) when CPython refuses a long text,
    and cst.ParserSyntaxError as LibCST does."""
    if len(code) > SHALLOW_CHARS:
        error = cpython_syntax_error(code)
        if error is not None:
            raise SyntaxError(describe_syntax_error(code, error, path))
    try:
        return run_with_big_stack(lambda: _parse_reusing(code, path))
    except RecursionError:
        raise NestingError("nested too deeply to parse") from None


def parse_piece(text: str) -> Optional[cst.Module]:
    """LibCST's parse of one piece of a long text (whose nesting CPython has checked when it is long
    enough to matter), None when it does not parse on its own."""
    try:
        return parse_unvalidated(text)
    except (cst.ParserSyntaxError, RecursionError):
        return None
