"""The NP3xx / NP4xx / NP6xx family packages after their split into modules: every rule lives in a
module of its family's package, the package ``__init__`` is a docstring only, no module imports another
module's private names, ``COMPILE_FUNCS`` stays where NP8xx reads it, and each rule's declared fix
availability matches what its INVALID examples show."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rules.families import family_of
from neuron_port.rules.registry import all_rules

PACKAGES = ("mixed_precision", "compile", "ecosystem")
PREFIXES = ("NP3", "NP4", "NP6")


def _rules():
    return [rule for rule in all_rules() if rule.CODE.startswith(PREFIXES)]


def _package_dir(package: str) -> Path:
    return Path(importlib.import_module(f"neuron_port.rules.{package}").__file__).parent


def test_rules_live_in_a_module_of_their_family_package():
    assert {rule.CODE[:3] for rule in _rules()} == set(PREFIXES)
    for rule in _rules():
        package = family_of(rule.CODE).package
        assert rule.__module__.startswith(f"neuron_port.rules.{package}."), (rule.CODE, rule.__module__)


@pytest.mark.parametrize("package", PACKAGES)
def test_package_init_is_a_docstring_only(package):
    tree = ast.parse((_package_dir(package) / "__init__.py").read_text())
    assert ast.get_docstring(tree)
    assert len(tree.body) == 1


@pytest.mark.parametrize("package", PACKAGES)
def test_no_private_names_imported(package):
    for path in sorted(_package_dir(package).glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                assert not private, f"{path.name} imports {private} from {node.module}"


def test_compile_funcs_importable_from_tables():
    from neuron_port.rules.compile.tables import COMPILE_FUNCS

    assert "torch.compile" in COMPILE_FUNCS


@pytest.mark.parametrize("rule", [r for r in _rules() if r.KIND == "python"], ids=lambda r: r.CODE)
def test_fix_availability_matches_the_examples(rule):
    findings = []
    for example in rule.INVALID:
        options = EngineOptions(target=example.target, unsafe_fixes=example.unsafe_fixes)
        outcome = transform_source(example.source(), [rule], options)
        findings.append([f.fix.available for f in outcome.findings if f.code == rule.CODE])
    every = [available for per_example in findings for available in per_example]
    if rule.FIX_AVAILABILITY == "never":
        assert not any(every)
    elif rule.FIX_AVAILABILITY == "always":
        assert every and all(every)
    else:
        assert any(every), "no finding of an INVALID example has a fix"
        assert not all(every), "every finding of every INVALID example has a fix"
