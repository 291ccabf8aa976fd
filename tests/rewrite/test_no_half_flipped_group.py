"""The engine's invariant (issue 34, item 2): no decision group is half flipped in a rewritten file. The
groups are found in the output itself (rules/helpers/decision_groups.py, run on the output with each
`neuron` spelling read as the `cuda` one it replaced), and each group's tests and device values must be all
CUDA or all neuron: a kept guard beside a flipped one of the same group is the bug of issue 34's 1(a)-(e).
Over every fixture project, the issue's repros, every rule example (the output of all rules) and the wheel
audit set's CI package.
"""

from __future__ import annotations

import re
import textwrap
from typing import Optional

import libcst as cst
import pytest
from libcst.metadata import PositionProvider

from conftest import FIXTURES
from neuron_port.api import Settings, rewrite_source
from neuron_port.rewrite.errors import RewriteError
from neuron_port.rewrite.traversal import walk_batched
from neuron_port.rules.context import FileContext, ImportTracker
from neuron_port.rules.helpers.decision_groups import DecisionGroups
from neuron_port.rules.registry import rules_of_kind
from tests.rewrite.test_held_out import PACKAGE, load_audit
from tests.rules.test_decision_groups import REPROS

# a flipped test or value spells `neuron` where the original spelled `cuda` (`x.is_neuron`, `torch.neuron.
# is_available()`, `device.type == "neuron"`, `"neuron:0"`)
_NEURON = re.compile(r"(?<![\w])(?:is_)?neuron(?![\w])")


def _as_cuda(match: re.Match) -> str:
    return "is_cuda" if match.group(0).startswith("is_") else "cuda"


def _original_column(line: str, column: int) -> int:
    """The column in ``line`` of ``column`` in the line with its `neuron` spellings read as `cuda`."""
    delta = 0
    for match in _NEURON.finditer(line):
        start = match.start() + delta
        if column <= start:
            break
        replaced = len(_as_cuda(match))
        if column < start + replaced:
            return match.start()
        delta += replaced - len(match.group(0))
    return column - delta


def half_flipped_groups(text: str, path: str = "<output>") -> list[str]:
    """The groups of ``text`` whose members are not all CUDA or all neuron, described one per line."""
    as_cuda = _NEURON.sub(_as_cuda, text)
    if "cuda" not in as_cuda:
        return []
    try:
        module = cst.parse_module(as_cuda)
    except cst.ParserSyntaxError:
        return []  # a file LibCST cannot read is left unchanged (tested elsewhere)
    context = FileContext(path=path, code=as_cuda)
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    walk_batched(wrapper, [ImportTracker(context)])
    groups = DecisionGroups(context, module)
    if not groups.member_group:
        return []
    positions = wrapper.resolve(PositionProvider)
    lines = text.splitlines()
    members: dict[object, set[cst.CSTNode]] = {}
    for node, group in groups.member_group.items():
        test = groups.member_test.get(node)
        if type(test) is cst.Name:
            continue  # `if use_cuda:` is decided by `use_cuda = torch.cuda.is_available()`, a member too
        if test is not None:
            members.setdefault(group, set()).add(test)
        elif type(node) is cst.SimpleString:  # a device value of the group
            members.setdefault(group, set()).add(node)
    bad = []
    for group, nodes in members.items():
        states = {}
        for node in nodes:
            where = positions[node]
            first, last = where.start.line - 1, where.end.line - 1
            if first != last:
                continue  # a test over several lines: rare, and its columns are not mapped here
            line = lines[first]
            span = line[_original_column(line, where.start.column):_original_column(line, where.end.column)]
            states[f"{where.start.line}:{span}"] = "neuron" if "neuron" in span else "cuda"
        if len(set(states.values())) > 1:
            bad.append(f"{path}: " + "; ".join(f"{k} ({v})" for k, v in sorted(states.items())))
    return bad


def test_the_check_sees_a_half_flipped_group():
    """The invariant can fail: issue 34's 1(a) half flipped as 858089d wrote it, and whole."""
    half = ("import torch\ndef log(step):\n    fmt = 'step'\n    if torch.neuron.is_available():\n"
            "        fmt += ' {memory}'\n    if torch.cuda.is_available():\n        print(fmt.format(memory=1))\n")
    assert half_flipped_groups(half) != []
    assert half_flipped_groups(half.replace("torch.cuda", "torch.neuron")) == []
    assert half_flipped_groups(half.replace("torch.neuron", "torch.cuda")) == []
    value = ("import torch\ndef kind():\n    return 'neuron' if torch.neuron.is_available() else 'cpu'\n"
             "assert kind() in ['cuda', 'mps', 'cpu']\n")
    assert half_flipped_groups(value) != []


def _rewritten(text: str, path: str, settings: Optional[Settings] = None) -> str:
    try:
        return rewrite_source(text, path=path, settings=settings)[0]
    except RewriteError:
        return text  # left unchanged


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and p.name != "expected"))
def test_no_group_half_flipped_in_a_rewritten_fixture(name):
    bad = []
    for path in sorted((FIXTURES / name).rglob("*.py")):
        shown = path.relative_to(FIXTURES).as_posix()
        bad += half_flipped_groups(_rewritten(path.read_text(encoding="utf-8"), shown), shown)
    assert bad == []


@pytest.mark.parametrize("name", sorted(REPROS))
def test_no_group_half_flipped_in_a_rewritten_issue_repro(name):
    """Issue 34's repros: 858089d half flipped (a), (b) and (c)."""
    code, _ = REPROS[name]
    assert half_flipped_groups(_rewritten(textwrap.dedent(code), "r.py"), name) == []


def test_no_group_half_flipped_in_a_rewritten_rule_example():
    bad = []
    for rule in rules_of_kind("python"):
        for index, example in enumerate([*rule.VALID, *rule.INVALID]):
            source = example if isinstance(example, str) else example.source()
            shown = f"{rule.CODE} example {index}"
            target = getattr(example, "target", "neuron")
            if target != "neuron":
                continue
            # every rule, as a default run: one rule selected alone (`--select NP101`) renames its part of a
            # group and not the rest, by the user's choice
            bad += half_flipped_groups(_rewritten(source, f"{rule.CODE}_{index}.py"), shown)
            if getattr(example, "unsafe_fixes", False):
                settings = Settings(unsafe_fixes=True)
                bad += half_flipped_groups(_rewritten(source, f"{rule.CODE}_{index}.py", settings),
                                           shown + " (--unsafe-fixes)")
    assert bad == []


def test_no_group_half_flipped_in_the_rewritten_audit_package(tmp_path):
    folder = load_audit().build_corpus([PACKAGE], tmp_path)[PACKAGE]
    bad = []
    files = sorted(folder.rglob("*.py"))
    assert len(files) > 50
    for path in files:
        shown = path.relative_to(folder).as_posix()
        bad += half_flipped_groups(_rewritten(path.read_text(encoding="utf-8", errors="replace"), shown), shown)
    assert bad == []
