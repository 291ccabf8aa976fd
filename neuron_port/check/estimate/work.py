"""The device-independent work of one steady-state step, from the simulator's events of every process.

Steps are the steady-state analysis's (aggregate/shapes.py): per process the optimizer clock when an
optimizer stepped, else the forward clock, else the whole run is one step. Calls are totals over the run;
a signature first seen at step ``k`` of ``S`` measured steps contributes ``calls / (S - min(k, W))`` per
steady step (W: the warm-up steps): the calls after warm-up over the steady steps when it first ran in
the steady state, and its calls spread evenly over the steps it ran in otherwise. A signature first
seen after the last step (evaluation, generation after training) is outside the steps: it is counted in
``outside_steps_calls``, not in the step. Without first sightings (fallbacks, truncated signatures, ops
without a NEFF) the calls are spread over all measured steps: total / S.

The tokens of a step can come from the same signatures: the index tensor of each embedding lookup
(``token_sources``, one per op and site), which ``resolve_tokens`` picks from by the user's spec.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from neuron_port.check.aggregate.shapes import WARMUP_STEPS
from neuron_port.check.estimate.flops import Work, base_name, parse_tensor, work
from neuron_port.check.events import (
    CompileEvent,
    EagerCompileEvent,
    EagerCompileTruncatedEvent,
    FallbackEvent,
    FirstSeen,
    GraphWorkEvent,
    OpEvent,
    ProcessEvents,
    Site,
)

TOKEN_OPS = {"embedding", "embedding_bag", "_embedding_bag"}  # argument 1: the indices, one per token
INTEGER_DTYPES = {"i64", "i32", "i16", "i8", "u8"}


@dataclass(frozen=True)
class WorkItem:
    """Signatures of one (op, family, dtype, compiled) with their per-call work, summed per step."""

    op: str
    family: str
    dtype: str
    calls: float  # per step, over all processes
    flops: float  # per step
    bytes: float  # per step
    compiled: bool = False  # ran inside a torch.compile graph: no per-op dispatch

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "family": self.family, "dtype": self.dtype, "calls": self.calls,
                "flops": self.flops, "bytes": self.bytes, "compiled": self.compiled}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkItem:
        return cls(op=str(data["op"]), family=str(data["family"]), dtype=str(data["dtype"]),
                   calls=float(data["calls"]), flops=float(data["flops"]), bytes=float(data["bytes"]),
                   compiled=bool(data.get("compiled", False)))


@dataclass(frozen=True)
class TokenSource:
    """An embedding lookup's site and the indices it looks up in a mean steady step, over all processes."""

    op: str
    site: str  # "model.py:115": the path relative to the process's working directory when under it
    module: Optional[str]  # "transformer.wte": the module whose forward looked up (one line may hold several)
    per_step: float

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "site": self.site, "module": self.module, "per_step": self.per_step}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenSource:
        module = data.get("module")
        return cls(op=str(data["op"]), site=str(data["site"]), module=None if module is None else str(module),
                   per_step=float(data["per_step"]))


@dataclass
class StepWork:
    """What ``estimate`` needs, kept in the report so it can be recomputed without re-running."""

    clock: str = "signature"  # optimizer_step | forward | signature (mixed processes: the first one's)
    measured: int = 0
    warmup: int = WARMUP_STEPS
    processes: int = 0
    items: list[WorkItem] = field(default_factory=list)
    fallback_calls: float = 0.0
    fallback_host_seconds: Optional[float] = None  # per step; None: the simulator did not measure it
    fallback_copy_bytes: float = 0.0
    outside_steps_calls: int = 0
    eager_neffs: int = 0  # distinct native signatures (the most of any process: ranks share a cache)
    graphs: int = 0  # distinct torch.compile graphs compiled
    peak_bytes: Optional[int] = None  # on the simulated device, the most of any process
    token_sources: list[TokenSource] = field(default_factory=list)  # most tokens first

    @property
    def steady(self) -> int:
        return max(self.measured - self.warmup, 0)

    def to_json(self) -> dict[str, Any]:
        return {"clock": self.clock, "measured": self.measured, "warmup": self.warmup, "processes": self.processes,
                "work": [i.to_json() for i in self.items], "fallback_calls": self.fallback_calls,
                "fallback_host_seconds": self.fallback_host_seconds, "fallback_copy_bytes": self.fallback_copy_bytes,
                "outside_steps_calls": self.outside_steps_calls, "eager_neffs": self.eager_neffs,
                "graphs": self.graphs, "peak_bytes": self.peak_bytes,
                "token_sources": [t.to_json() for t in self.token_sources]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepWork:
        host = data.get("fallback_host_seconds")
        peak = data.get("peak_bytes")
        return cls(clock=str(data["clock"]), measured=int(data["measured"]), warmup=int(data["warmup"]),
                   processes=int(data["processes"]), items=[WorkItem.from_json(w) for w in data["work"]],
                   fallback_calls=float(data["fallback_calls"]),
                   fallback_host_seconds=None if host is None else float(host),
                   fallback_copy_bytes=float(data.get("fallback_copy_bytes", 0.0)),
                   outside_steps_calls=int(data.get("outside_steps_calls", 0)),
                   eager_neffs=int(data["eager_neffs"]), graphs=int(data["graphs"]),
                   peak_bytes=None if peak is None else int(peak),
                   token_sources=[TokenSource.from_json(t) for t in data.get("token_sources", [])])


def site_name(site: Optional[Site], cwd: Optional[str]) -> str:
    if site is None:
        return "(no user frame)"
    path = site.file
    if cwd and os.path.isabs(path) and path.startswith(cwd.rstrip(os.sep) + os.sep):
        path = os.path.relpath(path, cwd)
    return f"{path}:{site.line}"


def token_count(op: str, signature: tuple[Any, ...]) -> Optional[int]:
    """The indices one call of an embedding lookup reads (None: not a lookup, or no integer index tensor)."""
    if base_name(op) not in TOKEN_OPS or len(signature) < 2:
        return None
    indices = parse_tensor(signature[1])
    return indices.numel if indices is not None and indices.dtype in INTEGER_DTYPES else None


def _clock(process: ProcessEvents) -> tuple[str, int]:
    summary = process.summary
    if summary is not None and summary.optimizer_steps:
        return "optimizer_step", summary.optimizer_steps
    if summary is not None and summary.forwards:
        return "forward", summary.forwards
    return "signature", 1


def _first_step(clock: str, seen: Optional[FirstSeen]) -> Optional[int]:
    if seen is None or clock == "signature":
        return 0
    return seen.optimizer_step if clock == "optimizer_step" else max(seen.forward - 1, 0)


def per_step_calls(calls: int, first_step: Optional[int], measured: int, warmup: int = WARMUP_STEPS) -> float:
    """The calls of one signature in a mean steady step (module docstring); 0 when outside the steps."""
    if measured <= 0:
        return 0.0
    if first_step is None:
        return calls / measured
    if first_step >= measured:
        return 0.0
    if measured <= warmup:  # no steady step: the mean over the measured ones
        return calls / measured
    return calls / (measured - min(first_step, warmup))


def _fallback(out: StepWork, event: FallbackEvent, clock: str, measured: int) -> float:
    """Adds a fallback op's per-step calls, host time (its measured time per call) and copy bytes (its
    tensors to the host and its result back, from its signatures); returns the per-step calls."""
    shown = sum(s.calls for s in event.signatures)
    calls = max(event.calls - shown, 0) / measured  # signatures beyond the ones written: total / steps
    copy_bytes = 0.0
    for sig in event.signatures:
        first = _first_step(clock, sig.first_seen) if sig.first_seen is not None else None
        if first is not None and first >= measured and clock != "signature":
            out.outside_steps_calls += sig.calls
        n = per_step_calls(sig.calls, first, measured)
        calls += n
        copy_bytes += n * work(event.op, sig.signature).bytes
    out.fallback_calls += calls
    out.fallback_copy_bytes += copy_bytes
    if event.host_seconds is not None and event.calls:
        out.fallback_host_seconds = (out.fallback_host_seconds or 0.0) + event.host_seconds / event.calls * calls
    return calls


def step_work(processes: Iterable[ProcessEvents]) -> StepWork:
    out = StepWork()
    totals: dict[tuple[str, str, str, bool], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    clocks = []
    graphs: set[Any] = set()
    tokens: dict[tuple[str, str, Optional[str]], float] = defaultdict(float)

    def add(op: str, w: Work, calls: float, compiled: bool = False) -> None:
        t = totals[(op, w.family, w.dtype, compiled)]
        t[0] += calls
        t[1] += calls * w.flops
        t[2] += calls * w.bytes

    for process in processes:
        out.processes += 1
        clock, measured = _clock(process)
        clocks.append(clock)
        out.measured = max(out.measured, measured)
        mean_work: dict[str, list[Work]] = defaultdict(list)
        signature_calls: dict[str, int] = defaultdict(int)
        native = 0
        for event in process.events:
            if isinstance(event, EagerCompileEvent):
                w = work(event.op, event.signature)
                mean_work[event.op].append(w)
                signature_calls[event.op] += event.calls
                native += 1
                first = _first_step(clock, event.first_seen)
                if first is not None and first >= measured and clock != "signature":
                    out.outside_steps_calls += event.calls
                calls = per_step_calls(event.calls, first, measured)
                add(event.op, w, calls)
                count = token_count(event.op, event.signature)
                if count is not None and calls > 0:
                    cwd = process.process.cwd if process.process is not None else None
                    module = event.site.module if event.site is not None else None
                    tokens[(event.op, site_name(event.site, cwd), module)] += calls * count
            elif isinstance(event, EagerCompileTruncatedEvent):
                native += event.omitted_signatures
                shown = mean_work.get(event.op) or [Work("other", 0.0, 0.0, "fp32")]
                for w in shown:  # the omitted calls at the mean work of the shown signatures
                    add(event.op, w, event.omitted_calls / len(shown) / measured)
            elif isinstance(event, FallbackEvent):
                calls = _fallback(out, event, clock, measured)
                add(event.op, Work("fallback", 0.0, 0.0, "fp32"), calls)
            elif isinstance(event, OpEvent) and event.policy == "native_no_neff":
                # views, copies, allocation: dispatched, shapes not recorded (no signature lines)
                add(event.op, Work("copy/view", 0.0, 0.0, "fp32"), event.calls / measured)
            elif isinstance(event, GraphWorkEvent):  # ops inside a torch.compile graph: no dispatch each
                runs = per_step_calls(event.runs, _first_step(clock, event.first_seen), measured)
                for graph_op in event.ops:
                    add(graph_op.op, work(graph_op.op, graph_op.signature), runs * graph_op.count, compiled=True)
            elif isinstance(event, CompileEvent) and event.status == "compiled":
                for graph in event.graphs:
                    graphs.add(graph.get("key") if isinstance(graph, dict) else repr(graph))
        out.eager_neffs = max(out.eager_neffs, native)
        peak = getattr(process.summary, "peak_allocated_bytes", None) if process.summary else None
        if peak is not None:
            out.peak_bytes = max(out.peak_bytes or 0, peak)
    out.clock = clocks[0] if clocks else "signature"
    out.graphs = len(graphs)
    out.items = [WorkItem(op, family, dtype, calls, flops, nbytes, compiled)
                 for (op, family, dtype, compiled), (calls, flops, nbytes) in sorted(totals.items()) if calls > 0]
    out.token_sources = [TokenSource(op, site, module, n)
                         for (op, site, module), n in sorted(tokens.items(), key=lambda kv: (-kv[1], kv[0][1:]))]
    return out


class TokensError(ValueError):
    """A tokens-per-step spec that names not exactly one embedding lookup of the run."""


def _matches(source: TokenSource, where: str) -> bool:
    """``where`` (after the ``@`` of a spec): FILE:LINE, FILE the end of the site's path, or a module
    path, the end of the source's module."""
    file, sep, line = where.rpartition(":")
    if sep and line.isdigit():
        path, _, site_line = source.site.rpartition(":")
        return site_line == line and (path == file or path.endswith("/" + file.lstrip("/")))
    module = source.module or ""
    return module == where or module.endswith("." + where)


def source_spec(source: TokenSource, sources: list[TokenSource]) -> str:
    """The shortest spec that picks ``source`` alone among ``sources``: by its site, else by its module."""
    kind = base_name(source.op)
    for where in (source.site, source.module):
        if where and sum(_matches(s, where) for s in sources) == 1:
            return f"{kind}@{where}"
    return f"{kind}@{source.site}"


def resolve_tokens(spec: str, sources: list[TokenSource]) -> TokenSource:
    """The token source ``spec`` (``embedding``, ``embedding@FILE:LINE`` or ``embedding@MODULE``) names;
    TokensError listing every candidate with its tokens per step unless it names exactly one."""
    _, _, where = spec.partition("@")
    matches = [s for s in sources if not where or _matches(s, where)]
    if len(matches) == 1:
        return matches[0]
    if not sources:
        raise TokensError(f"tokens-per-step {spec}: the run looked up no embedding (aten::embedding with "
                         "integer indices) in its steps; give the tokens per step as a number")
    if matches:
        problem = f"{len(matches)} embedding lookups match" if where else f"{len(matches)} embedding lookups"
    else:
        problem = "no embedding lookup matches"
    listed = "\n".join(f"  {source_spec(s, sources):<40} {s.per_step:>12,.0f} tokens per step  ({s.op} at "
                       f"{s.site}{f' in {s.module}' if s.module else ''})" for s in sources)
    raise TokensError(f"tokens-per-step {spec}: {problem}; pick one:\n{listed}")
