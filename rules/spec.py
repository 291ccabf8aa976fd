"""The rule spec: what every rule of the registry declares, whatever it checks.

A rule is one class with a stable code, a kebab-case name, a severity, whether it can fix what it finds
(FIX_AVAILABILITY: never / sometimes / always) and how safe its fixes are by default (FIX_SAFETY: safe /
unsafe; each fix may say otherwise), an effort for what it cannot fix, a message, a docstring that is
its docs page, and VALID / INVALID examples that the tests run. Three kinds share that spec:

- ``PythonRule`` (KIND "python"): a LibCST visitor run in the engine's one batched pass over a module
  or notebook cell; it *reports* violations (node, message, replacement, imports) and never edits.
- ``LineRule`` (KIND "line"): matches one line of a launch script or config (``scan``); the line engine
  applies the character replacements it proposes.
- ``RuntimeRule`` (KIND "runtime"): a finding of ``neuron-port check``, made from the simulator's
  events; its examples are scripts that are run on the simulated device.

Consumers tell them apart by ``rule.KIND`` and group them by ``rule.FAMILY`` (from the code's
hundred, see ``families.py``); nothing sniffs attributes.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Iterable, Optional, Sequence, Union

import libcst as cst

from neuron_port.rules.families import family_of

from neuron_port.rules.context import FileContext, Violation
from neuron_port.rules.vocabulary import (  # noqa: F401 (the spec's vocabulary is imported from here too)
    EFFORTS,
    FIX_AVAILABILITIES,
    FIX_SAFETIES,
    KINDS,
    LINE_FILE_KINDS,
    SEVERITIES,
    TARGETS,
    Effort,
    FixAvailability,
    FixSafety,
    Import,
    Kind,
    Severity,
    Target,
)

CODE_RE = re.compile(r"^NP[1-9]\d\d$")
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
DOC_SECTIONS = ("## What it does", "## Why", "## Example", "## Fix safety", "## References")


# -- examples --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Valid:
    """Code the rule must not report (for the given target). For a line rule, ``kind`` is the file
    kind of the example (shell, make, yaml, json, toml); ``neuron_cores`` stands for --neuron-cores.
    For a runtime rule, ``check_options`` are the options `check` runs the script with (``--shape-only``)."""

    code: str
    target: Target = "neuron"
    kind: str = "python"
    neuron_cores: Optional[int] = None
    check_options: tuple[str, ...] = ()

    def source(self) -> str:
        return dedent_example(self.code)


@dataclass(frozen=True)
class Invalid:
    """Code the rule must report at least once.

    ``expected`` is the whole rewritten source after the fixes this rule allows (safe ones, plus unsafe
    ones when ``unsafe_fixes``); ``None`` means the code stays as it is.

    An example that this rule's *safe* fixes change says whether that safely fixed source is a program
    that runs: ``runs=True`` (a complete single-process program: its imports, tiny tensors and modules,
    no data, no network; tests/rules/test_safe_fixes_run.py runs it on the simulated ``neuron`` device as
    ``torchrun --nproc-per-node 1`` would, and it must exit 0, whatever the CUDA input needed), or
    ``not_runnable``, a short reason why not: one of the constants below (``FRAGMENT``, ``OTHER_RULES``,
    ``TWO_PROCESSES``, ``LAUNCH_FILE``) or its own ("needs triton, a CUDA-only package"). The test fails
    on an example with a safe fix that says neither, so what runs is a decision. Only safe fixes are run
    (with ``unsafe_fixes=True`` the example's safe ones).

    For a runtime rule, ``check_options`` are the options `check` runs the script with (``--shape-only``).
    """

    code: str
    expected: Optional[str] = None
    target: Target = "neuron"
    unsafe_fixes: bool = False
    message_contains: Optional[str] = None
    kind: str = "python"
    neuron_cores: Optional[int] = None
    runs: bool = False
    not_runnable: Optional[str] = None
    check_options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.runs and self.not_runnable:
            raise ValueError(f"an Invalid example either runs or is not runnable ({self.not_runnable!r})")

    def source(self) -> str:
        return dedent_example(self.code)

    def expected_source(self) -> Optional[str]:
        return None if self.expected is None else dedent_example(self.expected)


# The common reasons an example's safely fixed source is not run (``Invalid(not_runnable=...)``).
FRAGMENT = "a fragment: uses names it does not define"
LAUNCH_FILE = "a launch script or config, not a Python program"
TWO_PROCESSES = "needs two processes"
OTHER_RULES = "keeps CUDA code that other rules fix"


def dedent_example(code: str) -> str:
    code = textwrap.dedent(code)
    if code.startswith("\n"):
        code = code[1:]
    return code


@dataclass(frozen=True)
class RunPremise:
    """What a static finding assumes that a `check` run can see (neuron_port/check/premises.py judges it).
    When the run succeeded, ran the finding's file on the device and none of these happened anywhere, the
    finding says "not seen in this run" and its severity becomes info; when one did, "seen in this run"."""

    absent: str  # the premise found false, as the report says it: "no float64 tensor reached the device"
    ops: tuple[str, ...] = ()  # ATen ops (fnmatch patterns) whose calls on the device show the premise
    fallback_ops: tuple[str, ...] = ()  # ops that show it when they fall back to the CPU
    features: tuple[str, ...] = ()  # unsupported features (neuron_backend/EVENTS.md, `unsupported`)
    demotions: tuple[str, ...] = ()  # dtypes of `demotion` events ("float64")


# -- the spec --------------------------------------------------------------------------------------
class RuleSpec:
    """What every rule declares. Subclass one of the three kinds, never this class directly."""

    KIND: ClassVar[Kind]
    CODE: ClassVar[str]
    NAME: ClassVar[str]
    FAMILY: ClassVar[str]  # set from CODE when the class is defined (families.py)
    SEVERITY: ClassVar[Severity]
    FIX_AVAILABILITY: ClassVar[FixAvailability] = "never"
    FIX_SAFETY: ClassVar[FixSafety] = "safe"  # the default applicability of this rule's fixes
    EFFORT: ClassVar[Optional[Effort]] = None  # the work left when there is no fix
    MESSAGE: ClassVar[str]
    TARGETS: ClassVar[Sequence[Target]] = TARGETS  # targets the rule runs for
    VALID: ClassVar[Sequence[Union[Valid, str]]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()
    # A rule that reports at most once per file: a notebook (one pass per cell) keeps its first finding.
    ONCE_PER_FILE: ClassVar[bool] = False
    # What `check` can verify of a static finding's premise (None: nothing the run shows).
    RUN_PREMISE: ClassVar[Optional[RunPremise]] = None

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "CODE" in vars(cls):
            cls.FAMILY = family_of(cls.CODE).name

    @classmethod
    def docs(cls) -> str:
        text = inspect.cleandoc(cls.__doc__ or "")
        if cls.RUN_PREMISE is not None:
            text += ("\n\n## Checked against the run\n`neuron-port check` says \"not seen in this run\" beside this "
                     f"finding, and makes it info, when the command succeeded and imported its file and "
                     f"{cls.RUN_PREMISE.absent}; \"seen in this run\" when the run showed it.")
        return text

    @classmethod
    def docs_header(cls) -> str:
        """The lines above the docs page: code, name, severity, fix, effort."""
        return (f"# {cls.CODE} {cls.NAME}\n\nseverity: {cls.SEVERITY} · fix: {cls.fix_label()}"
                + (f" · effort: {cls.EFFORT}" if cls.EFFORT else "") + "\n\n")

    @classmethod
    def fix_label(cls) -> str:
        """``never`` / ``sometimes (safe)`` / ``always (unsafe)``: what `rules` and `explain` show."""
        if cls.FIX_AVAILABILITY == "never":
            return "never"
        return f"{cls.FIX_AVAILABILITY} ({cls.FIX_SAFETY})"

    @classmethod
    def summary(cls) -> dict:
        return {
            "code": cls.CODE,
            "name": cls.NAME,
            "kind": cls.KIND,
            "family": cls.FAMILY,
            "severity": cls.SEVERITY,
            "fix": cls.FIX_AVAILABILITY,
            "fix_safety": None if cls.FIX_AVAILABILITY == "never" else cls.FIX_SAFETY,
            "effort": cls.EFFORT,
            "message": cls.MESSAGE,
            "targets": list(cls.TARGETS),
        }


# -- python rules ----------------------------------------------------------------------------------
class PythonRule(RuleSpec, cst.BatchableCSTVisitor):
    """A rule over Python source: implement visit_* / leave_* and call ``report``."""

    KIND = "python"
    # Regular expressions (Python ``re``, MULTILINE) of which at least one must match a file's text for
    # this rule to be able to report anything: the pre-filter (neuron_port/rewrite/prefilter.py) parses a
    # file only when some enabled rule's trigger matches outside a doctest line (``>>>`` / ``... ``).
    # Match the idiom as code, not the bare word (prose and unrelated names send files to the parser):
    #   r"\.[ \t]*compile\b(?<!\bre\.compile)"   an attribute, but not re.compile
    #   r"import\b[^\n]*\bcompile\b"              imported by name on one line
    #   r"compile(?<=[\s(,]compile)\b[ \t]*(?:[,)\\]|as\b|\r?$)"   a line of a multi-line import
    #   r"pipeline(?<!\wpipeline)\s*\("           a call of the bare name (``\bX`` written so)
    #   r"dtype\s*=\s*\(*\s*(?:\w+\s*\.\s*)+half\b"  a keyword with the value the rule looks for
    # but never narrower than what the rule reports (tests/rewrite/test_prefilter.py runs every INVALID
    # example through it; bench/rewrite/bench_rewrite.py compares the findings on two corpora with the
    # previous version's). Each pattern starts with a literal character (not ``\b``, ``^``, a group, a
    # class or a lookaround: write ``X(?<!\wX)`` for ``\bX``) and has no top-level ``|`` (use separate
    # patterns), so the patterns combine into one fast regex. After changing TRIGGERS, run
    # scripts/generate_triggers.py (the index the pre-filter reads without importing the rules).
    TRIGGERS: ClassVar[Sequence[str]] = ("cuda",)

    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context

    def report(
        self,
        node: cst.CSTNode,
        message: Optional[str] = None,
        *,
        replacement: Optional[cst.CSTNode] = None,
        safety: Optional[FixSafety] = None,
        effort: Optional[Effort] = None,
        imports: Sequence[Import] = (),
        severity: Optional[Severity] = None,
    ) -> None:
        self.context.violations.append(
            Violation(
                rule=type(self),
                node=node,
                message=message or self.MESSAGE,
                replacement=replacement,
                safety=None if replacement is None else (safety or self.FIX_SAFETY),
                effort=effort if effort is not None else (self.EFFORT if replacement is None else None),
                imports=tuple(imports),
                severity=severity,
            )
        )


# -- line rules ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScriptLine:
    """One line of a launch script or config, as a line rule sees it."""

    number: int  # 1-based
    code: str  # the line without its newline and comment
    logical: str  # scripts: the whole logical line (backslash continuations joined), comments stripped
    in_launcher_script: bool  # the script runs torchrun / python -m torch.distributed.launch|run


@dataclass(frozen=True)
class LineOptions:
    target: str = "neuron"
    unsafe_fixes: bool = False
    cores: Optional[tuple[int, str]] = None  # --instance / --neuron-cores: (cores per node, description)


@dataclass
class LineHit:
    """A line rule's finding: columns ``start:end`` of the line, and the text to put there."""

    start: int  # 0-based column
    end: int
    message: str
    replacement: Optional[str] = None  # text for line[start:end]; "" deletes those characters
    delete_line: bool = False
    safety: Optional[FixSafety] = None  # None when there is no fix

    @property
    def fixable(self) -> bool:
        return self.replacement is not None or self.delete_line


class LineRule(RuleSpec, ABC):
    """A rule over launch scripts and configs: ``scan`` yields the hits on one line."""

    KIND = "line"
    FILE_KINDS: ClassVar[tuple[str, ...]] = LINE_FILE_KINDS
    # Regular expressions, as for PythonRule.TRIGGERS, without which a file cannot produce a finding of
    # this rule (the line engine's pre-filter).
    TRIGGERS: ClassVar[Sequence[str]] = ()

    @abstractmethod
    def scan(self, line: ScriptLine, file_kind: str, options: LineOptions) -> Iterable[LineHit]:
        """The hits of this rule on one line (``file_kind`` is one of FILE_KINDS)."""


# -- runtime rules ---------------------------------------------------------------------------------
class RuntimeRule(RuleSpec):
    """A finding of `neuron-port check`, made by neuron_port/check from the simulator's events. Its
    examples are scripts: INVALID ones must produce the finding on the simulated device, VALID ones not.
    ``MESSAGE`` is a format string the aggregator fills in."""

    KIND = "runtime"
    TARGETS = ()
