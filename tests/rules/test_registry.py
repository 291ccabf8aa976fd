"""The registry as a whole: every rule declares a kind and a family and lives in its family's package;
each family package's ``__init__`` is only its docstring; fix availability is truthful (a rule that says
"never" fixes nothing, "always" fixes every finding of every INVALID example, "sometimes" shows both)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rewrite.line_files import transform_text
from neuron_port.rules.families import FAMILIES, family_of
from neuron_port.rules.instances import resolve_instance
from neuron_port.rules.no_port.common import PackageRule
from neuron_port.rules.registry import all_rules, rule_by_code
from neuron_port.rules.spec import KINDS, LineOptions
from rule_runs import np6_to_np8_rules as _mine

RULES = all_rules()


def _ids(rule) -> str:
    return f"{rule.CODE}-{rule.NAME}"


@pytest.mark.parametrize("rule", RULES, ids=_ids)
def test_every_rule_has_a_kind_and_a_family_and_lives_in_its_package(rule):
    family = family_of(rule.CODE)
    assert rule.KIND in KINDS
    assert rule.FAMILY == family.name
    assert rule.__module__.startswith(f"neuron_port.rules.{family.package}."), rule.__module__
    if rule.KIND in ("python", "line"):
        assert rule.TRIGGERS and all(rule.TRIGGERS)  # the pre-filter needs non-empty substrings
    else:
        assert rule.FIX_AVAILABILITY == "never" and not rule.TARGETS


def test_every_family_has_rules():
    assert {family_of(rule.CODE) for rule in RULES} == set(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.package)
def test_a_family_package_init_is_a_docstring_naming_its_codes(family):
    init = Path(importlib.import_module(f"neuron_port.rules.{family.package}").__file__)
    tree = ast.parse(init.read_text())
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr)
    docs = ast.get_docstring(tree) or ""
    for rule in RULES:
        if rule.FAMILY == family.name:
            assert rule.CODE in docs, rule.CODE


def _findings(rule, example):
    if rule.KIND == "python":
        options = EngineOptions(target=example.target, unsafe_fixes=example.unsafe_fixes)
        found = transform_source(example.source(), [rule], options).findings
    else:
        cores = resolve_instance(None, example.neuron_cores) if example.neuron_cores else None
        options = LineOptions(target=example.target, unsafe_fixes=example.unsafe_fixes, cores=cores)
        found = transform_text(example.source(), example.kind, options, [rule]).findings
    return [f for f in found if f.code == rule.CODE]


@pytest.mark.parametrize("rule", [r for r in RULES if r.KIND != "runtime"], ids=_ids)
def test_fix_availability_is_what_the_examples_show(rule):
    per_example = [_findings(rule, example) for example in rule.INVALID]
    assert all(per_example), "every INVALID example is reported"
    fixed = [f.fix.available for found in per_example for f in found]
    if rule.FIX_AVAILABILITY == "never":
        assert not any(fixed)
    elif rule.FIX_AVAILABILITY == "always":
        assert all(fixed)
    else:
        assert any(fixed) and not all(fixed), "a 'sometimes' rule's examples show a fix and a report-only finding"


def test_package_tables_have_no_plain_prefix_keys():
    """covering_key treats a key ending in ``_`` as a plain prefix; the NP7xx package tables must match
    only the package and its dotted children."""
    for rule in RULES:
        if isinstance(rule, type) and issubclass(rule, PackageRule):
            keys = list(rule.ADVICE) + list(rule.PACKAGES)
            assert not [k for k in keys if k.endswith("_")], rule


# -- the families' rules live in their packages (NP1xx, NP5xx, NP6xx-NP8xx) ------------------------

def test_families_live_in_their_modules_and_prefilter():
    checked = 0
    for rule in all_rules():
        if rule.CODE.startswith("NP1"):
            assert rule.__module__.startswith("neuron_port.rules.device_placement."), rule
        elif "NP501" <= rule.CODE <= "NP519":
            assert rule.__module__.startswith("neuron_port.rules.distributed."), rule
        else:
            continue
        assert rule.TRIGGERS and all(rule.TRIGGERS), rule  # the pre-filter needs non-empty substrings
        checked += 1
    assert checked >= 17


def test_families_registered_with_docs():
    codes = {r.CODE for r in _mine()}
    assert {f"NP6{i:02d}" for i in range(1, 10)} <= codes
    assert {f"NP7{i:02d}" for i in range(1, 13)} <= codes
    assert {f"NP8{i:02d}" for i in range(1, 12)} <= codes
    for rule in _mine():
        assert rule.TRIGGERS and all(rule.TRIGGERS), rule.CODE
        assert "cuda" not in rule.TRIGGERS, f"{rule.CODE}: 'cuda' would make the pre-filter useless"
        assert rule.__module__.split(".")[2] in ("ecosystem", "no_port", "precision_features")


@pytest.mark.parametrize("code", ["NP601", "NP702", "NP709", "NP712", "NP808", "NP811"])
def test_explain(cli, code):
    result = cli("explain", code)
    assert result.returncode == 0, result.stderr
    assert "## Fix safety" in result.stdout or "Fix safety" in result.stdout
    assert rule_by_code(code).NAME in result.stdout
