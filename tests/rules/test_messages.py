"""Finding messages are one short line (as ruff's are): every message a rule produces on its own examples
fits in ``MAX_MESSAGE`` characters and has no newline. The explanation belongs to the rule's docs (what
`neuron-port explain` prints and docs/rules/ renders), not to the message."""

from __future__ import annotations

import string

import pytest

from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rewrite.line_files import transform_text
from neuron_port.rules.instances import resolve_instance
from neuron_port.rules.registry import all_rules, rules_of_kind
from neuron_port.rules.spec import LineOptions, Valid

MAX_MESSAGE = 160


def _examples(rule):
    for example in rule.INVALID:
        yield example, example.unsafe_fixes
    for example in rule.VALID:
        yield (example if isinstance(example, Valid) else Valid(example)), True


def _python_messages(rule):
    for example, unsafe in _examples(rule):
        outcome = transform_source(example.source(), [rule], EngineOptions(target=example.target, unsafe_fixes=unsafe))
        yield from (f.message for f in outcome.findings)


def _line_messages(rule):
    for example, unsafe in _examples(rule):
        cores = example.neuron_cores
        options = LineOptions(target=example.target, unsafe_fixes=unsafe,
                              cores=resolve_instance(None, cores) if cores else None)
        yield from (f.message for f in transform_text(example.source(), example.kind, options, [rule]).findings)


def _too_long(messages):
    return sorted({m for m in messages if len(m) > MAX_MESSAGE or "\n" in m or "\r" in m})


@pytest.mark.parametrize("rule", rules_of_kind("python"), ids=lambda r: f"{r.CODE}-{r.NAME}")
def test_python_rule_messages_are_one_short_line(rule):
    assert _too_long(_python_messages(rule)) == []


@pytest.mark.parametrize("rule", rules_of_kind("line"), ids=lambda r: f"{r.CODE}-{r.NAME}")
def test_line_rule_messages_are_one_short_line(rule):
    assert _too_long(_line_messages(rule)) == []


def _placeholders_removed(template: str) -> str:
    return "".join(literal for literal, _, _, _ in string.Formatter().parse(template))


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: f"{r.CODE}-{r.NAME}")
def test_declared_message_is_one_short_line(rule):
    """The MESSAGE every rule declares (runtime rules' are templates the aggregator fills: their fixed text
    leaves room for the values)."""
    fixed = _placeholders_removed(rule.MESSAGE)
    limit = MAX_MESSAGE - 30 if rule.KIND == "runtime" and fixed != rule.MESSAGE else MAX_MESSAGE
    assert "\n" not in rule.MESSAGE and len(fixed) <= limit, (len(fixed), rule.MESSAGE)


def test_the_limit_catches_a_long_message():
    """The check itself: a message of the old length (an explanation in the message) is caught."""
    old_np503 = ("DDP needs no `device_ids`/`output_device` with one NeuronCore per process: drop them "
                 "(`device_ids=[local_rank]` moves inputs to `neuron:<rank>`, which fails on every rank but 0: "
                 "under torchrun TorchNeuron's init_process_group pins each process to one NeuronCore)")
    assert _too_long([old_np503, "one line\nand another", "short"]) == sorted([old_np503, "one line\nand another"])
