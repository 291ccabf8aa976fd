"""Guards: code inside blocks that some test protects (an availability check, an optional import)."""

from __future__ import annotations

import libcst as cst

# Calls that test whether an accelerator is there, in any spelling the import tracker resolves.
AVAILABILITY_CHECKS = frozenset(
    {"torch.cuda.is_available", "torch.accelerator.is_available", "torch.neuron.is_available"}
)


class GuardedBlocks:
    """Mixin for rules that treat code inside some blocks as guarded (e.g. under an availability
    check): the subclass adds block nodes to ``_guarded_blocks``; ``_guard_depth`` is how many of them
    the visit is inside."""

    _guarded_blocks: set
    _guard_depth: int

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if node in self._guarded_blocks:
            self._guard_depth += 1

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        if original_node in self._guarded_blocks:
            self._guard_depth -= 1

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        if node in self._guarded_blocks:
            self._guard_depth += 1

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite) -> None:
        if original_node in self._guarded_blocks:
            self._guard_depth -= 1


class AvailabilityMixin:
    """For rules that need to know whether a test is ``torch.cuda.is_available()``."""

    context: object

    def is_availability_check(self, node: cst.BaseExpression) -> bool:
        """``torch.cuda.is_available()`` (any spelling), alone or as a term of an ``and`` chain."""
        if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And):
            return self.is_availability_check(node.left) or self.is_availability_check(node.right)
        if isinstance(node, cst.Call) and not node.args:
            return self.context.qualname(node.func) in AVAILABILITY_CHECKS  # type: ignore[attr-defined]
        return False
