"""What several NP8xx modules share: ``ReferenceRule``, the base of the rules that report a qualified
name found in their ``TABLE`` (float64, complex, sparse and nested layouts, forward-mode AD, float8,
FlexAttention)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.table_rule import QualifiedNameRule, covering_key


class ReferenceRule(QualifiedNameRule[str]):
    """Reports the outermost reference (Name/Attribute, following imports) whose qualified name matches
    a key of ``TABLE`` (longest key wins, see ``covering_key``); ``TABLE`` values are ``(message, effort)``.
    References in ``not_uses`` are not reported."""

    TABLE: dict[str, tuple[str, str]] = {}
    SEVERITIES: dict[str, str] = {}  # key -> severity override

    def lookup(self, qualname: str) -> Optional[str]:
        return covering_key(qualname, self.TABLE)

    def on_reference(self, node: cst.BaseExpression, qualname: str, key: str) -> None:
        message, effort = self.TABLE[key]
        self.report(node, message.format(name=qualname), effort=effort, severity=self.SEVERITIES.get(key))
