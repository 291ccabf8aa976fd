"""The NP9xx examples are scripts: each INVALID one must produce its finding when `neuron-port check`
runs it on the simulated device, each VALID one must not."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import run_cli
from neuron_port.rules.spec import Valid
from neuron_port.rules.registry import rules_of_kind

pytestmark = pytest.mark.slow

RUNTIME_RULES = rules_of_kind("runtime")


def _cases():
    for rule in RUNTIME_RULES:
        for i, example in enumerate(rule.INVALID):
            yield f"{rule.CODE}-invalid{i}", rule, example, True
        for i, example in enumerate(rule.VALID):
            example = example if isinstance(example, Valid) else Valid(example)
            yield f"{rule.CODE}-valid{i}", rule, example, False


CASES = list(_cases())
PARALLEL_CHECKS = 2  # each example is one `check` child process, mostly waiting on its own: two at a time


@pytest.fixture(scope="module")
def check_runs(tmp_path_factory, sim_build):
    """Every example's `check` run, two at a time (one process each, as a user runs them); each test below
    judges its own example's run."""

    def run(case_id, example):
        folder = tmp_path_factory.mktemp(case_id)
        (folder / "example.py").write_text(example.source())
        return run_cli("check", str(folder), "--output-format", "json", "--timeout", "120", *example.check_options,
                   "--", "python", "example.py")

    with ThreadPoolExecutor(PARALLEL_CHECKS) as pool:
        futures = {case_id: pool.submit(run, case_id, example) for case_id, _rule, example, _report in CASES}
        return {case_id: future.result() for case_id, future in futures.items()}


@pytest.mark.parametrize("case_id, rule, example, should_report", CASES, ids=[c[0] for c in CASES])
def test_runtime_example(case_id, rule, example, should_report, check_runs):
    result = check_runs[case_id]
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
