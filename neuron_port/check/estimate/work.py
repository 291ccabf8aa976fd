"""The device-independent work of one steady-state step, from the simulator's events of every process.

Steps are the steady-state analysis's (aggregate/shapes.py): per process the optimizer clock when an
optimizer stepped, else the forward clock, else the whole run is one step. Calls are totals over the run;
only its calls in training steps count: the simulator tells apart (``outside_calls``, EVENTS.md "Phases")
those made in phases that were not training steps (setup, an evaluation, a generation: their work is
kept apart, per kind, in ``outside_phases``). A signature first seen at step ``k`` of ``S`` measured steps
contributes ``training calls / (S - min(k, W))`` per steady step (W: the warm-up steps): the calls after
warm-up over the steady steps when it first ran in the steady state, and its calls spread evenly over the
steps it ran in otherwise. From a simulator without ``outside_calls``, a signature first seen after the
last step (evaluation, generation after training) is outside the steps. Either way the calls outside
are counted in ``outside_steps_calls``. Without first sightings (truncated signatures, ops without a
NEFF) the calls are spread over all measured steps: total / S.

The tokens of a step can come from the same signatures: the index tensor of each embedding lookup
(``token_sources``, one per op and site), which ``section.resolve_tokens`` picks from by the user's spec.

One handler per event kind (``HANDLERS``) takes an event with the state of its process: each event
reaches ``flops.work`` once per signature it holds and comes back with all the step needs of it (family,
FLOPs, bytes, dtype, tokens).
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import replace
from typing import Any, Callable, Iterable, Optional

from neuron_port.check.aggregate.phases import phases_of
from neuron_port.check.aggregate.shapes import WARMUP_STEPS
from neuron_port.check.estimate.flops import Work, base_name, parse_tensor, tensor_list, work
from neuron_port.check.estimate.fusion import FUSIBLE, fused_bytes, kernels
from neuron_port.check.estimate.steady_compiles import steady_compiles_per_step
from neuron_port.check.estimate.stepwork import CollectiveWork, PhaseWork, StepWork, TokenSource, WorkItem
from neuron_port.check.events import (
    CompileEvent,
    DistributedEvent,
    EagerCompileEvent,
    EagerCompileTruncatedEvent,
    FallbackEvent,
    FirstSeen,
    GraphWorkEvent,
    OpEvent,
    ProcessEvents,
    SignatureCalls,
    Site,
)

__all__ = ["StepWork", "WorkItem", "TokenSource", "CollectiveWork", "per_step_calls", "site_name",
           "step_work"]

MAX_EAGER_SITES = 3  # the lines named as where a step's eager ops come from
NO_WORK = {family: Work(family, 0.0, 0.0, "fp32") for family in ("fallback", "copy/view", "other")}


def site_name(site: Optional[Site], cwd: Optional[str]) -> str:
    if site is None:
        return "(no user frame)"
    path = site.file
    if cwd and os.path.isabs(path) and path.startswith(cwd.rstrip(os.sep) + os.sep):
        path = os.path.relpath(path, cwd)
    return f"{path}:{site.line}"


def _clock(process: ProcessEvents) -> tuple[str, int]:
    summary = process.summary
    if summary is not None and summary.optimizer_steps:
        return "optimizer_step", summary.optimizer_steps
    if summary is not None and summary.forwards:
        return "forward", summary.forwards
    return "signature", 1


def _first_step(clock: str, seen: Optional[FirstSeen],
                tail: Optional[Callable[[FirstSeen], bool]] = None) -> Optional[int]:
    """The step a sighting belongs to. On the optimizer clock a sighting stamped ``k >= 1`` made before
    step ``k``'s first forward (``tail``) is the rest of step ``k - 1``: the clock moves when the first
    optimizer of a step finishes, so another optimizer's step, ``zero_grad`` and a scheduler run on the
    next step's number."""
    if seen is None or clock == "signature":
        return 0
    if clock != "optimizer_step":
        return max(seen.forward - 1, 0)
    if seen.optimizer_step >= 1 and tail is not None and tail(seen):
        return seen.optimizer_step - 1
    return seen.optimizer_step


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


class _Run:
    """The step's work as the handlers add it up, over every process of the run."""

    def __init__(self) -> None:
        self.out = StepWork()
        self.totals: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # (op, family, dtype, compiled, gemm)
        self.clocks: list[str] = []
        self.graphs: set[Any] = set()
        self.tokens: dict[tuple[str, str, Optional[str]], float] = defaultdict(float)
        self.optimizer: dict[str, dict[tuple, float]] = defaultdict(dict)  # op -> signature -> list bytes
        self.collectives: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
        self.phases: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # kind -> calls, flops, bytes
        self.eager_sites: dict[str, float] = defaultdict(float)  # "train.py:28 (`optimizer.step()`)" -> calls

    def optimizer_op(self, op: str, signature: Any) -> None:
        """An optimizer's (or clipping's) list op: its first list's bytes, once per distinct signature."""
        name = base_name(op)
        if signature and (name.startswith("_foreach_") or name.startswith("_fused_adam")
                          or name.startswith("_fused_sgd")):
            self.optimizer[name][tuple(signature)] = tensor_list(signature[0]).nbytes

    def add(self, op: str, w: Work, calls: float, compiled: bool = False) -> None:
        t = self.totals[(op, w.family, w.dtype, compiled, w.gemm)]
        t[0] += calls
        t[1] += calls * w.flops
        t[2] += calls * w.bytes

    def outside(self, process: _Process, first: Optional[int], calls: int,
                by_kind: Optional[dict[str, int]] = None, w: Optional[Work] = None, ops: int = 1) -> int:
        """The calls of a signature (the runs of a graph of ``ops`` op calls) outside the training steps:
        those the simulator counted outside (``by_kind``, their work kept per kind), else all of them when
        it was first seen after the last step. Returns its calls in training steps. A process that never
        stepped an optimizer (inference, generation alone) has no training steps to tell apart: its steps
        are its forwards (or the whole run), every call in them."""
        if by_kind and process.clock == "optimizer_step":
            outside = sum(by_kind.values())
            for kind, n in by_kind.items():
                t = self.phases[kind]
                t[0] += n * ops
                t[1] += n * (w.flops if w else 0.0)
                t[2] += n * (w.bytes if w else 0.0)
            self.out.outside_steps_calls += outside * ops
            return max(calls - outside, 0)
        if first is not None and first >= process.measured and process.clock != "signature":
            self.out.outside_steps_calls += calls
        return calls

    def finish(self) -> StepWork:
        out = self.out
        out.clock = self.clocks[0] if self.clocks else "signature"
        out.graphs = len(self.graphs)
        out.items = [WorkItem(op, family, dtype, calls, flops, nbytes, compiled, gemm)
                     for (op, family, dtype, compiled, gemm), (calls, flops, nbytes)
                     in sorted(self.totals.items(), key=lambda kv: (kv[0][:4], kv[0][4] or ()))
                     if calls > 0]
        out.token_sources = [TokenSource(op, site, module, n) for (op, site, module), n
                             in sorted(self.tokens.items(), key=lambda kv: (-kv[1], kv[0][1:]))]
        out.parameter_bytes = max((sum(sigs.values()) for sigs in self.optimizer.values()), default=0.0)
        ranks = max(out.processes, 1)
        out.collectives = [CollectiveWork(op, size, calls / ranks, nbytes / ranks) for (op, size), (calls, nbytes)
                           in sorted(self.collectives.items()) if calls > 0]
        out.outside_phases = [PhaseWork(kind, *totals) for kind, totals in sorted(self.phases.items())]
        top = sorted(self.eager_sites.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_EAGER_SITES]
        out.eager_sites = [(site, calls / max(out.processes, 1)) for site, calls in top if calls > 0]
        return out


class _Process:
    """One process's step clock, its eager NEFFs and the work of its signatures per op (for the truncated
    ones)."""

    def __init__(self, process: ProcessEvents) -> None:
        self.clock, self.measured = _clock(process)
        self.cwd = process.process.cwd if process.process is not None else None
        self.mean_work: dict[str, list[Work]] = defaultdict(list)
        self.native = 0
        summary = process.summary
        self.forwards = (summary.forwards or 0) if summary is not None else 0
        # the forward clock tells a step's tail only when every outermost call was a training step's
        self.tails = self.clock == "optimizer_step" and not any(
            p.kind in ("evaluation", "generation") for p in phases_of(process).phases.values())

    def first_step(self, seen: Optional[FirstSeen]) -> Optional[int]:
        return _first_step(self.clock, seen, self.in_tail)

    def in_tail(self, seen: FirstSeen) -> bool:
        """Whether a sighting stamped optimizer step ``k`` came before step ``k``'s first forward: the step
        its forward count falls in, at the run's forwards per step, is ``k - 1``. Without a forward clock
        (the whole model compiled: no module hook runs) a step's eager ops are its optimizers', its loss'
        and its inputs' copies, all seen in the first step: a later first sighting is the rest of a step.
        Not told apart: a process with evaluations or generations (their forwards are on the same clock),
        and a sighting at the last step's number after more than one step (an op of every step's tail
        was seen at step 1: this one ran after training, a final read or a save)."""
        if not self.tails or self.measured <= 0 or (seen.optimizer_step >= self.measured > 1):
            return False
        if self.forwards <= 0:
            return seen.forward <= 0
        if self.forwards < self.measured or seen.forward <= 0:
            return False
        step_of_forward = -(-seen.forward * self.measured // self.forwards) - 1
        return step_of_forward == seen.optimizer_step - 1


def _eager_compile(run: _Run, process: _Process, event: EagerCompileEvent) -> None:
    """An eager NEFF signature: its calls per step at its work, and its tokens when it is a lookup."""
    w = work(event.op, event.signature)
    run.optimizer_op(event.op, event.signature)
    process.mean_work[event.op].append(w)
    process.native += 1
    first = process.first_step(event.first_seen)
    training = run.outside(process, first, event.calls, event.outside_calls, w)
    calls = per_step_calls(training, first, process.measured)
    run.add(event.op, w, calls)
    code = f" (`{event.site.code.strip()}`)" if event.site is not None and event.site.code.strip() else ""
    run.eager_sites[site_name(event.site, process.cwd) + code] += calls
    if w.tokens is not None and calls > 0:
        module = event.site.module if event.site is not None else None
        run.tokens[(event.op, site_name(event.site, process.cwd), module)] += calls * w.tokens


def _eager_compile_truncated(run: _Run, process: _Process, event: EagerCompileTruncatedEvent) -> None:
    """Signatures beyond the ones written: their calls at the mean work of the shown signatures."""
    process.native += event.omitted_signatures
    shown = process.mean_work.get(event.op) or [NO_WORK["other"]]
    for w in shown:
        run.add(event.op, w, event.omitted_calls / len(shown) / process.measured)


def _signature_per_step(run: _Run, process: _Process, sig: SignatureCalls, counted: Work) -> float:
    """A written signature's calls in a mean training step (its calls outside the steps kept apart)."""
    first = process.first_step(sig.first_seen) if sig.first_seen is not None else None
    return per_step_calls(run.outside(process, first, sig.calls, sig.outside_calls, counted), first, process.measured)


def _fallback(run: _Run, process: _Process, event: FallbackEvent) -> None:
    """A fallback op's per-step calls, host time (its measured time per call) and copy bytes (its tensors
    to the host and its result back, from its signatures)."""
    out, measured = run.out, process.measured
    shown = sum(s.calls for s in event.signatures)
    calls = max(event.calls - shown, 0) / measured  # signatures beyond the ones written: total / steps
    copy_bytes = flops = 0.0
    for sig in event.signatures:
        counted = work(event.op, sig.signature)
        n = _signature_per_step(run, process, sig, counted)
        calls += n
        copy_bytes += n * counted.bytes
        flops += n * counted.flops
    out.fallback_calls += calls
    out.fallback_copy_bytes += copy_bytes
    out.fallback_flops += flops
    if event.host_seconds is None:  # nothing ran on the host (shape-only): model.py models its time
        out.fallback_modeled_flops += flops
        out.fallback_modeled_bytes += copy_bytes
    if event.host_seconds is not None and event.calls:
        out.fallback_host_seconds = (out.fallback_host_seconds or 0.0) + event.host_seconds / event.calls * calls
    run.add(event.op, NO_WORK["fallback"], calls)


def _op(run: _Run, process: _Process, event: OpEvent) -> None:
    """Views, copies, allocation (``native_no_neff``): dispatched natively, no NEFF. A copy's most-called
    signatures carry its tensors: their calls at the bytes they move (a cast, ``clone``, ``copy_``); the
    rest (views and allocation record no shapes, signatures beyond the written ones, host transfers)
    move none through device memory."""
    if event.policy != "native_no_neff":
        return
    rest = event.calls
    rest_outside = dict(event.outside_calls or {})
    for sig in event.signatures:
        to_or_from_host = any(t.on_cpu for t in map(parse_tensor, sig.signature) if t is not None)
        # a host transfer is the input pipeline's, not device-memory traffic
        counted = NO_WORK["copy/view"] if to_or_from_host else work(event.op, sig.signature)
        run.add(event.op, counted, _signature_per_step(run, process, sig, counted))
        rest -= sig.calls
        for kind, n in (sig.outside_calls or {}).items():
            rest_outside[kind] = rest_outside.get(kind, 0) - n
    if rest > 0:
        by_kind = {kind: n for kind, n in rest_outside.items() if n > 0} or None
        training = run.outside(process, None, rest, by_kind, NO_WORK["copy/view"])
        run.add(event.op, NO_WORK["copy/view"], training / process.measured)


def _graph_work(run: _Run, process: _Process, event: GraphWorkEvent) -> None:
    """The ops inside a torch.compile graph, per run of the graph: no dispatch each."""
    works = [work(graph_op.op, graph_op.signature) for graph_op in event.ops]
    first = process.first_step(event.first_seen)
    graph = Work("graph", sum(w.flops * g.count for w, g in zip(works, event.ops)),
                 sum(w.bytes * g.count for w, g in zip(works, event.ops)), "fp32")  # one run, unfused
    ops = sum(g.count for g in event.ops)
    runs = per_step_calls(run.outside(process, first, event.runs, event.outside_runs, graph, ops), first,
                          process.measured)
    fused = fused_bytes(works, event.flow) if event.flow else {}  # fusion.py: bytes per run under fusion
    run.out.graph_runs += runs
    run.out.graph_kernels += runs * kernels(works, event.flow, [g.count for g in event.ops])
    for i, (graph_op, w) in enumerate(zip(event.ops, works)):
        run.optimizer_op(graph_op.op, graph_op.signature)
        if i in fused and w.family in FUSIBLE:  # per call: the op's share of its regions' traffic
            w = replace(w, bytes=fused[i] / max(graph_op.count, 1))
        run.add(graph_op.op, w, runs * graph_op.count, compiled=True)
        if w.tokens is not None and runs > 0:  # a lookup inside the graph: its indices are the step's tokens
            module = graph_op.module or (graph_op.site.module if graph_op.site is not None else None)
            where = (graph_op.op, site_name(graph_op.site, process.cwd), module)
            run.tokens[where] += runs * graph_op.count * w.tokens


def _distributed(run: _Run, process: _Process, event: DistributedEvent) -> None:
    """A collective's calls and bytes per step (spread over the measured steps), and the job's size."""
    if event.group_size:
        run.out.world_size = max(run.out.world_size, event.group_size)
    if event.event != "collective" or not event.op or not event.group_size or event.group_size < 2:
        return
    t = run.collectives[(event.op, event.group_size)]
    t[0] += event.count / process.measured  # summed over processes; finish() takes the mean rank
    t[1] += event.bytes / process.measured


def _compile(run: _Run, process: _Process, event: CompileEvent) -> None:
    """The distinct graphs torch.compile compiled (each one a NEFF to compile on a cold cache)."""
    if event.status == "compiled":
        for graph in event.graphs:
            run.graphs.add(graph.get("key") if isinstance(graph, dict) else repr(graph))


# The event kinds the step's work comes from; the others do not count.
HANDLERS: dict[type, Callable[[_Run, _Process, Any], None]] = {
    EagerCompileEvent: _eager_compile,
    EagerCompileTruncatedEvent: _eager_compile_truncated,
    FallbackEvent: _fallback,
    OpEvent: _op,
    GraphWorkEvent: _graph_work,
    CompileEvent: _compile,
    DistributedEvent: _distributed,
}


def step_work(processes: Iterable[ProcessEvents]) -> StepWork:
    """The work of one mean steady step, summed over ``processes`` (module docstring)."""
    run = _Run()
    for recorded in processes:
        run.out.processes += 1
        process = _Process(recorded)
        run.clocks.append(process.clock)
        run.out.measured = max(run.out.measured, process.measured)
        for event in recorded.events:
            handler = HANDLERS.get(type(event))
            if handler is not None:
                handler(run, process, event)
        run.out.eager_neffs = max(run.out.eager_neffs, process.native)
        run.out.steady_compiles = max(run.out.steady_compiles, steady_compiles_per_step(recorded))  # one cache
        precision = getattr(recorded.summary, "float32_matmul_precision", None) if recorded.summary else None
        if run.out.float32_matmul_precision is None:
            run.out.float32_matmul_precision = precision
        peak = getattr(recorded.summary, "peak_allocated_bytes", None) if recorded.summary else None
        if peak is not None:
            run.out.peak_bytes = max(run.out.peak_bytes or 0, peak)
    return run.finish()
