"""Events of the simulator's C++ core: per-op counts, CPU fallbacks, eager NEFF compile signatures,
dtype demotions, unsupported features and the explicit memory/view kernel counts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Optional

from neuron_port.check.events.fields import EventFields, MalformedEvent, Site, is_integer, site_field


@dataclass(frozen=True)
class SignatureCalls:
    """One signature of a fallback op or a native copy: its calls, when first seen, its calls outside training."""

    signature: tuple[Any, ...] = ()
    calls: int = 0
    first_seen: Optional[FirstSeen] = None
    outside_calls: Optional[dict[str, int]] = field(default=None, compare=False)  # of ``calls``, outside training, by kind


def signature_calls(f: EventFields) -> tuple[SignatureCalls, ...]:
    return tuple(SignatureCalls(tuple(s.array("signature") or ()), s.integer("calls"),
                                FirstSeen.from_fields(s.nested("first_seen")), outside_calls(s))
                 for s in f.objects("signatures"))


@dataclass(frozen=True)
class OpEvent:
    KIND: ClassVar[str] = "op"
    op: str
    policy: Optional[str] = None  # native | native_no_neff | fallback
    calls: int = 0
    unique_signatures: int = 0
    outside_calls: Optional[dict[str, int]] = field(default=None, compare=False)  # of ``calls``, outside training
    # a native_no_neff op's most-called signatures (a copy's bytes; none for a view, or an older simulator)
    signatures: tuple[SignatureCalls, ...] = field(default=(), compare=False)

    @classmethod
    def from_fields(cls, f: EventFields) -> OpEvent:
        return cls(op=f.required_text("op"), policy=f.text("policy"), calls=f.integer("calls"),
                   unique_signatures=f.integer("unique_signatures"), outside_calls=outside_calls(f),
                   signatures=signature_calls(f))


@dataclass(frozen=True)
class FallbackSite:
    site: Optional[Site]
    calls: int = 0


@dataclass(frozen=True)
class FallbackEvent:
    KIND: ClassVar[str] = "fallback"
    op: str
    calls: int = 0
    sites: tuple[FallbackSite, ...] = ()  # where each signature was first seen, most calls first
    host_seconds: Optional[float] = None  # the kernel's host time over the run (None: an older simulator)
    signatures: tuple[SignatureCalls, ...] = ()  # the most-called ones (the cost model's copy bytes)

    @classmethod
    def from_fields(cls, f: EventFields) -> FallbackEvent:
        sites = tuple(FallbackSite(site_field(s), s.integer("calls")) for s in f.objects("sites"))
        return cls(op=f.required_text("op"), calls=f.integer("calls"), sites=sites,
                   host_seconds=f.number("host_seconds"), signatures=signature_calls(f))


OUTSIDE_KINDS = ("setup", "evaluation", "generation")


def outside_calls(f: EventFields, name: str = "outside_calls") -> Optional[dict[str, int]]:
    """A signature's ``outside_calls`` (a graph's ``outside_runs``; EVENTS.md "Phases"): its calls per kind
    of phase that was not a training step; None when the line has none."""
    nested = f.nested(name)
    if nested is None:
        return None
    return {kind: n for kind in OUTSIDE_KINDS if (n := nested.integer(kind)) > 0} or None


@dataclass(frozen=True)
class FirstSeen:
    """When a signature was first seen, on the process's step clock (EVENTS.md, "Steps")."""

    optimizer_step: int = 0  # completed optimizer steps (of the optimizer that stepped most)
    forward: int = 0  # outermost module forward calls started (of the module called most)
    seq: Optional[int] = None  # order of the first sightings in the process
    phase: Optional[int] = None  # the phase (EVENTS.md, "Phases"; None: a simulator before phases)
    phase_forward: int = 0  # outermost calls in that phase (of the module called most in it)

    @classmethod
    def from_fields(cls, f: Optional[EventFields]) -> Optional[FirstSeen]:
        if f is None:
            return None
        return cls(optimizer_step=f.integer("optimizer_step"), forward=f.integer("forward"),
                   seq=f.optional_integer("seq"), phase=f.optional_integer("phase"),
                   phase_forward=f.integer("phase_forward"))


@dataclass(frozen=True)
class EagerCompileEvent:
    KIND: ClassVar[str] = "eager_compile"
    op: str
    signature: tuple[Any, ...] = ()  # one JSON value per schema argument: "f32[64,512]", scalars, ...
    calls: int = 0
    cache_hits: Optional[int] = None
    site: Optional[Site] = None  # where the signature was first seen
    first_seen: Optional[FirstSeen] = None  # when (None: written by a simulator without a step clock)
    # of ``calls``, those made in phases that were not training steps, by kind (EVENTS.md "Phases"); None:
    # a simulator before it, or none
    outside_calls: Optional[dict[str, int]] = field(default=None, compare=False)

    @classmethod
    def from_fields(cls, f: EventFields) -> EagerCompileEvent:
        return cls(op=f.required_text("op"), signature=tuple(f.array("signature") or ()), calls=f.integer("calls"),
                   cache_hits=f.optional_integer("cache_hits"), site=site_field(f),
                   first_seen=FirstSeen.from_fields(f.nested("first_seen")), outside_calls=outside_calls(f))


@dataclass(frozen=True)
class FirstSeenCount:
    """How many omitted signatures were first seen at one point of the step clock."""

    optimizer_step: int = 0
    forward: int = 0
    signatures: int = 0
    phase: Optional[int] = None
    phase_forward: int = 0


@dataclass(frozen=True)
class EagerCompileTruncatedEvent:
    KIND: ClassVar[str] = "eager_compile_truncated"
    op: str
    omitted_signatures: int = 0
    omitted_calls: int = 0
    first_seen: tuple[FirstSeenCount, ...] = ()  # of the omitted signatures

    @classmethod
    def from_fields(cls, f: EventFields) -> EagerCompileTruncatedEvent:
        first_seen = tuple(FirstSeenCount(optimizer_step=c.integer("optimizer_step"), forward=c.integer("forward"),
                                          signatures=c.integer("signatures"), phase=c.optional_integer("phase"),
                                          phase_forward=c.integer("phase_forward")) for c in f.objects("first_seen"))
        return cls(op=f.required_text("op"), omitted_signatures=f.integer("omitted_signatures"),
                   omitted_calls=f.integer("omitted_calls"), first_seen=first_seen)


def _aggregate_sites(f: EventFields) -> tuple[Optional[Site], ...]:
    """The sites of an int64 aggregate: site objects (what the simulator writes) or ``{"site": ...}``."""
    sites = []
    for index, item in enumerate(f.array("sites") or []):
        where = f"sites[{index}]"
        if item is not None and not isinstance(item, dict):
            raise MalformedEvent(f"{where}: expected an object or null, got {type(item).__name__}")
        if item is None:
            sites.append(None)
        elif "file" in item:
            sites.append(Site.from_json(item, where))
        else:
            sites.append(site_field(EventFields(item, f"{where}.")))
    return tuple(sites)


@dataclass(frozen=True)
class DemotionEvent:
    KIND: ClassVar[str] = "demotion"
    op: str
    dtype: Optional[str] = None  # float64 | int64
    computed_as: Optional[str] = None
    calls: int = 0
    signatures: Optional[int] = None
    site: Optional[Site] = None  # float64: one event per op and site
    aggregated: bool = False  # int64: one event per op, with up to 5 sites
    sites: tuple[Optional[Site], ...] = ()

    @property
    def is_int64_aggregate(self) -> bool:
        return self.aggregated or self.dtype == "int64"

    @classmethod
    def from_fields(cls, f: EventFields) -> DemotionEvent:
        return cls(op=f.required_text("op"), dtype=f.text("dtype"), computed_as=f.text("computed_as"),
                   calls=f.integer("calls"), signatures=f.optional_integer("signatures"), site=site_field(f),
                   aggregated=bool(f.flag("aggregated")), sites=_aggregate_sites(f))


@dataclass(frozen=True)
class UnsupportedEvent:
    KIND: ClassVar[str] = "unsupported"
    feature: Optional[str] = None
    op: Optional[str] = None
    message: Optional[str] = None
    error: Optional[str] = None  # the Python exception type TorchNeuron raises
    action: Optional[str] = None  # raised | recorded
    count: int = 1
    site: Optional[Site] = None

    @classmethod
    def from_fields(cls, f: EventFields) -> UnsupportedEvent:
        return cls(feature=f.text("feature"), op=f.text("op"), message=f.text("message"), error=f.text("error"),
                   action=f.text("action"), count=f.integer("count", 1), site=site_field(f))


@dataclass(frozen=True)
class ExplicitOpsEvent:
    KIND: ClassVar[str] = "explicit_ops"
    counts: Mapping[str, int]

    @classmethod
    def from_fields(cls, f: EventFields) -> ExplicitOpsEvent:
        counts = f.mapping("counts") or {}
        if not all(is_integer(n) for n in counts.values()):
            raise MalformedEvent("counts: expected integers")
        return cls(counts=dict(counts))
