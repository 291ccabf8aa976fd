"""``eager_compile`` events: unique signatures per op and site (each one an eager NEFF compile on
Trainium), and the shapes that vary with the data at one line (NP902, one finding per site, with the
padding buckets that would bound the compiles)."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from neuron_port.check.aggregate.findings import rule_message, runtime_finding
from neuron_port.check.events import EagerCompileEvent
from neuron_port.check.sites import SiteKey, SiteMapper, UserSite, site_json, site_key
from neuron_port.results import Finding

# A dimension must take at least this many values at one line to count as a varying length.
MIN_VARYING_VALUES = 3

TENSOR_RE = re.compile(r"^(?P<dtype>[a-z]+\d*)\[(?P<dims>[0-9,]*)\]")


def parse_tensor(arg: Any) -> Optional[tuple[str, tuple[int, ...]]]:
    """``("f32", (4, 8))`` for a signature argument ``"f32[4,8]"`` (any suffix), else None."""
    if not isinstance(arg, str):
        return None
    match = TENSOR_RE.match(arg)
    if not match:
        return None
    dims = tuple(int(d) for d in match.group("dims").split(",") if d)
    return match.group("dtype"), dims


def varying_dims(signatures: Iterable[list]) -> list[dict]:
    """For signatures of one op at one site: which (argument, dimension) varied, with its values."""
    sigs = [s for s in signatures if isinstance(s, list)]
    if len(sigs) < 2:
        return []
    width = min(len(s) for s in sigs)
    out = []
    for index in range(width):
        parsed = [parse_tensor(s[index]) for s in sigs]
        if any(p is None for p in parsed):
            continue
        ranks = {len(p[1]) for p in parsed}  # type: ignore[index]
        if len(ranks) != 1:
            out.append({"arg": index, "dim": None, "values": sorted(ranks)})
            continue
        for dim in range(ranks.pop()):
            values = sorted({p[1][dim] for p in parsed})  # type: ignore[index]
            if len(values) > 1:
                out.append({"arg": index, "dim": dim, "values": values})
    return out


def padding_buckets(values: Iterable[int], limit: int = 4) -> list[int]:
    """Powers of two covering the observed values, at most ``limit`` of them (the largest kept)."""
    values = [v for v in values if v > 0]
    if not values:
        return []
    buckets = sorted({1 << math.ceil(math.log2(v)) for v in values})
    if len(buckets) > limit:
        step = len(buckets) / limit
        buckets = sorted({buckets[min(len(buckets) - 1, math.ceil((i + 1) * step) - 1)] for i in range(limit)})
    return buckets


@dataclass(frozen=True)
class EagerCompileEntry:
    op: str
    site: Optional[UserSite]
    unique_signatures: int
    calls: int

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "site": site_json(self.site), "unique_signatures": self.unique_signatures,
                "calls": self.calls}


@dataclass(frozen=True)
class VaryingDim:
    arg: int  # index of the signature argument
    dim: Optional[int]  # None: the tensor's rank varied
    values: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"arg": self.arg, "dim": self.dim, "values": list(self.values)}

    def describe(self) -> str:
        shown = ",".join(str(v) for v in self.values[:6]) + ("..." if len(self.values) > 6 else "")
        where = f"rank of arg {self.arg}" if self.dim is None else f"dim {self.dim} of arg {self.arg}"
        return f"{where} took {len(self.values)} values: {shown}"


@dataclass(frozen=True)
class ShapeVarianceEntry:
    op: str
    site: Optional[UserSite]
    signatures: int
    calls: int
    varying: tuple[VaryingDim, ...]  # the dimension with the most values first
    suggested_buckets: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "site": site_json(self.site), "signatures": self.signatures, "calls": self.calls,
                "varying": [d.to_json() for d in self.varying], "suggested_buckets": list(self.suggested_buckets)}


@dataclass
class _OpAtSite:
    op: str
    site: Optional[UserSite]
    signatures: dict[tuple[str, ...], list] = field(default_factory=dict)  # JSON of each argument -> signature
    calls: int = 0


class ShapeAggregator:
    def __init__(self, mapper: SiteMapper) -> None:
        self.mapper = mapper
        self.by_op_site: dict[tuple[str, SiteKey], _OpAtSite] = {}
        self.signatures: set[tuple[str, tuple[str, ...]]] = set()  # (op, signature) over all sites and ranks

    def add(self, event: EagerCompileEvent, rank: Optional[int]) -> None:
        site = self.mapper(event.site)
        signature = tuple(json.dumps(arg) for arg in event.signature)
        self.signatures.add((event.op, signature))
        entry = self.by_op_site.setdefault((event.op, site_key(site)), _OpAtSite(event.op, site))
        entry.signatures[signature] = list(event.signature)
        entry.calls += event.calls

    @property
    def unique_signatures(self) -> int:
        return len(self.signatures)

    def _ranked(self) -> list[_OpAtSite]:
        return sorted(self.by_op_site.values(), key=lambda e: (-len(e.signatures), e.op))

    def entries(self) -> list[EagerCompileEntry]:
        """Per op and site, the most signatures first."""
        return [EagerCompileEntry(op=e.op, site=e.site, unique_signatures=len(e.signatures), calls=e.calls)
                for e in self._ranked()]

    def shape_variance(self) -> list[ShapeVarianceEntry]:
        # A dimension with few values at one line is usually several different tensors (the layers of a
        # model, the parameters an optimizer visits); a dimension with many is a length that changes with
        # the data. Rank changes are always different tensors.
        out = []
        for entry in self._ranked():
            if len(entry.signatures) < 2:
                continue
            dims = [d for d in varying_dims(entry.signatures.values())
                    if d["dim"] is not None and len(d["values"]) >= MIN_VARYING_VALUES]
            if dims:
                dims.sort(key=lambda d: -len(d["values"]))
                out.append(ShapeVarianceEntry(
                    op=entry.op, site=entry.site, signatures=len(entry.signatures), calls=entry.calls,
                    varying=tuple(VaryingDim(d["arg"], d["dim"], tuple(d["values"])) for d in dims),
                    suggested_buckets=tuple(padding_buckets(dims[0]["values"]))))
        return out

    def findings(self) -> list[Finding]:
        """One NP902 per site (several ops on one line share the cause), the most signatures first."""
        by_site: dict[SiteKey, list[ShapeVarianceEntry]] = defaultdict(list)
        for variance in self.shape_variance():
            by_site[site_key(variance.site)].append(variance)
        out = []
        for items in sorted(by_site.values(), key=lambda vs: -max(v.signatures for v in vs)):
            if items[0].site is None:
                continue  # no user frame to point at (kept in runtime.shape_variance)
            worst = max(items, key=lambda v: v.signatures)
            message = rule_message("NP902", op=worst.op, n=worst.signatures,
                                   dims="; ".join(d.describe() for d in worst.varying[:3]),
                                   buckets=list(worst.suggested_buckets))
            if len(items) > 1:
                message += f" (also {len(items) - 1} other op(s) here: {', '.join(sorted({v.op for v in items}))})"
            out.append(runtime_finding("NP902", message, worst.site))
        return out
