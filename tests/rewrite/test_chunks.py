"""A long module parsed piece by piece (neuron_port/rewrite/chunks.py) gives exactly the tree of the whole
text, and CPython's verdict piece by piece is its verdict on the whole text; a split point that is
wrong (inside a string, a bracket, a decorator) costs a re-parse, never a different tree."""

from __future__ import annotations

import ast

import libcst as cst
import pytest
from libcst._nodes.deep_equals import deep_equals

from conftest import FIXTURES
from neuron_port.rewrite import syntax
from neuron_port.rewrite.chunks import parse_in_pieces, pieces, segments, split_points
from neuron_port.rewrite.syntax import parse_piece, cpython_syntax_error
from neuron_port.rules.registry import all_rules


def _same_tree(joined: cst.Module, whole: cst.Module, text: str) -> bool:
    return (deep_equals(joined, whole) and joined.code == text
            and (joined.default_indent, joined.default_newline, joined.encoding, joined.has_trailing_newline)
            == (whole.default_indent, whole.default_newline, whole.encoding, whole.has_trailing_newline))


def _corpus():
    for path in sorted(FIXTURES.rglob("*.py")):
        yield path.read_text(encoding="utf-8")
    for rule in all_rules():
        for example in list(rule.VALID) + list(rule.INVALID):
            yield example if isinstance(example, str) else example.source()


# Texts made to fall on each edge of the split rule; each is parsed whole and in pieces of 1 character
# (every split point used).
EDGES = {
    "blank lines and comments above a def": "import os\n\n\n# one\n# two\ndef f():\n    return 1\n\n\nclass A:\n"
                                            "    x = 1\n",
    "a def at column 0 inside a docstring": 'def f():\n    """Example:\n\ndef g():\n    pass\n"""\n\n\ndef h():\n'
                                            "    pass\n",
    "a def at column 0 inside a bracket": "import os\ny = (os\n\n@ os)\n\n\ndef g():\n    pass\n",
    "a multi-line decorator": "import functools\n\n\n@functools.lru_cache(\n    maxsize=None,\n)\ndef f():\n"
                              "    return 1\n\n\n@staticmethod\n\ndef g():\n    pass\n",
    "an indented comment after a block": "def f():\n    x = 1\n\n    # the block's footer\n\ndef g():\n    pass\n",
    "a whitespace-only line after a block": "def f():\n    x = 1\n    \n\ndef g():\n    pass\n",
    "a backslash before a blank line": "x = 1 \\\n\ndef g():\n    pass\n",
    "two-space indentation, first piece without a block": "import os\nX = 1\n\n\ndef f():\n  return 1\n\n\n"
                                                            "def g():\n  if X:\n    return 2\n",
    "one-line suites only in a piece": "import os\n\n\nclass A: pass\n\n\ndef f():\n  return 1\n",
    "CRLF newlines": "import os\r\n\r\n\r\ndef f():\r\n    return 1\r\n\r\n\r\nclass A:\r\n    pass\r\n",
    "mixed newlines": "import os\n\n\ndef f():\r\n    return 1\r\n\r\n\r\nclass A:\n    pass\n",
    "tabs": "import os\n\n\ndef f():\n\treturn 1\n\n\ndef g():\n\tif os:\n\t\treturn 2\n",
    "no trailing newline": "import os\n\n\ndef f():\n    return 1\n\n\ndef g():\n    pass",
    "comments at the end": "def f():\n    pass\n\n\ndef g():\n    pass\n\n# the end\n\n",
    "a coding cookie in a later piece": "# -*- coding: utf-8 -*-\nimport os\n\n\ndef f():\n    pass\n"
                                        "# -*- coding: latin-1 -*-\ndef g():\n    pass\n",
    "async def and a form feed": "import os\n\x0c\ndef f():\n    pass\n\n\nasync def g():\n    await f()\n",
    # flat modules (issue 33): every top-level statement is a split point
    "flat statements, comments between": "import os\nx = 1\n\n# about y\ny = [x,\n2]\nz = x; w = y\n"
                                         "print(x)  # done\n",
    "compound statements and their clauses": "if x:\n    pass\nelif y:\n    pass\nelse:\n    pass\ntry:\n"
                                             "    pass\nexcept E:\n    pass\nelse:\n    pass\nfinally:\n"
                                             "    pass\nfor i in x:\n    pass\nelse:\n    pass\nwhile x:\n"
                                             "    break\nwith x as y:\n    pass\nmatch x:\n    case 1:\n"
                                             "        pass\n",
    "a statement at column 0 inside a string": 'x = """\ny = 1\n"""\nz = 2\nw = f"""\n{z}\nv = 3\n"""\n',
    "a statement at column 0 inside a bracket": "x = (1,\ny)\nz = {\n'a': 1,\n}\ncall(\n)\n",
    "a backslash continuation": "x = 1 + \\\n2\ny = 3\n",
    "flat, CRLF and a last line without newline": "import os\r\nx = 1\r\n\r\n# c\r\ny = 2",
    "flat with a block's footer comment": "if x:\n    y = 1\n    # footer\nz = 2\n",
    "a future import below a docstring": '"""doc"""\nfrom __future__ import annotations\nimport os\nx = 1\n',
}


@pytest.mark.parametrize("name", sorted(EDGES))
def test_edges_parse_as_the_whole_text(name):
    text = EDGES[name]
    whole = cst.parse_module(text)
    joined = parse_in_pieces(text, parse_piece, limit=1)
    assert joined is None or _same_tree(joined, whole, text), name


def test_edges_are_mostly_joined():
    """The split rule is not so careful that it never splits: most edge texts do come back in pieces."""
    joined = [name for name, text in EDGES.items() if parse_in_pieces(text, parse_piece, limit=1) is not None]
    assert len(joined) >= len(EDGES) // 2, joined


def test_docstring_split_point_is_joined_again():
    text = EDGES["a def at column 0 inside a docstring"]
    assert len(segments(text)) == 3  # one split point inside the docstring, one real one
    joined = parse_in_pieces(text, parse_piece, limit=1)
    assert joined is not None and _same_tree(joined, cst.parse_module(text), text)


def test_fixtures_and_rule_examples_parse_as_the_whole_text():
    joined_count = 0
    for text in _corpus():
        try:
            whole = cst.parse_module(text)
        except cst.ParserSyntaxError:
            continue
        joined = parse_in_pieces(text, parse_piece, limit=200)
        if joined is not None:
            joined_count += 1
            assert _same_tree(joined, whole, text), text[:200]
    assert joined_count >= 20


def _flat(lines: int) -> str:
    """A script of top-level statements only (no def or class), as issue 33 measured it."""
    return "import torch\n\n" + "".join(f"x_{i} = torch.randn({i % 7 + 1}, 4).cuda()  # {i}\n"
                                        for i in range(lines))


def test_flat_module_is_cut_into_bounded_pieces():
    """Issue 33: a module of top-level statements was one piece (LibCST's whole-text parse: 921 MB for
    30,000 lines); it is cut like a module of functions, into pieces near CHUNK_CHARS."""
    text = _flat(3000)
    assert len(text) > 7 * syntax.CHUNK_CHARS
    cut = pieces(text)
    assert len(cut) >= len(text) // syntax.CHUNK_CHARS
    assert max(len(t) for _o, t in cut) <= syntax.CHUNK_CHARS + 100
    module = syntax.parse_module(text, "flat.py")
    assert _same_tree(module, cst.parse_module(text), text)
    assert 1 < len(segments(text)) and max(len(t) for _o, t in segments(text)) <= 4_100


def test_flat_module_rewrites_as_the_whole_parse(monkeypatch):
    """Findings and output of the engine on a flat module, parsed in pieces and whole, are the same."""
    from neuron_port.rewrite.engine import transform_source

    text = _flat(1500).replace("x_7 = ", "if x_6:\n    x_7 = ").replace("x_9 = ", "from torch import cuda\nx_9 = ")
    rules = list(all_rules())
    split = transform_source(text, rules, path="flat.py")
    monkeypatch.setattr(syntax, "parse_in_pieces", lambda *args, **kwargs: None)
    whole = transform_source(text, rules, path="flat.py")
    assert split.code == whole.code and split.code != text
    assert split.findings == whole.findings and len(split.findings) >= 1500


def test_pieces_cover_the_text():
    text = "".join(EDGES.values()) * 3
    cut = pieces(text, limit=100)
    assert "".join(t for _o, t in cut) == text
    assert all(text[o:o + len(t)] == t for o, t in cut)
    assert [o for o, _t in cut][1:] == sorted({o for o, _t in cut[1:]})
    assert set(o for o, _t in cut[1:]) <= set(split_points(text))


def _long(middle: str) -> str:
    block = "".join(f"\n\ndef f{i}(x):\n    return x + {i}\n" for i in range(600))
    return "import os\n" + block + middle + block


@pytest.mark.parametrize("middle", [
    "\n\ndef broken(:\n    pass\n",
    "\n\ndef g():\n    x = (1,\n",
    '\n\ndef g():\n    """never closed\n\ndef h():\n    pass\n',
    "\n\ntype Alias = int\n",
    "\n\ndef g():\n    return 1\n",
])
def test_cpython_verdict_in_pieces_is_the_whole_verdict(middle):
    text = _long(middle)
    assert len(text) > syntax.CHUNK_CHARS
    try:
        ast.parse(text)
        expected = None
    except SyntaxError as exc:
        expected = (exc.msg, exc.lineno, exc.offset)
    syntax._last_accepted[0] = ""
    error = cpython_syntax_error(text)
    assert (None if error is None else (error.msg, error.lineno, error.offset)) == expected


def test_rewritten_text_reuses_the_accepted_pieces(monkeypatch):
    text = _long("\n\ndef g():\n    return 1\n")
    syntax._last_accepted[0] = ""
    assert cpython_syntax_error(text) is None
    parsed: list[str] = []
    real = syntax._cpython_error
    monkeypatch.setattr(syntax, "_cpython_error", lambda t: parsed.append(t) or real(t))
    changed = text.replace("return 1\n", "return 2\n")
    assert cpython_syntax_error(changed) is None
    assert parsed == ["\n\ndef g():\n    return 2\n"]  # only the changed piece was parsed again


def test_long_module_parses_in_pieces_through_parse_module(monkeypatch):
    text = _long("\n\ndef g():\n    return 1\n")
    calls: list[int] = []
    real = syntax.parse_piece
    monkeypatch.setattr(syntax, "parse_piece", lambda t: calls.append(len(t)) or real(t))
    module = syntax.parse_module(text, "long.py")
    assert len(calls) > 1 and max(calls) <= syntax.CHUNK_CHARS + 100
    assert _same_tree(module, cst.parse_module(text), text)
