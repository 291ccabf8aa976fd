"""Every rule's VALID and INVALID examples are tests (Fixit-style), plus registry-entry checks."""

from __future__ import annotations

import pytest

from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rules.spec import Valid
from neuron_port.rules.registry import all_rules, check_rule_metadata, rules_of_kind


def _cases(kind):
    # runtime rules' examples are scripts run on the simulator (test_runtime_rules.py); line rules' are
    # launch scripts and configs (test_launch_configs.py)
    for rule in rules_of_kind("python"):
        for i, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.CODE}-{rule.NAME}-{kind.lower()}{i}")


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: f"{r.CODE}-{r.NAME}")
def test_registry_entry(rule):
    assert check_rule_metadata(rule) == []


def test_codes_and_names_are_unique():
    codes = [r.CODE for r in all_rules()]
    names = [r.NAME for r in all_rules()]
    assert len(codes) == len(set(codes))
    assert len(names) == len(set(names))


@pytest.mark.parametrize("rule, example", list(_cases("VALID")))
def test_valid(rule, example):
    example = example if isinstance(example, Valid) else Valid(example)
    outcome = transform_source(example.source(), [rule], EngineOptions(target=example.target))
    assert [f for f in outcome.findings if f.code == rule.CODE] == []
    assert outcome.code == example.source()


@pytest.mark.parametrize("rule, example", list(_cases("INVALID")))
def test_invalid(rule, example):
    options = EngineOptions(target=example.target, unsafe_fixes=example.unsafe_fixes)
    source = example.source()
    outcome = transform_source(source, [rule], options)
    mine = [f for f in outcome.findings if f.code == rule.CODE]
    assert mine, f"{rule.CODE} reported nothing"
    if example.message_contains:
        assert any(example.message_contains in f.message for f in mine), [f.message for f in mine]
    expected = example.expected_source()
    assert outcome.code == (source if expected is None else expected)
    if expected is None:
        assert not any(f.fix.applied for f in mine)
    # a second run changes nothing
    again = transform_source(outcome.code, [rule], options)
    assert again.code == outcome.code
    assert not any(f.fix.applied for f in again.findings)
