"""What the NP7xx package rules share: the one-lower severity of guarded code, and the bases
``GuardedRule`` (tracks blocks guarded by an optional import or an availability test) and
``PackageRule`` (reports every import statement and use of a package, with the advice of its table).
"""

from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from neuron_port.rules.helpers.guards import GuardedBlocks
from neuron_port.rules.helpers.names import code_children, dotted_name, is_none, last_segment, walk, walk_all
from neuron_port.rules.helpers.table_rule import QualifiedNameRule, covering_key
from neuron_port.rules.no_port.tables import AVAILABILITY_CALL_RE, AVAILABILITY_FLAG_RE, GUARD_EXCEPTIONS, Advice

# Code with a fallback (a guarded import or availability test) is reported one severity lower.
LOWER = {"error": "warning", "warning": "info", "info": "info"}
_TEST_FACTS = "no_port.test_facts"  # key of the if-test answers in FileContext.shared


def covers(qualname: str, prefixes: Iterable[str]) -> bool:
    """``qualname`` is one of the dotted ``prefixes`` or a dotted child of one (no package prefix of this
    family ends in ``_``, so covering_key's plain-prefix form never applies here)."""
    return covering_key(qualname, prefixes) is not None


def _catches_import_errors(handler: cst.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = [e.value for e in handler.type.elements] if isinstance(handler.type, cst.Tuple) else [handler.type]
    return any(last_segment(t) in GUARD_EXCEPTIONS for t in types)


class GuardedRule(GuardedBlocks, QualifiedNameRule[str]):
    """Tracks whether the node being visited sits in a guarded block (optional import or availability
    check) so reports there get a lower severity. References that are not uses (tests against None,
    assignment targets) go into ``not_uses``."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._guarded_blocks: set[cst.CSTNode] = set()
        self._guarded_nodes: set[cst.CSTNode] = set()
        self._guard_depth = 0

    def _is_availability_test(self, test: cst.BaseExpression) -> bool:
        # exact types (LibCST's node classes have no subclasses); whitespace, comments and operator
        # tokens hold no expression, so they are not entered (the answer does not depend on the order of
        # the search: any node below the test, but inside none of torch's, decides)
        stack: list[cst.CSTNode] = [test]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is cst.Call or kind is cst.Name or kind is cst.Attribute:
                if (self.context.qualname(node.func if kind is cst.Call else node) or "").startswith("torch."):
                    continue  # torch.cuda.is_available() is a device test (NP2xx), not a package check
            stack.extend(code_children(node))
            if kind is cst.Call:
                last = last_segment(node.func)
                if last is not None and AVAILABILITY_CALL_RE.match(last):
                    return True
            elif kind is cst.Name or kind is cst.Attribute:
                last = last_segment(node)
                if last is not None and AVAILABILITY_FLAG_RE.match(last):
                    return True
            elif kind is cst.Comparison:
                if any(isinstance(c.operator, cst.IsNot) and is_none(c.comparator) for c in node.comparisons):
                    return True
        return False

    def _test_facts(self, test: cst.BaseExpression) -> tuple[bool, tuple[cst.CSTNode, ...]]:
        """Whether an if-test is an availability test, and the names it compares with None (not uses).
        Every package rule of the pass asks about the same test at the same point of the walk (the same
        imports seen): the answer is computed once per test and shared through the file context."""
        memo = self.context.shared.setdefault(_TEST_FACTS, {})
        facts = memo.get(test)
        if facts is None:
            nodes = walk_all(test)  # exact types below: LibCST's node classes have no subclasses
            compares_none = any(type(n) is cst.Comparison and any(is_none(c.comparator) for c in n.comparisons)
                                for n in nodes)
            names = tuple(n for n in nodes if type(n) is cst.Name or type(n) is cst.Attribute) if compares_none else ()
            facts = memo[test] = (self._is_availability_test(test), names)
        return facts

    def visit_Try(self, node: cst.Try) -> None:
        if any(_catches_import_errors(h) for h in node.handlers):
            self._guarded_blocks.add(node.body)

    def visit_If(self, node: cst.If) -> None:
        availability, not_uses = self._test_facts(node.test)
        if availability:
            self._guarded_blocks.add(node.body)
        self.not_uses.update(not_uses)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        availability, not_uses = self._test_facts(node.test)
        if availability:
            self._guarded_nodes.update(walk(node.body))
        self.not_uses.update(not_uses)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        # `bnb is not None` / `flash_attn is None` test for the package: not a use
        if any(isinstance(c.operator, (cst.Is, cst.IsNot)) and is_none(c.comparator) for c in node.comparisons):
            self.not_uses.add(node.left)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.not_uses.add(node.target)  # `flash_attn_func = None` in a fallback is not a use

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.not_uses.add(node.target)

    def guarded(self, node: Optional[cst.CSTNode] = None) -> bool:
        return self._guard_depth > 0 or (node is not None and node in self._guarded_nodes)

    def severity_for(self, node: Optional[cst.CSTNode] = None) -> Optional[str]:
        return LOWER[self.SEVERITY] if self.guarded(node) else None


def _advice_for(qualname: str, table: Advice) -> tuple[str, str]:
    """The entry of the longest key covering ``qualname``; the first entry (the package root) otherwise."""
    best = covering_key(qualname, table)
    return table[next(iter(table)) if best is None else best]


class PackageRule(GuardedRule):
    """One package with no Neuron port: every import statement and every use is reported."""

    LABEL: str = ""
    ADVICE: Advice = {}
    PACKAGES: tuple[str, ...] = ()  # dotted prefixes (default: the keys of ADVICE without a dot)
    GUARDED_NOTE = " (guarded: check the fallback)"

    def _packages(self) -> tuple[str, ...]:
        return self.PACKAGES or tuple(k for k in self.ADVICE if "." not in k)

    def report_use(self, node: cst.CSTNode, qualname: str, what: str) -> None:
        advice, effort = _advice_for(qualname, self.ADVICE)
        guarded = self.guarded(node)
        self.report(
            node,
            f"{self.LABEL} {what}: {advice}" + (self.GUARDED_NOTE if guarded else ""),
            effort=effort,
            severity=LOWER[self.SEVERITY] if guarded else None,
        )

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is not None and covers(full, self._packages()):
                self.report_use(node, full, f"import of `{full}`")
                return

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = dotted_name(node.module)
        if module is None:
            return
        names = [] if isinstance(node.names, cst.ImportStar) else [
            a.name.value for a in node.names if isinstance(a.name, cst.Name)]
        fulls = [f"{module}.{n}" for n in names]
        if covers(module, self._packages()):
            self.report_use(node, fulls[0] if len(fulls) == 1 else module, f"import from `{module}`")
            return
        for full in fulls:
            if covers(full, self._packages()):
                self.report_use(node, full, f"import of `{full}`")
                return

    # Uses: QualifiedNameRule asks about the outermost reference of each Name/Attribute chain only.
    def lookup(self, qualname: str) -> Optional[str]:
        return covering_key(qualname, self._packages())

    def on_reference(self, node: cst.BaseExpression, qualname: str, key: str) -> None:
        self.report_use(node, qualname, f"`{qualname}`")
