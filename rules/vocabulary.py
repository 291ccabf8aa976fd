"""The words of the rule spec: kinds, severities, fix availability and safety, efforts, targets. A leaf
module, so the per-file context and the spec can both use them."""

from __future__ import annotations

from typing import Literal, Optional

Kind = Literal["python", "line", "runtime"]
Severity = Literal["error", "warning", "info"]
FixAvailability = Literal["never", "sometimes", "always"]
FixSafety = Literal["safe", "unsafe"]
Effort = Literal["low", "medium", "high"]
Target = Literal["neuron", "accelerator"]

KINDS: tuple[str, ...] = ("python", "line", "runtime")
SEVERITIES: tuple[str, ...] = ("info", "warning", "error")
FIX_AVAILABILITIES: tuple[str, ...] = ("never", "sometimes", "always")
FIX_SAFETIES: tuple[str, ...] = ("safe", "unsafe")
EFFORTS: tuple[str, ...] = ("low", "medium", "high")
TARGETS: tuple[str, ...] = ("neuron", "accelerator")
# The launch scripts and configs that line rules read (see neuron_port/rewrite/sources.py file_kind).
LINE_FILE_KINDS: tuple[str, ...] = ("shell", "make", "yaml", "json", "toml")

# (module, name, asname): `import module` when name is None, else `from module import name`
Import = tuple[str, Optional[str], Optional[str]]
