"""How runtime findings are made: the rule's metadata (name, severity, effort, message format) comes from
the registry; a finding points at the user site, or at the project when there is none to point at."""

from __future__ import annotations

from typing import Any, Optional

from neuron_port.check.sites import UserSite
from neuron_port.results import Finding, Fix
from neuron_port.rules.registry import rule_by_code

NO_FIX = Fix(available=False, applied=False, safety="none")


def rule_message(code: str, **fields: Any) -> str:
    """The rule's message format filled in."""
    return rule_by_code(code).MESSAGE.format(**fields)


def runtime_finding(code: str, message: str, site: Optional[UserSite], severity: Optional[str] = None) -> Finding:
    """A finding at ``site`` (the whole line of code), or at ``<unknown>`` line 1 without a user frame."""
    rule = rule_by_code(code)
    path = site.path if site else "<unknown>"
    line = max(1, site.line) if site else 1
    end_column = len(site.code or "") + 1 if site else 1
    return Finding(
        code=rule.CODE, name=rule.NAME, severity=severity or rule.SEVERITY, path=path, line=line, column=1,
        end_line=line, end_column=max(1, end_column), message=message, fix=NO_FIX, effort=rule.EFFORT,
        source="runtime",
    )


def project_finding(code: str, message: str, severity: Optional[str] = None) -> Finding:
    """A finding about the whole project (path ``.``, line 1), such as a command that failed."""
    rule = rule_by_code(code)
    return Finding(
        code=rule.CODE, name=rule.NAME, severity=severity or rule.SEVERITY, path=".", line=1, column=1,
        end_line=1, end_column=1, message=message, fix=NO_FIX, effort=rule.EFFORT, source="runtime",
    )
