"""Scopes no fix edits inside (a CUDA-only module, a kernel function, a custom op registered for CUDA
only: rules/helpers/kept_scopes.py): the engine folds the reports inside each into its one finding,
and runs the rules that declare them even when they are not selected, so what is kept does not depend
on the selection."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import libcst as cst

from neuron_port.rules.context import FileContext, Violation
from neuron_port.rules.helpers.decision_groups import settle
from neuron_port.rules.helpers.kept_scopes import SCOPE_RULES, is_scope_finding, kept_scopes, scope_of
from neuron_port.rules.spec import PythonRule

_NEVER_FOLDED = ("NP799",)  # a malformed suppression comment is about neuron-port, wherever it is


def fold_kept_scopes(context: FileContext, hidden: frozenset = frozenset()) -> list[Violation]:
    """``_folded``'s reports, each decision group made one decision (rules/helpers/decision_groups.py: a
    test flipped or kept together with the tests and code it is tied to)."""
    return settle(context, _folded(context, hidden))


def _folded(context: FileContext, hidden: frozenset = frozenset()) -> list[Violation]:
    """The reports of this pass, less those inside a scope a rule declared not to be edited
    (rules/helpers/kept_scopes.py): their fixes are not applied and each is counted in its scope's one
    finding instead of being reported on its own. When the scope's rule is ``hidden`` (run for its
    scopes, not selected), its finding goes and the reports inside stay, without their fixes."""
    scopes = kept_scopes(context)
    if not scopes:
        return [v for v in context.violations if v.rule not in hidden] if hidden else context.violations
    members: dict[cst.CSTNode, set[cst.CSTNode]] = {}
    hidden_codes = {rule.CODE for rule in hidden}
    # the scopes whose finding is reported (a scope declared for another rule's finding, e.g. NP201's kept
    # is_available(), may have none when that rule is not selected: its reports stay, unfixed)
    reported = {(v.rule.CODE, v.node) for v in context.violations if v.rule not in hidden}
    folded: dict[cst.CSTNode, dict[str, int]] = {}
    places: dict[cst.CSTNode, list[tuple[str, cst.CSTNode]]] = {}  # the folded reports keep their places
    kept: list[Violation] = []
    for report in context.violations:
        owner = None if report.rule.CODE in _NEVER_FOLDED else scope_of(report.rule.CODE, report.node, scopes, members)
        if report.rule in hidden:
            continue  # run for its scopes only
        if owner is not None and (scopes[owner][0] in hidden_codes or (scopes[owner][0], owner) not in reported):
            kept.append(replace(report, replacement=None, safety=None, effort=report.effort or report.rule.EFFORT,
                                message=f"{report.message} (left as it is: in code kept unedited)"))
        elif owner is None:
            kept.append(report)
        else:
            counts = folded.setdefault(owner, {})
            counts[report.rule.CODE] = counts.get(report.rule.CODE, 0) + 1
            places.setdefault(owner, []).append((report.rule.CODE, report.node))
    out: list[Violation] = []
    for report in kept:
        counts = folded.get(report.node) if is_scope_finding(report.rule.CODE, report.node, scopes) else None
        if counts:
            total = sum(counts.values())
            listed = ", ".join(f"{code} x{n}" if n > 1 else code for code, n in sorted(counts.items()))
            report = replace(report, message=f"{report.message}; {total} finding{'s' * (total != 1)} inside "
                             f"left as they are and folded into this one ({listed})",
                             related=tuple(places[report.node]))
        out.append(report)
    return out


def scope_rules_not_in(rules: Sequence[type[PythonRule]]) -> frozenset:
    """The rules that declare kept scopes (kept_scopes.SCOPE_RULES) that ``rules`` does not hold: run too,
    so that what is kept does not depend on the selection."""
    selected = {rule.CODE for rule in rules}
    missing = [code for code in SCOPE_RULES if code not in selected]
    if not missing:
        return frozenset()
    from neuron_port.rules.registry import rule_by_code

    return frozenset(rule_by_code(code) for code in missing)
