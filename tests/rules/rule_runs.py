"""What the family test modules of tests/rules share: rules by code, dedented snippets, one engine run
(``run_rules``) or a run checked to settle (``settled``), the NP6xx-NP8xx rules, and the public API
rewriting a file twice (``rewrite_twice``). The modules import these under the local names their tests
were written with (``_run``, ``_settled``, ``run`` ...)."""

from __future__ import annotations

import ast
import textwrap

from neuron_port.api import Settings, rewrite_source
from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rules.registry import all_rules, rule_by_code

NP6_TO_NP8 = ("NP6", "NP7", "NP8")


def rules_by_code(*codes):
    return [rule_by_code(c) for c in codes]


def snippet(code: str) -> str:
    """The code dedented, without its first newline."""
    code = textwrap.dedent(code)
    return code[1:] if code.startswith("\n") else code


def run_rules(source, rules=None, **options):
    """One engine run of ``rules`` (every rule when None) over the snippet; options are EngineOptions'."""
    return transform_source(snippet(source), list(rules or all_rules()), EngineOptions(**options))


def settled(source, rules=None, **options):
    """Rewrite, then check the output parses and a second run changes nothing."""
    out = run_rules(source, rules, **options)
    ast.parse(out.code)
    again = transform_source(out.code, list(rules or all_rules()), EngineOptions(**options))
    assert again.code == out.code
    assert not any(f.fix.applied for f in again.findings)
    return out


def np6_to_np8_rules():
    return [r for r in all_rules() if r.CODE.startswith(NP6_TO_NP8)]


def codes_of(outcome, prefix=NP6_TO_NP8):
    return [f.code for f in outcome.findings if f.code.startswith(prefix)]


def rewrite_twice(source: str, target: str = "neuron", unsafe: bool = False, path: str = "train.py"):
    """Every rule, through the public API (as `neuron-port rewrite` runs them): the output parses and a
    second run changes nothing. (code, findings)"""
    code, findings = rewrite_source(source, path=path, settings=Settings(target=target, unsafe_fixes=unsafe))
    ast.parse(code)
    again, _ = rewrite_source(code, path=path, settings=Settings(target=target, unsafe_fixes=unsafe))
    assert again == code, "a second run changes nothing"
    return code, findings


def findings_of(findings, code: str):
    return [f for f in findings if f.code == code]
