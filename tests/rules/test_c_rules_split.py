"""The NP7xx / NP8xx / NP9xx families after their split into modules: where the rules live, what the
package ``__init__`` holds, no private names shared between modules, the prefix matching that
``covering_key`` took over, and truthful fix availability over the INVALID examples."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import neuron_port.rules as rules_pkg
from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rules.families import family_of
from neuron_port.rules.no_port.common import PackageRule
from neuron_port.rules.registry import all_rules

PREFIXES = ("NP7", "NP8", "NP9")
PACKAGES = ("no_port", "precision_features", "runtime")
ROOT = Path(rules_pkg.__file__).parent


def _mine():
    return [rule for rule in all_rules() if rule.CODE.startswith(PREFIXES)]


def test_rules_live_in_modules_of_their_family_package():
    assert len(_mine()) == 12 + 11 + 9
    for rule in _mine():
        package = f"neuron_port.rules.{family_of(rule.CODE).package}"
        assert rule.__module__.startswith(package + "."), rule
        assert rule.__module__.rsplit(".", 1)[-1] not in ("common", "tables"), rule


@pytest.mark.parametrize("package", PACKAGES)
def test_package_init_is_a_docstring_naming_every_code(package):
    tree = ast.parse((ROOT / package / "__init__.py").read_text())
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr)
    doc = ast.get_docstring(tree)
    for rule in _mine():
        if family_of(rule.CODE).package == package:
            module = rule.__module__.rsplit(".", 1)[-1]
            assert f"{rule.CODE} ``{rule.NAME}`` (``{module}``)" in " ".join(doc.split()), rule


@pytest.mark.parametrize("package", PACKAGES)
def test_no_private_name_is_imported_from_another_module(package):
    for path in sorted((ROOT / package).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not [a.name for a in node.names if a.name.startswith("_")], path


def test_package_prefixes_have_no_plain_prefix_keys():
    """covering_key treats a key ending in ``_`` as a plain prefix; the NP7xx package tables have none,
    so ``covers`` and the advice lookup match exactly the dotted children, as before."""
    for rule in _mine():
        if issubclass(rule, PackageRule):
            keys = list(rule.ADVICE) + list(rule.PACKAGES)
            assert not [k for k in keys if k.endswith("_")], rule


@pytest.mark.parametrize("rule", _mine(), ids=lambda r: r.CODE)
def test_fix_availability_is_truthful(rule):
    if rule.KIND == "runtime":
        assert rule.FIX_AVAILABILITY == "never"
        return
    per_example = []
    for example in rule.INVALID:
        outcome = transform_source(example.source(), [rule],
                                   EngineOptions(target=example.target, unsafe_fixes=example.unsafe_fixes))
        findings = [f for f in outcome.findings if f.code == rule.CODE]
        assert findings, example
        per_example.append([f.fix.available for f in findings])
    fixed = [available for example in per_example for available in example]
    if rule.FIX_AVAILABILITY == "never":
        assert not any(fixed)
    elif rule.FIX_AVAILABILITY == "always":
        assert all(fixed)
    else:
        assert any(any(example) for example in per_example) and not all(fixed)
