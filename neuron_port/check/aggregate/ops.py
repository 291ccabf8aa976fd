"""``op`` events: calls per policy over all processes, and the readiness (share of native calls); with the
distinct eager signatures (``eager_compile`` events) over all processes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from neuron_port.check.aggregate.base import Aggregator
from neuron_port.check.events import EagerCompileEvent, OpEvent
from neuron_port.check.sites import SiteMapper


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


class OpsAggregator(Aggregator):
    """Sums the calls of ``op`` events: fallback calls and native (with and without a NEFF) calls; counts
    the distinct (op, signature) of the eager compiles over all sites and ranks."""

    EVENTS = {OpEvent: "add", EagerCompileEvent: "add_signature"}
    SECTION = ("ops",)

    def __init__(self, mapper: Optional[SiteMapper] = None) -> None:
        super().__init__(mapper)
        self.calls = 0
        self.native_calls = 0
        self.fallback_calls = 0
        self.signatures: set[tuple[str, str]] = set()

    def add(self, event: OpEvent, rank: Optional[int]) -> None:
        self.calls += event.calls
        if event.policy == "fallback":
            self.fallback_calls += event.calls
        else:
            self.native_calls += event.calls

    def add_signature(self, event: EagerCompileEvent, rank: Optional[int]) -> None:
        self.signatures.add((event.op, json.dumps(list(event.signature))))

    def totals(self, unique_signatures: Optional[int] = None) -> OpTotals:
        """The totals; ``unique_signatures`` (default: the distinct ones added) as ShapeAggregator counts them."""
        return OpTotals(calls=self.calls, native_calls=self.native_calls, fallback_calls=self.fallback_calls,
                        unique_signatures=len(self.signatures) if unique_signatures is None else unique_signatures)

    def section(self) -> tuple[OpTotals]:
        return (self.totals(),)
