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
        parts.append("its uses are ported (NP301, NP303, NP305): the import goes")
    if "unused" in reasons or "unused-module" in reasons:
        note = " (unsafe: another module may import it)" \
            if "unused-module" in reasons else ""
        parts.append("unused: remove it" + note)
    if "guarded" in reasons and repoint:
        parts.append("import it from `torch.amp` in every branch")
    if "annotation" in reasons and repoint:
        parts.append("only used in annotations: import `torch.amp.GradScaler`")
    if "exported" in reasons:
        parts.append("re-exported in `__all__`: export `torch.amp`'s name once its users pass a device type")
    used = [b.local for b in mine if b.reason == "used" or (b.action == "repoint" and not repoint)]
    if used:
        parts.append(f"`{'`, `'.join(sorted(set(used)))}` is still used where it could not be ported: the "
                     "import stays")
    if guarded == "whole":
        parts.append("it goes whole")
    elif guarded:
        parts.append("the guarded import stays valid")
    return template.format(import_=import_, what="; ".join(parts))


def skip_note(skip: bool, path: str) -> str:
    """Why a finding of a file whose imports are only reported (``skip``) has no fix."""
    if not skip:
        return ""
    if path.endswith(".ipynb"):
        return " (not changed in a notebook: later cells may use it)"
    return " (not changed: the file has `# neuron-port: ignore` comments)"


def import_text(small) -> str:
    """The import statement on one line, at most 45 characters."""
    text = " ".join(cst.Module(body=[]).code_for_node(small).split()).replace("( ", "(").replace(", )", ")")
    return text if len(text) <= 45 else text[:42] + "..."
