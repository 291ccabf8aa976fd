"""Issue 38: with a buffer's pieces kept (the language server), the render that places the findings copies
the text of each statement parsed alone that holds no finding (rewrite/known_texts.py) instead of rendering
it. Property: on the fixtures and rule examples, with every class and function body cut into statements,
each version's outcome (code, findings with their places, fix count) equals a fresh run's, and copies were
made; a wrong text is caught (the render is checked against the buffer's text) and rendered again."""

from __future__ import annotations

import pytest

from neuron_port.rewrite import block_pieces, known_texts, positions, syntax
from tests.rewrite.test_parse_reuse import _outcome, _versions, sample_of_the_corpus


@pytest.fixture
def every_body_cut(monkeypatch):
    monkeypatch.setattr(block_pieces, "MIN_BLOCK_CHARS", 0)
    renders: list[int] = []  # the number of copies of each render
    real = positions._render
    monkeypatch.setattr(positions, "_render", lambda module, state, copies: (
        renders.append(len(copies or {})), real(module, state, copies))[1])
    yield renders
    syntax.keep_parsed_pieces(0)


def _kept_then_fresh(texts):
    syntax.keep_parsed_pieces(2)
    kept = [_outcome(text) for text in texts]
    syntax.keep_parsed_pieces(0)
    return kept, [_outcome(text) for text in texts]


def test_findings_placed_with_copies_are_a_fresh_runs(every_body_cut):
    compared = 0
    for text in dict.fromkeys(sample_of_the_corpus()):
        versions = list(_versions(text))
        kept, fresh = _kept_then_fresh(versions)
        for version, a, b in zip(versions, kept, fresh):
            assert a == b, version[:300]
            compared += 1
    assert compared > 300
    assert sum(every_body_cut) > 200  # not vacuous: the kept runs copied statements (the fresh ones none)


def _long_class(methods: int) -> str:
    body = "".join(f"    def method_{i}(self, x):\n        y = x * {i}\n        return y.to('cpu')\n\n"
                   for i in range(methods))
    return f"import torch\n\n\nclass Model(torch.nn.Module):\n    scale = 2\n\n{body}\nmodel = Model().cuda()\n"


def test_an_edit_of_one_method_renders_the_methods_with_findings_alone(monkeypatch):
    renders: list[int] = []
    real = positions._render
    monkeypatch.setattr(positions, "_render", lambda module, state, copies: (
        renders.append(len(copies or {})), real(module, state, copies))[1])
    text = _long_class(150)
    edited = text.replace("        y = x * 70\n", "        y = x.cuda() * 70\n")
    kept, fresh = _kept_then_fresh([text, edited])
    assert kept == fresh
    assert any(f.code == "NP103" and f.line == 4 + 2 + 70 * 4 + 2 for f in kept[1][1]), kept[1][1]
    # the edited buffer's first pass (the second render): every method but the edited one and the block's
    # last copied; the fresh runs copy nothing
    assert renders[1] >= 147 and renders[2:] == [0, 0], renders


def test_a_wrong_text_is_caught_and_the_module_rendered_again(every_body_cut, monkeypatch):
    real = known_texts.remember

    def corrupted(module, parsed):
        real(module, parsed)
        texts = known_texts.known(module) or {}
        for statement in list(texts)[: len(texts) // 2]:
            texts[statement] = "\n" + texts[statement]  # one line too many
    monkeypatch.setattr(syntax, "remember", corrupted)
    text = _long_class(20)
    edited = text.replace("        y = x * 7\n", "        y = x.cuda() * 7\n")
    kept, fresh = _kept_then_fresh([text, edited])
    assert kept == fresh
    assert 0 in every_body_cut[1:]  # a render without copies followed a checked one that failed
