"""Device values that must keep the choice the program makes without CUDA: a rule that finds a device value
flowing into code that cannot run on Trainium (NP513: a model moved there, then shared between processes)
declares it with ``keep_device_value``; ``decision_groups.settle`` then keeps the ``"cuda"`` literals the value
may hold and every group that chooses them, so the program is not half ported."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.helpers.names import source_of

KEPT_VALUES = "kept_device_values"  # FileContext.shared key: [(device expression, the code that needs it kept)]


def keep_device_value(context, value: cst.BaseExpression, cause: cst.CSTNode) -> None:
    """The device ``value`` flows into ``cause``, which cannot run on Trainium: keep its CUDA choice (``value``
    may be a device test itself: its group is kept)."""
    context.shared.setdefault(KEPT_VALUES, []).append((value, cause))


def seed_kept(kept_values, groups, inside: dict, level: dict, why: dict, kept: int) -> dict:
    """Mark at level ``kept`` the groups that choose a literal a kept value holds (its own group, the tests
    guarding it); return literal -> why, for the literal's own rename, which may be in no group."""
    kept_literals: dict[cst.CSTNode, str] = {}
    for value, cause in kept_values:
        direct = groups.member_group.get(value)  # a device test itself (a count chosen beside a kept device)
        if direct is not None:
            level[direct], why[direct] = kept, source_of(cause)
        for literal in groups.cuda_literals_of(value):
            kept_literals[literal] = source_of(cause)
            member = groups.member_group.get(literal)
            for group in ([member] if member is not None else []) + inside.get(literal, []):
                level[group], why[group] = kept, source_of(cause)
    return kept_literals
