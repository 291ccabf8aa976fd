"""Issue 38 item 3: after a fix pass the engine takes the new text, its syntax check and the left findings'
places from the edited statements alone (rewrite/splice.py). Property: on every fixture and rule example,
with and without unsafe fixes, the outcome (rewritten code, findings with their places and messages, fix
count, or the error) is exactly the whole-tree one's (engine.INCREMENTAL off); the statement-level syntax
check is forced on for every text (it is taken only for long texts otherwise), so both paths are compared."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from conftest import fixture_and_example_sources
from neuron_port.rewrite import engine, splice, syntax
from neuron_port.rewrite.engine import EngineOptions, RewriteError, transform_source
from neuron_port.rules.registry import all_rules

RULES = list(all_rules())


def _sources():
    yield from fixture_and_example_sources()
    # what a statement splice must get right: the last statement without a line break, CRLF, tabs,
    # a form feed, a one-line suite, a decorator, an edit that adds an import, two edits in one statement
    yield "import torch\nx = torch.ones(2)\nif x.sum():\n    y = x.cuda()"
    yield "import torch\r\nx = torch.ones(2)\r\nx = x.cuda()\r\nprint(x.cuda())\r\n"
    yield "import torch\n\nclass A:\n\tdef f(self, x):\n\t\treturn x.cuda()\n\n\tdef g(self):\n\t\treturn 1\n"
    yield "import torch\n\x0c\ndef f(x):\n    return x.cuda()\n\x0c\ndef g(x):\n    return x.half().cuda()\n"
    yield "import torch\nfor x in []: x = x.cuda(); y = x.cuda()\nz = torch.ones(1).cuda()\n"
    yield "import torch\n\n@torch.compile(mode='max-autotune')\ndef f(x):\n    return x.cuda()\n"
    yield "x = 1\ny = x.cuda()\nz = torch.cuda.is_available() and x.cuda()\n"
    yield "import torch\nm = torch.nn.Linear(2, 2).cuda().half()\nn = m(torch.ones(2, device='cuda').cuda())\n"


def _outcome(text: str, unsafe: bool):
    try:
        out = transform_source(text, RULES, EngineOptions(unsafe_fixes=unsafe), path="t.py")
    except RewriteError as exc:
        return ("error", str(exc))
    return (out.code, out.findings, out.fixes_applied, out.skipped)


@pytest.fixture(scope="module")
def texts():
    return list(dict.fromkeys(_sources()))


def test_incremental_followup_is_the_whole_trees(texts, monkeypatch):
    taken = []
    real = splice.spliced

    def counted(*args, **kwargs):
        found = real(*args, **kwargs)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(engine, "spliced", counted)
    # every text's CPython verdict is taken before the parse, so the statement-level check may stand for
    # the whole text's (as for a long text): both paths are compared on every text
    monkeypatch.setattr(syntax, "SHALLOW_CHARS", 0)
    monkeypatch.setattr(engine, "SHALLOW_CHARS", 0)
    changed = 0
    for text in texts:
        for unsafe in (False, True):
            monkeypatch.setattr(engine, "INCREMENTAL", True)
            fast = _outcome(text, unsafe)
            if fast[0] == text:
                continue  # no fix pass ran: nothing the switch decides
            monkeypatch.setattr(engine, "INCREMENTAL", False)
            whole = _outcome(text, unsafe)
            assert fast == whole, (unsafe, text[:300])
            changed += 1
    # not vacuous: most fix passes were taken from the edited statements
    assert changed > 200 and sum(taken) > 200 and sum(taken) > 0.8 * len(taken), (changed, sum(taken), len(taken))


def test_long_file_edits_move_the_findings_below_them(monkeypatch):
    """A long module (past SHALLOW_CHARS: the statement-level syntax check stands for the whole text's):
    an edit that adds lines in one method, findings above and below it."""
    method = textwrap.dedent("""\
        def step_{i}(self, batch):
            loss = self.model(batch).sum()
            torch.cuda.synchronize()
            return loss.item()

    """)
    body = "".join(textwrap.indent(method.format(i=i), "    ") for i in range(120))
    text = ("import torch\n\n\nclass Trainer:\n" + body
            + "    def move(self, x):\n        return x.cuda(\n            non_blocking=True)\n\n"
            + body.replace("step_", "late_") + "\n\ndef tail():\n    return torch.cuda.device_count()\n")
    assert len(text) > syntax.SHALLOW_CHARS
    checks = []
    real = engine.statements_parse
    monkeypatch.setattr(engine, "statements_parse", lambda edits: checks.append(real(edits)) or checks[-1])
    outcomes = []
    for incremental in (True, False):
        monkeypatch.setattr(engine, "INCREMENTAL", incremental)
        outcomes.append(_outcome(text, False))
    assert outcomes[0] == outcomes[1]
    assert checks == [True]  # the incremental run took the statement-level path
    code, findings = outcomes[0][0], outcomes[0][1]
    assert code != text and len(findings) > 240
    cst.parse_module(code)
