"""What NP306 (``amp_imports.py``) says about an import of ``torch.cuda.amp`` names: the import as
written (shortened), the reasons of its bindings (``Binding.reason``: ported, unused, guarded, annotation,
exported, used) in words, and why a finding has no fix (a notebook, suppression comments)."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.mixed_precision.import_groups import Binding


def import_message(template: str, line, mine: list[Binding], repoint: dict, guarded: str = "") -> str:
    """``template`` (the rule's MESSAGE) filled in for the amp bindings ``mine`` of ``line``; ``guarded``
    is "whole" or "kept" for a version-guarded group."""
    smalls = {b.small for b in mine}
    shown = next((s for s in line.body if s in smalls), None)
    import_ = import_text(shown) if shown is not None else "import"
    reasons = {b.reason for b in mine}
    parts = []
    if "ported" in reasons:
        parts.append("its uses are ported to `torch.autocast` / `torch.amp` (NP301, NP303, NP305), so the "
                     "import goes")
    if "unused" in reasons or "unused-module" in reasons:
        note = " (unsafe at module level: another module may import it from here)" \
            if "unused-module" in reasons else ""
        parts.append("the name is not used in this file: remove it" + note)
    if "guarded" in reasons and repoint:
        parts.append("the other branch imports the `torch.amp` name the rewritten calls use: import it "
                     "from `torch.amp` in every branch")
    if "annotation" in reasons and repoint:
        parts.append("`GradScaler` is only used in annotations: import `torch.amp.GradScaler` (the CUDA "
                     "class is a subclass of it)")
    if "exported" in reasons:
        parts.append("it is re-exported in `__all__`: export `torch.amp`'s name instead once its users pass "
                     "a device type")
    used = [b.local for b in mine if b.reason == "used" or (b.action == "repoint" and not repoint)]
    if used:
        parts.append(f"`{'`, `'.join(sorted(set(used)))}` is still used where it could not be ported (see "
                     "NP301 / NP303 / NP305 there): the import stays until those uses move to `torch.amp`")
    if guarded == "whole":
        parts.append("no branch of the version-guarded import is used any more: it goes whole")
    elif guarded:
        parts.append("the version-guarded import stays valid")
    return template.format(import_=import_, what="; ".join(parts))


def skip_note(skip: bool, path: str) -> str:
    """Why a finding of a file whose imports are only reported (``skip``) has no fix."""
    if not skip:
        return ""
    if path.endswith(".ipynb"):
        return " (not changed automatically in a notebook: later cells may use the name)"
    return " (not changed automatically: the file has `# neuron-port: ignore` comments)"


def import_text(small) -> str:
    """The import statement on one line, at most 70 characters."""
    text = " ".join(cst.Module(body=[]).code_for_node(small).split()).replace("( ", "(").replace(", )", ")")
    return text if len(text) <= 70 else text[:67] + "..."
