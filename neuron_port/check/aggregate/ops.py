"""``op`` events: calls per policy over all processes, and the readiness (share of native calls)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from neuron_port.check.events import OpEvent


@dataclass(frozen=True)
class OpTotals:
    calls: int
    native_calls: int
    fallback_calls: int
    unique_signatures: int  # eager NEFF compile signatures over all processes

    @property
    def readiness(self) -> Optional[float]:
        """The share of op calls that ran natively (None when no op reached the device)."""
        return round(self.native_calls / self.calls, 4) if self.calls else None

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "native_calls": self.native_calls, "fallback_calls": self.fallback_calls,
                "unique_signatures": self.unique_signatures, "readiness": self.readiness}


class OpsAggregator:
    """Sums the calls of ``op`` events: fallback calls and native (with and without a NEFF) calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.native_calls = 0
        self.fallback_calls = 0

    def add(self, event: OpEvent, rank: Optional[int]) -> None:
        self.calls += event.calls
        if event.policy == "fallback":
            self.fallback_calls += event.calls
        else:
            self.native_calls += event.calls

    def totals(self, unique_signatures: int) -> OpTotals:
        """The totals; ``unique_signatures`` comes from the eager compile events (ShapeAggregator)."""
        return OpTotals(calls=self.calls, native_calls=self.native_calls, fallback_calls=self.fallback_calls,
                        unique_signatures=unique_signatures)
