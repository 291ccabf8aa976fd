"""Issue 38 item 1: the language server keeps each buffer's top-level pieces parsed
(syntax.keep_parsed_pieces) and an edit re-parses only the pieces whose text changed. Property: on every
fixture and rule example, cut into small pieces so that most texts have several, the text and edited
versions of it parse with the kept pieces to exactly the tree of a fresh parse (deep_equals, code), and
the engine's outcome (code, findings with places and messages, fix count, error) is the fresh one's.
The suite checks a fixed subset of the corpus (sample_of_the_corpus: each fixture project's first file,
each rule's first VALID and first INVALID example); NEURON_PORT_FULL_SWEEPS=1 checks all of it.
bench/rewrite/bench_parse_reuse.py checks the same on real files."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import libcst as cst
import pytest

from conftest import FIXTURES, FULL_SWEEPS, fixture_and_example_sources
from neuron_port.rewrite import chunks, syntax
from neuron_port.rewrite.engine import EngineOptions, RewriteError, transform_source
from neuron_port.rules.registry import all_rules

RULES = list(all_rules())


@pytest.fixture
def small_pieces(monkeypatch):
    # pieces of ~100 characters: the corpus's texts are short, the server's buffers long
    monkeypatch.setattr(syntax, "parse_in_pieces", functools.partial(chunks.parse_in_pieces, limit=100))
    monkeypatch.setattr(syntax, "KEPT_PIECE_CHARS", 100)  # the kept path's own limit (1: one per statement)
    yield
    syntax.keep_parsed_pieces(0)


def _versions(text: str):
    """``text``, then edits of it a user makes: a line inserted in the middle, the last line changed,
    then the text again (every piece kept)."""
    yield text
    lines = text.splitlines(keepends=True)
    if len(lines) > 2:
        middle = len(lines) // 2
        line = lines[middle]
        indent = line[:len(line) - len(line.lstrip())]
        inserted = "".join(lines[:middle] + [f"{indent}probe = torch.ones(1).cuda()\n"] + lines[middle:])
        try:
            ast.parse(inserted)
            yield inserted
        except SyntaxError:
            pass
        yield "".join(lines[:-1]) + "x = 1\n"
    yield text


def _outcome(text: str):
    try:
        out = transform_source(text, RULES, EngineOptions(), path="t.py")
    except RewriteError as exc:
        return ("error", str(exc))
    return (out.code, out.findings, out.fixes_applied, out.skipped)


def _tree(text: str):
    try:
        return syntax.parse_module(text, "t.py")
    except (cst.ParserSyntaxError, SyntaxError, syntax.NestingError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return a.code == b.code and a.deep_equals(b) and a.default_indent == b.default_indent


def sample_of_the_corpus():
    """A fixed part of fixture_and_example_sources() (a third of its time) that keeps each kind of text:
    the first file of each fixture project (expected/ counting as one; the long texts of many pieces), and
    each rule's first VALID and first INVALID example (every rule runs on kept pieces, fires on them where
    it fires, and stays quiet where it should)."""
    projects: dict[str, Path] = {}
    for path in sorted(FIXTURES.rglob("*.py")):
        projects.setdefault(path.relative_to(FIXTURES).parts[0], path)
    for path in projects.values():
        yield path.read_text(encoding="utf-8", errors="replace")
    for rule in RULES:
        for examples in (rule.VALID, rule.INVALID):
            for example in list(examples)[:1]:
                yield example if isinstance(example, str) else example.source()


def test_kept_pieces_parse_as_a_fresh_parse(small_pieces):
    reused = 0
    compared = 0
    corpus = fixture_and_example_sources() if FULL_SWEEPS else sample_of_the_corpus()
    for text in dict.fromkeys(corpus):
        versions = list(_versions(text))
        syntax.keep_parsed_pieces(2)
        kept = []
        for version in versions:
            kept.append((_tree(version), _outcome(version)))
            reused += syntax.last_reuse[1]
        syntax.keep_parsed_pieces(0)
        for version, (tree, outcome) in zip(versions, kept):
            assert _same(_tree(version), tree), version[:300]
            assert _outcome(version) == outcome, version[:300]
            compared += 1
    # not vacuous: most versions after a file's first reused pieces
    least = (1000, 2000) if FULL_SWEEPS else (500, 800)
    assert compared > least[0] and reused > least[1], (compared, reused)


def test_a_repeated_piece_is_not_one_node_at_two_places(small_pieces):
    """Two top-level pieces with the same text: a node object stands at one place of a tree only (rules
    key their state by node), so the second is parsed again, not shared."""
    block = "\n\ndef f(x):\n    return x.cuda()  # the same text twice, long enough to be a piece of its own, one of three\n"
    text = "import torch\n" + block + block + block
    assert [piece for _, piece in chunks.pieces(text, 100)][1:] == [block, block]
    syntax.keep_parsed_pieces(1)
    first = syntax.parse_module(text, "t.py")
    assert syntax.last_reuse == [3, 0]
    second = syntax.parse_module(text, "t.py")
    assert syntax.last_reuse == [1, 2]  # the first two pieces kept, the repeated one parsed again
    for tree in (first, second):
        ids = [id(statement) for statement in tree.body]
        assert len(set(ids)) == len(ids) == 4
        assert tree.code == text
    out = transform_source(text, RULES, EngineOptions(), path="t.py")
    assert out.code.count('.to("neuron")') == 3


def test_the_pieces_of_other_files_are_kept_apart(small_pieces):
    syntax.keep_parsed_pieces(1)
    text = "import torch\n\n\ndef f(x):\n    return x.cuda()  # a piece of its own, long enough\n\n\n" * 2
    syntax.parse_module(text, "a.py")
    syntax.parse_module(text, "b.py")  # a.py's pieces go: one file is kept
    syntax.parse_module(text, "a.py")
    assert syntax.last_reuse[1] == 0


def test_the_next_buffer_reuses_the_segments_cpython_accepted_two_texts_ago(monkeypatch):
    """The server checks a buffer, then its rewrite, then the next edit's buffer: the segments the edit
    did not change were accepted two texts ago and are not parsed again."""
    body = "".join(f"\n\ndef step_{i}(x):\n    return x.cuda() + {i}\n" for i in range(600))
    text = "import torch\n" + body
    assert len(text) > chunks.CHUNK_CHARS
    syntax._last_accepted[0] = ""
    assert syntax.cpython_syntax_error(text) is None
    assert syntax.cpython_syntax_error(text.replace(".cuda()", '.to("neuron")')) is None
    parsed: list[str] = []
    real = syntax._cpython_error
    monkeypatch.setattr(syntax, "_cpython_error", lambda t: parsed.append(t) or real(t))
    edited = text.replace("+ 300\n", "+ 300 + 1\n")
    assert syntax.cpython_syntax_error(edited) is None
    assert parsed == ["\n\ndef step_300(x):\n    return x.cuda() + 300 + 1\n"]
    assert syntax.cpython_syntax_error(edited.replace("+ 1\n", "+ (1\n")) is not None  # and errors still found
