"""What NP306 (``amp_imports.py``) decides for each name an import binds: which names are
``torch.cuda.amp`` ones and the ``torch.amp`` names they stand for, which uses the other rules' fixes of
the same pass cover (NP301 / NP303 / NP305), and so whether a binding is removed, pointed at
``torch.amp`` or kept (``Binding.action``, with its safety and reason), and the import edits that follow."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.names import walk
from neuron_port.rules.mixed_precision.import_groups import Binding, head_names

AMP = "torch.cuda.amp"
# the device-generic class or function a torch.cuda.amp name stands for
GENERIC = {"GradScaler": "torch.amp", "autocast": "torch.amp", "custom_fwd": "torch.amp", "custom_bwd": "torch.amp"}
GENERIC_QUALNAMES = {
    "GradScaler": {"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler", "torch.GradScaler"},
    "autocast": {"torch.amp.autocast", "torch.amp.autocast_mode.autocast", "torch.autocast"},
    "custom_fwd": {"torch.amp.custom_fwd", "torch.amp.autocast_mode.custom_fwd"},
    "custom_bwd": {"torch.amp.custom_bwd", "torch.amp.autocast_mode.custom_bwd"},
}


def is_amp_binding(qualname: str) -> bool:
    """``torch.cuda.amp`` itself or a name in it (or in one of its modules)."""
    return qualname == AMP or qualname.startswith(AMP + ".")


def amp_name(qualname: str) -> Optional[str]:
    """``GradScaler`` for ``torch.cuda.amp.GradScaler`` / ``torch.cuda.amp.grad_scaler.GradScaler``."""
    last = qualname.rsplit(".", 1)[-1]
    return last if last in GENERIC and is_amp_binding(qualname) else None


def covering_fixes(uses: dict[str, list[cst.Name]], violations, rule: type, skip: bool) -> dict[cst.Name, list]:
    """For each watched use: the other rules' fixes (this pass) whose node contains it (none when the
    file's imports are only reported, ``skip``)."""
    watched = {n for nodes in uses.values() for n in nodes}
    out: dict[cst.Name, list] = {}
    if skip or not watched:
        return out
    for violation in violations:
        if violation.replacement is None or violation.rule is rule:
            continue
        for node in walk(violation.node):
            if node in watched:
                out.setdefault(node, []).append(violation)  # type: ignore[arg-type]
    return out


def decide(binding: Binding, uses: list[cst.Name], covering: dict, exported: set[str],
           annotation_uses: set[cst.Name], bindings: list[Binding]) -> None:
    """Fill in ``binding``'s action, safety, reason and the uses left after the other fixes. ``uses``
    are the references to its name, ``exported`` the names in ``__all__``, ``bindings`` every binding of
    the file (the other branches of a guarded group)."""
    left, safety = [], "safe"
    for use in uses:
        found = covering.get(use, [])
        if not found or any(binding.local in head_names(v.replacement) for v in found):
            left.append(use)
        elif not any(v.safety == "safe" for v in found):
            safety = "unsafe"
    binding.left = left
    if binding.local in exported:
        binding.reason = "exported"
        return
    if not left:
        binding.action = "remove"
        if uses:
            binding.safety, binding.reason = safety, "ported"
        elif binding.scope == "function":
            binding.safety, binding.reason = "safe", "unused"
        else:
            binding.safety, binding.reason = "unsafe", "unused-module"
        return
    name = amp_name(binding.qualname)
    if name is None or not isinstance(binding.small, cst.ImportFrom):
        binding.reason = "used"
        return
    if binding.group is not None and any(
            other.local == binding.local and other.qualname in GENERIC_QUALNAMES[name]
            for other in bindings if other.group is binding.group):
        binding.action, binding.safety, binding.reason = "repoint", "safe", "guarded"
    elif name == "GradScaler" and all(use in annotation_uses for use in left):
        binding.action, binding.safety, binding.reason = "repoint", "safe", "annotation"
    else:
        binding.reason = "used"


def import_edits(bindings: list[Binding]):
    """(removed aliases, repointed imports) for the amp bindings among ``bindings``; a repoint
    happens only when every alias left in that import is repointed."""
    removed = {b.alias for b in bindings if is_amp_binding(b.qualname) and b.action == "remove"}
    repoint = {}
    for b in bindings:
        if b.action == "repoint" and isinstance(b.small, cst.ImportFrom):
            kept = [o for o in bindings if o.small is b.small and o.alias not in removed]
            if all(o.action == "repoint" for o in kept):
                repoint[b.small] = GENERIC[amp_name(b.qualname) or "GradScaler"]
    return removed, repoint
