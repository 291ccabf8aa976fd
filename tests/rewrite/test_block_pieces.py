"""Issue 38 item 1: a long class or function is parsed segment by segment (rewrite/block_pieces.py), so the
language server re-parses only the statements of its body an edit changed. Property: wherever the segments
join, the tree is exactly the whole text's parse (deep_equals, code, default indentation); texts made for each edge the
cut must respect; and a kept buffer edited inside one method re-parses that segment alone, with the
engine's outcome equal to a fresh run's."""

from __future__ import annotations

import libcst as cst
import pytest

from conftest import fixture_and_example_sources
from neuron_port.rewrite import chunks, block_pieces, syntax
from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rules.registry import all_rules


def _parse(text: str):
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None


def _same(a: cst.Module, b: cst.Module) -> bool:
    return a.code == b.code and a.deep_equals(b) and a.default_indent == b.default_indent


@pytest.fixture
def any_length(monkeypatch):
    monkeypatch.setattr(block_pieces, "MIN_BLOCK_CHARS", 0)


def test_joined_classes_equal_the_whole_parse_on_the_corpus(any_length):
    joined = 0
    for text in dict.fromkeys(fixture_and_example_sources()):
        if _parse(text) is None:
            continue
        for _offset, piece in chunks.pieces(text, 1):
            tree = block_pieces.parse_definition(piece, _parse)
            if tree is None:
                continue
            joined += 1
            assert _same(tree, cst.parse_module(piece)), piece
    assert joined >= 20  # the corpus has classes with several body statements


EDGES = {
    "comments between methods": (
        "class A:\n    x = 1\n\n    # at the body's level\n    def f(self):\n        return 1\n"
        "        # deeper: f's footer\n\n    # again\n\n    def g(self):\n        pass\n    # the body's footer\n"),
    "whitespace-only line in the gap": "class A:\n    def f(self):\n        pass\n    \n    def g(self):\n        pass\n",
    "comment less indented than the body": "class A:\n    def f(self):\n        pass\n  # odd\n    def g(self):\n        pass\n",
    "decorators": "class A:\n    @property\n    def f(self):\n        return 1\n\n    @staticmethod\n    @other(1,\n    2)\n    def g():\n        pass\n",
    "docstring lines at the body's level": (
        'class A:\n    """Doc.\n\n    def not_a_method(self):\n    x = 1\n    """\n    def f(self):\n        pass\n'),
    "string of single quotes spanning lines": "class A:\n    s = '''\n    y = 2\n    '''\n    t = 1\n",
    "bracket spanning lines at the body's level": "class A:\n    x = [\n    1,\n    2,\n    ]\n    y = (1,\n    2)\n",
    "backslash continuation": "class A:\n    x = 1 + \\\n    2\n    y = 3\n",
    "clauses at the body's level": "class A:\n    if X:\n        a = 1\n    elif Y:\n        a = 2\n    else:\n        a = 3\n    try:\n        import b\n    except ImportError:\n        b = None\n    finally:\n        pass\n",
    "nested class": "class A:\n    class B:\n        x = 1\n\n        def f(self):\n            pass\n    y = 2\n",
    "crlf": "class A:\r\n    x = 1\r\n\r\n    def f(self):\r\n        return 1\r\n",
    "tabs": "class A:\n\tx = 1\n\tdef f(self):\n\t\treturn 1\n",
    "header over lines": "class A(\n        Base,\n        metaclass=M):\n    x = 1\n    def f(self):\n        pass\n",
    "header comment": "class A:  # why\n    x = 1\n    y = 2\n",
    "no trailing newline": "class A:\n    x = 1\n    def f(self):\n        return 1",
    "statements after the class in the piece": "class A:\n    x = 1\n    y = 2\nz = 3\n",
    "body indented by 2": "class A:\n  x = 1\n  def f(self):\n    return 1\n",
    "one-line body": "class A: x = 1\n",
    "decorated class": "@dataclass\nclass A:\n    x: int = 1\n    y: int = 2\n",
    "function": "def main():\n    x = 1\n\n    # then\n    for i in range(3):\n        x += i\n    return x\n",
    "async function": "async def main():\n    x = await f()\n    async for y in g():\n        pass\n    yield x\n",
    "function header over lines": "def main(\n    a,\n    b: int = (1,\n    2),\n) -> None:\n    x = a\n    y = b\n",
    "decorated function with a multi-line decorator": "@app.command(\n    name='x',\n)\ndef main():\n    x = 1\n    y = 2\n",
    "function with a bracket in its header's string": "def main(a=')'):\n    x = 1\n    y = 2\n",
    "function body of clauses": "def main():\n    try:\n        x = 1\n    except E:\n        x = 2\n    else:\n        x = 3\n    while x:\n        x -= 1\n    else:\n        pass\n",
    "nonlocal and global": "def outer():\n    x = 1\n    def inner():\n        nonlocal x\n        global y\n        x = 2\n    return inner\n",
}


@pytest.mark.parametrize("text", EDGES.values(), ids=list(EDGES))
def test_edges_join_exactly_or_not_at_all(any_length, text):
    whole = cst.parse_module(text)
    tree = block_pieces.parse_definition(text, _parse)
    if tree is not None:
        assert _same(tree, whole)


def test_most_edges_are_cut(any_length):
    # the edges above must not all fall back to a whole parse (which would make them prove nothing)
    cut = [name for name, text in EDGES.items() if block_pieces.parse_definition(text, _parse) is not None]
    assert len(cut) >= 18, cut


def _long_class(methods: int) -> str:
    body = "".join(
        f"    def method_{i}(self, x):\n        '''Doc of {i}.\n\n    not code\n        '''\n"
        f"        y = x * {i}\n        return y.to('cpu')\n\n" for i in range(methods))
    return f"import torch\n\n\nclass Model(torch.nn.Module):\n    scale = 2\n\n{body}\nmodel = Model().cuda()\n"


def test_an_edit_reparses_its_method_alone():
    text = _long_class(120)
    assert len(text) > block_pieces.MIN_BLOCK_CHARS
    rules = list(all_rules())
    syntax.keep_parsed_pieces(2)
    try:
        first = transform_source(text, rules, EngineOptions(), path="m.py")
        assert syntax.last_reuse[1] == 0
        edited = text.replace("        y = x * 60\n", "        y = x.cuda() * 60\n")
        kept = transform_source(edited, rules, EngineOptions(), path="m.py")
        parsed, reused = syntax.last_reuse
        assert reused >= 100 and parsed <= 3, (parsed, reused)
        tree = syntax.parse_module(edited, "m.py")
    finally:
        syntax.keep_parsed_pieces(0)
    fresh = transform_source(edited, rules, EngineOptions(), path="m.py")
    assert (kept.code, kept.findings, kept.fixes_applied) == (fresh.code, fresh.findings, fresh.fixes_applied)
    assert any(f.code == "NP103" for f in kept.findings)
    assert _same(tree, cst.parse_module(edited))
    assert first.code != text  # the rewrite ran (the pieces were kept)


# CPython's check of a long text (syntax.cpython_syntax_error) takes a long definition by its body's segments
# too: an edit of one method re-checks that method alone, and the verdict is the whole text's.
BROKEN_BODIES = {
    "valid": "    x = 1\n\n    def f(self):\n        return 1\n",
    "bad header of a method": "    x = 1\n\n    def broken(:\n        pass\n",
    "bracket never closed": "    x = 1\n\n    def f(self):\n        y = (1,\n",
    "string never closed": '    x = 1\n\n    def f(self):\n        """never closed\n\n    def g(self):\n        pass\n',
    "dedent to no level": "    x = 1\n\n    def f(self):\n        return 1\n  y = 2\n",
    "tab after spaces": "    x = 1\n\n    def f(self):\n        return 1\n\tdef g(self):\n\t\tpass\n",
    "method without a body": "    x = 1\n\n    def f(self):\n\n    def g(self):\n        pass\n",
    "newer syntax": "    x = 1\n\n    def f[T](self, a: T) -> T:\n        return a\n",
}


def _long_module_with(body: str) -> str:
    methods = "".join(f"    def method_{i}(self, x):\n        return x * {i}\n\n" for i in range(400))
    block = "".join(f"\n\ndef f{i}(x):\n    return x + {i}\n" for i in range(300))
    return f"import os\n{block}\n\nclass Model:\n{methods}{body}{methods.replace('method_', 'later_')}{block}"


@pytest.mark.parametrize("body", BROKEN_BODIES.values(), ids=list(BROKEN_BODIES))
def test_cpython_verdict_by_body_segments_is_the_whole_verdict(body):
    import ast

    text = _long_module_with(body)
    assert len(text) > chunks.CHUNK_CHARS and block_pieces.body_segments(
        next(p for _o, p in chunks.segments(text) if p.startswith("\n\nclass Model"))) is not None
    try:
        ast.parse(text)
        expected = None
    except SyntaxError as exc:
        expected = (type(exc), exc.msg, exc.lineno, exc.offset)
    syntax._last_accepted[0] = ""
    syntax._accepted_pieces[:] = [frozenset(), frozenset()]
    error = syntax.cpython_syntax_error(text)
    assert (None if error is None else (type(error), error.msg, error.lineno, error.offset)) == expected


def test_an_edit_of_one_method_rechecks_that_method_alone(monkeypatch):
    text = _long_module_with(BROKEN_BODIES["valid"])
    syntax._last_accepted[0] = ""
    syntax._accepted_pieces[:] = [frozenset(), frozenset()]
    assert syntax.cpython_syntax_error(text) is None
    checked: list[str] = []
    real = syntax._cpython_error
    monkeypatch.setattr(syntax, "_cpython_error", lambda t: checked.append(t) or real(t))
    edited = text.replace("        return x * 200\n", "        return x.cuda() * 200\n", 1)
    assert syntax.cpython_syntax_error(edited) is None
    assert checked == ["class _:\n\n    def method_200(self, x):\n        return x.cuda() * 200\n"]
