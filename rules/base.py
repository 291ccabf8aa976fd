"""The rule base class and the example types every rule carries.

A rule is one class: stable code, kebab-case name, severity, fix safety, effort, message, a docstring
that becomes its docs page, and VALID / INVALID examples that the test harness runs. Rules *report*
(node, message, replacement, imports); they never edit the tree and never print. The engine decides
which replacements are applied (safe by default, unsafe with --unsafe-fixes) and adds imports.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, Optional, Sequence, Union

import libcst as cst

if TYPE_CHECKING:  # pragma: no cover
    from neuron_port.rules.context import FileContext

Severity = Literal["error", "warning", "info"]
FixSafety = Literal["safe", "unsafe", "none"]
Effort = Literal["low", "medium", "high"]
Target = Literal["neuron", "accelerator"]

SEVERITIES: tuple[str, ...] = ("info", "warning", "error")
FIX_SAFETIES: tuple[str, ...] = ("safe", "unsafe", "none")
EFFORTS: tuple[str, ...] = ("low", "medium", "high")
TARGETS: tuple[str, ...] = ("neuron", "accelerator")

CODE_RE = re.compile(r"^NP[1-9]\d\d$")
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
DOC_SECTIONS = ("## What it does", "## Why", "## Example", "## Fix safety", "## References")


@dataclass(frozen=True)
class Valid:
    """Code the rule must not report (for the given target)."""

    code: str
    target: Target = "neuron"

    def source(self) -> str:
        return _dedent(self.code)


@dataclass(frozen=True)
class Invalid:
    """Code the rule must report at least once.

    ``expected`` is the whole rewritten source after the fixes this rule allows (safe ones, plus unsafe
    ones when ``unsafe_fixes``); ``None`` means the rule only reports and the code stays as it is.
    """

    code: str
    expected: Optional[str] = None
    target: Target = "neuron"
    unsafe_fixes: bool = False
    message_contains: Optional[str] = None

    def source(self) -> str:
        return _dedent(self.code)

    def expected_source(self) -> Optional[str]:
        return None if self.expected is None else _dedent(self.expected)


def _dedent(code: str) -> str:
    code = textwrap.dedent(code)
    if code.startswith("\n"):
        code = code[1:]
    return code


@dataclass
class Report:
    """What a rule hands the engine for one node. Never seen outside the engine."""

    rule: type["Rule"]
    node: cst.CSTNode
    message: str
    replacement: Optional[cst.CSTNode] = None
    safety: FixSafety = "none"
    effort: Optional[Effort] = None
    # (module, name, asname): `import module` when name is None, else `from module import name`
    imports: tuple[tuple[str, Optional[str], Optional[str]], ...] = ()
    severity: Optional[Severity] = None


class Rule(cst.BatchableCSTVisitor):
    """Base class of every logic rule. Subclasses set the class attributes and implement visit_*."""

    CODE: ClassVar[str]
    NAME: ClassVar[str]
    SEVERITY: ClassVar[Severity]
    FIX: ClassVar[FixSafety]
    EFFORT: ClassVar[Optional[Effort]] = None
    MESSAGE: ClassVar[str]
    # Substrings of which at least one must occur in a file for this rule to be able to report anything.
    # The engine skips a file (no parse) when no enabled rule's trigger occurs in it.
    TRIGGERS: ClassVar[Sequence[str]] = ("cuda",)
    TARGETS: ClassVar[Sequence[Target]] = TARGETS  # targets the rule runs for
    VALID: ClassVar[Sequence[Union[Valid, str]]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()

    def __init__(self, context: "FileContext") -> None:
        super().__init__()
        self.context = context

    # -- reporting ---------------------------------------------------------------------------------
    def report(
        self,
        node: cst.CSTNode,
        message: Optional[str] = None,
        *,
        replacement: Optional[cst.CSTNode] = None,
        safety: Optional[FixSafety] = None,
        effort: Optional[Effort] = None,
        imports: Sequence[tuple[str, Optional[str], Optional[str]]] = (),
        severity: Optional[Severity] = None,
    ) -> None:
        if replacement is None:
            fix_safety: FixSafety = "none"
        else:
            fix_safety = safety or (self.FIX if self.FIX != "none" else "unsafe")
        self.context.reports.append(
            Report(
                rule=type(self),
                node=node,
                message=message or self.MESSAGE,
                replacement=replacement,
                safety=fix_safety,
                effort=effort if effort is not None else (self.EFFORT if replacement is None else None),
                imports=tuple(imports),
                severity=severity,
            )
        )

    # -- registry metadata -------------------------------------------------------------------------
    @classmethod
    def docs(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> dict:
        return {
            "code": cls.CODE,
            "name": cls.NAME,
            "severity": cls.SEVERITY,
            "fix": cls.FIX,
            "effort": cls.EFFORT,
            "message": cls.MESSAGE,
            "targets": list(cls.TARGETS),
        }
