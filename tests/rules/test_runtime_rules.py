"""The NP9xx examples are scripts: each INVALID one must produce its finding when `neuron-port check`
runs it on the simulated device, each VALID one must not."""

from __future__ import annotations

import json

import pytest

from neuron_port.rules.spec import Valid
from neuron_port.rules.registry import rules_of_kind

pytestmark = pytest.mark.slow

RUNTIME_RULES = rules_of_kind("runtime")


def _cases():
    for rule in RUNTIME_RULES:
        for i, example in enumerate(rule.INVALID):
            yield pytest.param(rule, example, True, id=f"{rule.CODE}-invalid{i}")
        for i, example in enumerate(rule.VALID):
            example = example if isinstance(example, Valid) else Valid(example)
            yield pytest.param(rule, example, False, id=f"{rule.CODE}-valid{i}")


@pytest.mark.parametrize("rule, example, should_report", list(_cases()))
def test_runtime_example(rule, example, should_report, tmp_path, cli):
    (tmp_path / "example.py").write_text(example.source())
    result = cli("check", str(tmp_path), "--output-format", "json", "--timeout", "120", *example.check_options, "--",
                 "python", "example.py")
    doc = json.loads(result.stdout)
    mine = [f for f in doc["findings"] if f["code"] == rule.CODE]
    if should_report:
        assert mine, (doc["runtime"]["status"], [f["code"] for f in doc["findings"]])
        assert all(f["source"] == "runtime" for f in mine)
        if getattr(example, "message_contains", None):
            assert any(example.message_contains in f["message"] for f in mine), [f["message"] for f in mine]
    else:
        assert not mine, mine
        assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]


def test_every_runtime_rule_is_documented():
    assert {r.CODE for r in RUNTIME_RULES} >= {f"NP90{i}" for i in range(1, 10)}
