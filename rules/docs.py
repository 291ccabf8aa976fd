"""The registry as text: the `rules` listing (text or JSON) and a rule's `explain` page, which
scripts/generate_rule_docs.py also writes to docs/rules/ (installed as ``neuron_port.rules.docs``)."""

from __future__ import annotations

import json
from typing import Sequence

from neuron_port.rules.spec import RuleSpec


def rules_json(rules: Sequence[type[RuleSpec]]) -> str:
    return json.dumps([r.summary() for r in rules], indent=2) + "\n"


def rules_text(rules: Sequence[type[RuleSpec]]) -> str:
    width = max(len(r.NAME) for r in rules)
    lines = [f"{'code':<6} {'name':<{width}} {'severity':<8} {'fix':<18} {'effort':<6} scope"]
    for r in rules:
        scope = "runtime (check)" if r.KIND == "runtime" else ",".join(r.TARGETS)
        if r.KIND == "line":
            scope += " (scripts, configs)"
        lines.append(f"{r.CODE:<6} {r.NAME:<{width}} {r.SEVERITY:<8} {r.fix_label():<18} {r.EFFORT or '-':<6} {scope}")
    lines.append(f"{len(rules)} rules. `neuron-port explain CODE` shows a rule's documentation.")
    return "\n".join(lines) + "\n"


def explain_markdown(rule: type[RuleSpec]) -> str:
    """The page `explain` prints (Markdown): code, name, severity, fix and effort, then the docs."""
    return rule.docs_header() + rule.docs()
