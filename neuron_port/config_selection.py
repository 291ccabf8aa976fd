"""Rule selection with ruff's precedence (select, ignore, extend-select, extend-ignore).

A selection is built from layers applied in order: the default (every rule), ``[tool.neuron-port]``, the
command line. In a layer, selectors apply from the least to the most specific (``ALL``, then ``NP1``,
``NP10``, then a full code or a rule name), an ignore after a select of the same specificity, so
``ignore = ["NP1"]`` with ``extend-select = ["NP101"]`` keeps NP101. A layer with ``select`` replaces
the selection before it; one without it adds its ``extend-select`` to it and takes its ``ignore`` (and
``extend-ignore``, the same thing) away from it. This is ruff's ``LintConfiguration::as_rule_table``
(astral-sh/ruff crates/ruff_workspace/src/configuration.rs; https://docs.astral.sh/ruff/settings/#lint_extend-select).

The result is stored as the Settings' ``select`` / ``ignore`` (what the scan and `check` read): the
patterns themselves when they say exactly the resolved set, otherwise the list of codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence


@dataclass(frozen=True)
class Layer:
    select: Optional[tuple[str, ...]] = None  # None: not given, the layer adjusts the selection before it
    ignore: tuple[str, ...] = ()  # ignore and extend-ignore together
    extend_select: tuple[str, ...] = ()

    def is_empty(self) -> bool:
        return self.select is None and not self.ignore and not self.extend_select


NOTHING = ((), ("ALL",))  # an empty selection: an empty `select` would mean every rule


def _specificity(pattern: str, names: set[str]) -> int:
    if pattern.upper() == "ALL":
        return 0
    if pattern in names:
        return 100  # a rule name names one rule, like a full code
    return len(pattern)  # NP1 < NP10 < NP101


def apply_layer(enabled: set[str], layer: Layer) -> set[str]:
    """The codes selected after ``layer`` is applied on top of ``enabled``."""
    from neuron_port.rules.registry import code_matches, rule_index

    rules = rule_index()
    names = {rule.name for rule in rules}
    selectors = [(p.strip(), True) for p in (layer.select or ()) + layer.extend_select]
    selectors += [(p.strip(), False) for p in layer.ignore]
    updates: dict[str, bool] = {}
    # sorted is stable: at one specificity every select comes before every ignore, so the ignore wins
    for pattern, on in sorted(selectors, key=lambda item: (_specificity(item[0], names), not item[1])):
        for rule in rules:
            if code_matches(rule.code, rule.name, [pattern]):
                updates[rule.code] = on
    if layer.select is not None:
        return {code for code, on in updates.items() if on}
    return (enabled | {c for c, on in updates.items() if on}) - {c for c, on in updates.items() if not on}


def selected_codes(select: Sequence[str], ignore: Sequence[str]) -> set[str]:
    """The codes that Settings' ``select`` / ``ignore`` patterns select (as the scan reads them)."""
    from neuron_port.rules.registry import is_selected, rule_index

    return {rule.code for rule in rule_index() if is_selected(rule.code, select, ignore, rule.name)}


def resolve(base_select: Sequence[str], base_ignore: Sequence[str], layer: Layer) -> tuple[tuple[str, ...],
                                                                                          tuple[str, ...]]:
    """``select`` and ``ignore`` for ``layer`` applied on top of the selection ``base_select`` /
    ``base_ignore`` (already resolved)."""
    base_select, base_ignore = tuple(base_select), tuple(base_ignore)
    if layer.is_empty():
        return base_select, base_ignore
    result = apply_layer(selected_codes(base_select, base_ignore), layer)
    if layer.select is not None:
        candidate = (layer.select + layer.extend_select, layer.ignore)
    else:
        candidate = (base_select + layer.extend_select if base_select else (), base_ignore + layer.ignore)
    if selected_codes(*candidate) == result:
        return candidate
    return (tuple(sorted(result)), ()) if result else NOTHING
