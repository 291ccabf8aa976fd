"""Events other simulator modules append through ``neuron_backend.events.record()``: ``compile``
(torch.compile(backend="neuron")), ``distributed`` (process groups, collectives, violated limits),
``neff_cache`` (hits and misses, once at exit) and ``shape_only`` (placeholders and size rules of a
shape-only run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, Union

from neuron_port.check.events.ops import FirstSeen, outside_calls
from neuron_port.check.events.fields import EventFields, MalformedEvent, Site, is_integer, site_field


@dataclass(frozen=True)
class FunctionRef:
    """The compiled function (or module ``forward``) of a compile event."""

    name: Optional[str] = None
    file: Optional[str] = None
    line: Optional[int] = None
    module: Optional[str] = None


@dataclass(frozen=True)
class CompileInput:
    name: Optional[str] = None
    shape: Optional[tuple[Union[int, str], ...]] = None  # symbolic sizes as strings
    dtype: Optional[str] = None
    device: Optional[str] = None
    parameter: Optional[bool] = None
    symbol: Optional[str] = None  # SymInt / SymFloat / SymBool inputs
    value: Optional[str] = None  # other inputs, as repr

    @classmethod
    def from_fields(cls, f: EventFields) -> CompileInput:
        shape = f.array("shape")
        if shape is not None and not all(is_integer(s) or isinstance(s, str) for s in shape):
            raise MalformedEvent(f"{f.where}shape: expected a list of integers and strings")
        return cls(name=f.text("name"), shape=None if shape is None else tuple(shape), dtype=f.text("dtype"),
                   device=f.text("device"), parameter=f.flag("parameter"), symbol=f.text("symbol"),
                   value=f.text("value"))


def _function(f: EventFields) -> Union[FunctionRef, str, None]:
    """An object for compiles; recompile-limit events may carry the function as text."""
    value = f.raw("function")
    if value is None or isinstance(value, str):
        return value
    ref = f.nested("function")  # anything but an object raises MalformedEvent
    assert ref is not None
    return FunctionRef(name=ref.text("name"), file=ref.text("file"), line=ref.optional_integer("line"),
                       module=ref.text("module"))


@dataclass(frozen=True)
class CompileEvent:
    KIND: ClassVar[str] = "compile"
    event: Optional[str] = None  # compile | recompile | recompile_limit
    backend: Optional[str] = None
    compile_id: Optional[str] = None  # Dynamo's "frame/attempt"
    function: Union[FunctionRef, str, None] = None
    inputs: Optional[tuple[CompileInput, ...]] = None
    reasons: tuple[str, ...] = ()  # Dynamo's guard failures
    reason: Optional[str] = None
    mode: Optional[str] = None
    status: Optional[str] = None  # compiled | failed | fallback | rejected
    error: Optional[str] = None
    message: Optional[str] = None
    graphs: tuple[Any, ...] = ()  # forward / backward graphs as the compile backend describes them
    limit_type: Any = None  # recompile_limit: as Dynamo logged them
    limit: Any = None
    site: Optional[Site] = None  # the call that triggered the compile
    time: Optional[float] = None

    @classmethod
    def from_fields(cls, f: EventFields) -> CompileEvent:
        inputs = None if f.array("inputs") is None else tuple(CompileInput.from_fields(i) for i in f.objects("inputs"))
        return cls(event=f.text("event"), backend=f.text("backend"), compile_id=f.text("compile_id"),
                   function=_function(f), inputs=inputs, reasons=f.texts("reasons"), reason=f.text("reason"),
                   mode=f.text("mode"), status=f.text("status"), error=f.text("error"), message=f.text("message"),
                   graphs=tuple(f.array("graphs") or ()), limit_type=f.raw("limit_type"), limit=f.raw("limit"),
                   site=site_field(f), time=f.number("time"))


@dataclass(frozen=True)
class DistributedEvent:
    KIND: ClassVar[str] = "distributed"
    event: Optional[str] = None  # process_group | collective | unsupported
    op: Optional[str] = None  # all_reduce, broadcast, ... (not for process_group)
    count: int = 1
    bytes: int = 0
    error: Optional[str] = None
    message: Optional[str] = None
    action: Optional[str] = None  # raised | recorded
    backend: Optional[str] = None
    group_rank: Optional[int] = None
    group_size: Optional[int] = None
    implementation: Optional[str] = None
    group: Optional[str] = None
    ranks: tuple[int, ...] = ()  # the group's ranks
    site: Optional[Site] = None
    time: Optional[float] = None

    @classmethod
    def from_fields(cls, f: EventFields) -> DistributedEvent:
        return cls(event=f.text("event"), op=f.text("op"), count=f.integer("count", 1), bytes=f.integer("bytes"),
                   error=f.text("error"), message=f.text("message"), action=f.text("action"),
                   backend=f.text("backend"), group_rank=f.optional_integer("group_rank"),
                   group_size=f.optional_integer("group_size"), implementation=f.text("implementation"),
                   group=f.text("group"), ranks=f.integers("ranks"), site=site_field(f), time=f.number("time"))


@dataclass(frozen=True)
class NeffCacheCounts:
    hits: int = 0
    misses: int = 0
    signatures: Optional[int] = None  # eager
    graphs: Optional[int] = None  # compiled

    @classmethod
    def from_fields(cls, f: Optional[EventFields]) -> Optional[NeffCacheCounts]:
        if f is None:
            return None
        return cls(hits=f.integer("hits"), misses=f.integer("misses"), signatures=f.optional_integer("signatures"),
                   graphs=f.optional_integer("graphs"))


@dataclass(frozen=True)
class NeffCacheEvent:
    KIND: ClassVar[str] = "neff_cache"
    dir: Optional[str] = None
    enabled: Optional[bool] = None
    eager: Optional[NeffCacheCounts] = None
    compiled: Optional[NeffCacheCounts] = None
    hits: int = 0
    misses: int = 0
    site: Optional[Site] = None  # null: written at exit
    time: Optional[float] = None

    @classmethod
    def from_fields(cls, f: EventFields) -> NeffCacheEvent:
        return cls(dir=f.text("dir"), enabled=f.flag("enabled"), eager=NeffCacheCounts.from_fields(f.nested("eager")),
                   compiled=NeffCacheCounts.from_fields(f.nested("compiled")), hits=f.integer("hits"),
                   misses=f.integer("misses"), site=site_field(f), time=f.number("time"))


@dataclass(frozen=True)
class GraphOp:
    op: str
    signature: tuple[Any, ...] = ()
    count: int = 1  # calls of this signature in one run of the graph
    module: Optional[str] = None  # an embedding lookup's module ("transformer.wte"), for the tokens per step
    site: Optional[Site] = None  # ... and its user line


@dataclass(frozen=True)
class GraphWorkEvent:
    """One torch.compile graph that ran: its ops (the cost model's compiled work) and its runs."""

    KIND: ClassVar[str] = "graph_work"
    graph: Optional[str] = None  # forward | backward | inference
    key: Optional[str] = None  # its NEFF cache key
    runs: int = 0
    ops: tuple[GraphOp, ...] = ()
    first_seen: Optional[FirstSeen] = None  # the step clock when it was compiled
    # the dataflow, one entry per call in graph order: [op index, output bytes, graph output, [[producer,
    # bytes], ...]] (neuron_backend/EVENTS.md; empty from an older simulator)
    flow: tuple[Any, ...] = ()
    # of ``runs``, those in phases that were not training steps, by kind (EVENTS.md "Phases")
    outside_runs: Optional[dict[str, int]] = field(default=None, compare=False)

    @classmethod
    def from_fields(cls, f: EventFields) -> GraphWorkEvent:
        ops = tuple(GraphOp(op=o.required_text("op"), signature=tuple(o.array("signature") or ()),
                            count=o.integer("count", 1), module=o.text("module"), site=site_field(o))
                    for o in f.objects("ops"))
        return cls(graph=f.text("graph"), key=f.text("key"), runs=f.integer("runs"), ops=ops,
                   first_seen=FirstSeen.from_fields(f.nested("first_seen")), flow=tuple(f.array("flow") or ()),
                   outside_runs=outside_calls(f, "outside_runs"))


ShapeOnlyValue = Union[bool, int, float, str, None]


def _shape(f: EventFields, name: str) -> Optional[tuple[Union[int, str], ...]]:
    shape = f.array(name)
    if shape is not None and not all(is_integer(s) or isinstance(s, str) for s in shape):
        raise MalformedEvent(f"{f.where}{name}: expected a list of integers and strings")
    return None if shape is None else tuple(shape)


@dataclass(frozen=True)
class ShapeOnlyEvent:
    """What a shape-only run did not compute, once per (event, op, site): a placeholder value the
    program read, or the size rule of an op whose output shape depends on values
    (neuron_backend/shape_only/values.py)."""

    KIND: ClassVar[str] = "shape_only"
    event: Optional[str] = None  # placeholder | size_rule
    op: Optional[str] = None
    value: ShapeOnlyValue = None  # placeholder: what the program got (0, 0.0, false; a complex one as text)
    shape: Optional[tuple[Union[int, str], ...]] = None  # placeholder of a copy: its shape; size_rule: used
    rule: Optional[str] = None  # size_rule: upper_bound | site (set by --size-rule) | even_split (a histogram, a topk)
    upper_bound: Optional[tuple[Union[int, str], ...]] = None  # size_rule: the shape at the upper bound
    site: Optional[Site] = None
    time: Optional[float] = None

    @classmethod
    def from_fields(cls, f: EventFields) -> ShapeOnlyEvent:
        value = f.raw("value")
        if value is not None and not isinstance(value, (bool, int, float, str)):
            raise MalformedEvent(f"{f.where}value: expected a number, true or false, got {type(value).__name__}")
        return cls(event=f.text("event"), op=f.text("op"), value=value, shape=_shape(f, "shape"),
                   rule=f.text("rule"), upper_bound=_shape(f, "upper_bound"), site=site_field(f),
                   time=f.number("time"))
