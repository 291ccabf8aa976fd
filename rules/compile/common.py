"""The two bases shared by the NP4xx rules: ``CompileCallRule`` (rules that look at ``torch.compile(...)``
calls) and ``StatementRule`` (rules that report setting statements and offer to remove them)."""

from __future__ import annotations

from typing import Optional, Union

import libcst as cst

from neuron_port.rules.compile.tables import COMPILE_FUNCS
from neuron_port.rules.helpers.statements import has_comment_above, statement_without
from neuron_port.rules.spec import PythonRule


class CompileCallRule(PythonRule):
    """Visits ``torch.compile(...)`` calls (also as decorators) and hands them to ``check_compile``."""

    TRIGGERS = (r"\.[ \t]*(?:compile)\b(?<!\bre\.compile)", r"import\b[^\n]*\b(?:compile)\b", r"compile(?<=[\s(,]compile)\b[ \t]*(?:[,)\\]|as\b|\r?$)")

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node.func) in COMPILE_FUNCS:
            self.check_compile(node)

    def check_compile(self, node: cst.Call) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class StatementRule(PythonRule):
    """Reports setting statements (``x.y = v`` / ``f(...)`` lines) and offers to remove them.

    Subclasses implement ``match(small) -> message | None``. The removal is reported on the statement
    line, so a comment at the end of the line goes with it; a line with comment lines of its own above
    it is reported without a fix, so no comment is ever lost.
    """

    REMOVABLE_TARGETS = ("neuron",)  # on the accelerator target the setting still matters on GPUs

    def match(self, small: cst.BaseSmallStatement) -> Optional[str]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _statement(self, owner: Union[cst.SimpleStatementLine, cst.SimpleStatementSuite]) -> None:
        for small in owner.body:
            message = self.match(small)
            if message is None:
                continue
            node: cst.CSTNode = owner if len(owner.body) == 1 else small
            if self.context.target not in self.REMOVABLE_TARGETS:
                self.report(node, message, effort="low")
            elif isinstance(owner, cst.SimpleStatementLine) and has_comment_above(owner):
                self.report(node, message + " (not removed: a comment above)",
                            effort="low")
            else:
                self.report(owner, message, replacement=statement_without(owner, small))  # type: ignore[arg-type]
                return  # one removal per line and pass; the engine's next pass finds the others

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statement(node)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._statement(node)

    # helpers for match()
    def assigned(self, small: cst.BaseSmallStatement) -> Optional[tuple[str, cst.BaseExpression]]:
        """(qualified target, value) of ``a.b.c = value`` with one attribute target."""
        if type(small) is cst.Assign and len(small.targets) == 1:  # exact types: no subclasses in LibCST
            target = small.targets[0].target
            if type(target) is cst.Attribute or type(target) is cst.Name:
                qualname = self.context.qualname(target)
                if qualname is not None:
                    return qualname, small.value
        return None

    def called(self, small: cst.BaseSmallStatement) -> Optional[tuple[str, cst.Call]]:
        """(qualified function, call) of a statement that is just a call."""
        if type(small) is cst.Expr and type(small.value) is cst.Call:
            qualname = self.context.qualname(small.value.func)
            if qualname is not None:
                return qualname, small.value
        return None
