"""The NP1xx / NP2xx / NP5xx packages after the split into modules: where the rules live, what crosses
module borders, and whether each rule's FIX_AVAILABILITY matches what its INVALID examples do."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rewrite.line_files import transform_text
from neuron_port.rules.families import family_of
from neuron_port.rules.instances import resolve_instance
from neuron_port.rules.registry import all_rules
from neuron_port.rules.spec import LineOptions

PACKAGES = ("device_placement", "cuda_api", "distributed")
MINE = [rule for rule in all_rules() if family_of(rule.CODE).package in PACKAGES]


def _package_dir(package: str) -> Path:
    return Path(importlib.import_module(f"neuron_port.rules.{package}").__file__).parent


def test_each_rule_is_defined_in_a_module_of_its_family_package():
    assert len(MINE) >= 25
    for rule in MINE:
        package = family_of(rule.CODE).package
        assert rule.__module__.startswith(f"neuron_port.rules.{package}."), rule
        assert rule.TRIGGERS and all(rule.TRIGGERS), rule  # the pre-filter needs non-empty substrings


@pytest.mark.parametrize("package", PACKAGES)
def test_the_package_init_is_a_docstring(package):
    tree = ast.parse((_package_dir(package) / "__init__.py").read_text())
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr), package
    docs = ast.get_docstring(tree)
    for rule in MINE:
        if family_of(rule.CODE).package == package:
            assert rule.CODE in docs, rule.CODE


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_imports_a_private_name(package):
    for path in sorted(_package_dir(package).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "annotations"]
                assert not private, f"{path.name} imports {private} from {node.module}"


def _python_findings(rule, example):
    options = EngineOptions(target=example.target, unsafe_fixes=example.unsafe_fixes)
    return [f for f in transform_source(example.source(), [rule], options).findings if f.code == rule.CODE]


def _line_findings(rule, example):
    cores = example.neuron_cores
    options = LineOptions(target=example.target, unsafe_fixes=example.unsafe_fixes,
                          cores=resolve_instance(None, cores) if cores else None)
    return [f for f in transform_text(example.source(), example.kind, options, [rule]).findings
            if f.code == rule.CODE]


@pytest.mark.parametrize("rule", [r for r in MINE if r.KIND in ("python", "line")],
                         ids=lambda r: f"{r.CODE}-{r.NAME}")
def test_fix_availability_is_truthful(rule):
    findings = _python_findings if rule.KIND == "python" else _line_findings
    per_example = [findings(rule, example) for example in rule.INVALID]
    fixed = [f.fix.available for found in per_example for f in found]
    if rule.FIX_AVAILABILITY == "never":
        assert not any(fixed)
    elif rule.FIX_AVAILABILITY == "always":
        assert fixed and all(fixed)
    else:
        assert any(fixed) and not all(fixed), "a 'sometimes' rule's examples must show a fix and a report"
