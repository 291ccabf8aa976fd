"""Scopes the engine does not edit inside: a CUDA-only module, a kernel function, a custom op registered
for CUDA only, the code a kept device test guards (NP720; NP201 for a kept ``torch.cuda.is_available()``).

A rule that finds such a scope reports it once and calls ``keep_scope(context, finding_node, scope)``;
the engine (``neuron_port/rewrite/engine.py``) then drops every other report whose node lies inside
``scope`` (its fixes are not applied and its finding is folded into the scope's one finding, which
gains the count). The decision is a fact about the scope, not a list of what inside it is CUDA-only.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.names import walk

# The rules that declare kept scopes: the engine runs them even when they are not selected, so a
# `--select NP104` run does not edit inside a CUDA-only module either (their own findings are then dropped).
SCOPE_RULES = ("NP701", "NP713", "NP717", "NP718", "NP720")

_OUTER = "NP717"  # its kernel code holds the kernels NP701 keeps
_KEY = "kept_scopes"  # FileContext.shared key: finding node -> (code of the rule, scope node)


def keep_scope(context, code: str, finding_node: cst.CSTNode, scope) -> None:
    """The report of rule ``code`` on ``finding_node`` stands for everything inside ``scope`` (a node, or a
    tuple of nodes: the code a kept test guards). Declared twice for one finding, the scopes add up."""
    scopes = context.shared.setdefault(_KEY, {})
    known = scopes.get(finding_node)
    if known is not None and known[0] == code and isinstance(scope, tuple):
        scope = (known[1] if isinstance(known[1], tuple) else (known[1],)) + scope
    scopes[finding_node] = (code, scope)


def kept_scopes(context) -> dict[cst.CSTNode, tuple[str, cst.CSTNode]]:
    """Finding node -> (rule code, scope node), as the rules of this pass declared them."""
    return context.shared.get(_KEY, {})


def is_scope_finding(code: str, node: cst.CSTNode, scopes: dict[cst.CSTNode, tuple[str, cst.CSTNode]]) -> bool:
    """The report of ``code`` on ``node`` is the one finding of a kept scope."""
    entry = scopes.get(node)
    return entry is not None and entry[0] == code


def scope_of(code: str, node: cst.CSTNode, scopes: dict[cst.CSTNode, tuple[str, cst.CSTNode]],
             members: dict[cst.CSTNode, set[cst.CSTNode]]) -> Optional[cst.CSTNode]:
    """The finding node of the kept scope that the report of ``code`` on ``node`` lies inside (None when
    it lies in none, or is that scope's finding). ``members`` caches each scope's nodes (a module scope
    holds every node and is not walked)."""
    # the outer scopes first: a kernel function inside a CUDA-only module, or inside NP717's kernel code of a
    # module, folds into that finding
    ordered = sorted(scopes.items(), key=lambda item: 0 if isinstance(item[1][1], cst.Module) else (
        1 if item[1][0] == _OUTER else 2))
    if is_scope_finding(code, node, scopes) and isinstance(scopes[node][1], cst.Module):
        return None
    for finding_node, (owner, scope) in ordered:
        if finding_node is node and owner == code:
            return None
        if isinstance(scope, cst.Module):
            return finding_node
        inside = members.get(scope)
        if inside is None:
            inside = members[scope] = {n for root in (scope if isinstance(scope, tuple) else (scope,))
                                       for n in walk(root)}
        if node in inside:
            return finding_node
    return None
