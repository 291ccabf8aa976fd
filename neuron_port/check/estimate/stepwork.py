"""The work of one steady-state step as the report keeps it (``estimate.work``): one item per op, family,
dtype and compiled-or-not, the embedding lookups tokens can be counted from, the collectives of a rank, and
the counts the compile time, the memory and the lower bound need. ``work.py`` adds them up from a run's
events; ``estimate REPORT.json`` reads them back (``StepWork.from_json``) and recomputes from them alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from neuron_port.check.aggregate.shapes import WARMUP_STEPS
from neuron_port.check.estimate import saved


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
    gemm: Optional[tuple[int, int, int, int]] = None  # a matmul's (batch, M, N, K) (flops.Work.gemm)

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "family": self.family, "dtype": self.dtype, "calls": self.calls,
                "flops": self.flops, "bytes": self.bytes, "compiled": self.compiled,
                **({"gemm": list(self.gemm)} if self.gemm else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "work") -> WorkItem:
        return cls(op=str(data["op"]), family=str(data["family"]), dtype=str(data["dtype"]),
                   calls=saved.amount(data, "calls", where), flops=saved.amount(data, "flops", where),
                   bytes=saved.amount(data, "bytes", where), compiled=bool(data.get("compiled", False)),
                   gemm=saved.counts(data, "gemm", where))  # type: ignore[arg-type]


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
    def from_json(cls, data: dict[str, Any], where: str = "token_sources") -> TokenSource:
        module = data.get("module")
        return cls(op=str(data["op"]), site=str(data["site"]), module=None if module is None else str(module),
                   per_step=saved.amount(data, "per_step", where))


@dataclass(frozen=True)
class CollectiveWork:
    """One collective of one rank in a mean step: its calls and the bytes of its counted argument (all
    reduce, broadcast: the tensor; all-gather: the shard it sends; reduce-scatter, all-to-all: the whole
    input), in a group of ``group_size`` ranks."""

    op: str
    group_size: int
    calls: float
    bytes: float

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "group_size": self.group_size, "calls": self.calls, "bytes": self.bytes}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "collectives") -> CollectiveWork:
        return cls(op=str(data["op"]), group_size=saved.count(data, "group_size", where, least=1),
                   calls=saved.amount(data, "calls", where), bytes=saved.amount(data, "bytes", where))


@dataclass(frozen=True)
class PhaseWork:
    """The work of the run outside its training steps, of one kind of phase (``setup``, ``evaluation``,
    ``generation``: aggregate/phases.py), over the whole run and all processes: not part of a step."""

    kind: str
    calls: float
    flops: float
    bytes: float

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "calls": self.calls, "flops": self.flops, "bytes": self.bytes}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "outside_phases") -> PhaseWork:
        return cls(kind=str(data["kind"]), calls=saved.amount(data, "calls", where),
                   flops=saved.amount(data, "flops", where), bytes=saved.amount(data, "bytes", where))


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
    # per step, of fallback ops whose host time was not measured (a shape-only run): modelled instead
    fallback_modeled_flops: float = 0.0
    fallback_modeled_bytes: float = 0.0
    fallback_flops: float = 0.0  # per step, of every fallback op: a GPU runs them on the device
    outside_steps_calls: int = 0
    eager_neffs: int = 0  # distinct native signatures (the most of any process: ranks share a cache)
    graphs: int = 0  # distinct torch.compile graphs compiled
    # compiled graph calls in a mean steady step and the kernels they launch under fusion (fusion.kernels),
    # over all processes: the per-graph and per-launch costs (model.launch_costs)
    graph_runs: float = 0.0
    graph_kernels: float = 0.0
    # eager NEFF compiles in a mean steady step: signatures that keep changing (steady_compiles.py)
    steady_compiles: float = 0.0
    eager_sites: list[tuple[str, float]] = field(default_factory=list)  # the lines of the most eager calls
    peak_bytes: Optional[int] = None  # on the simulated device, the most of any process
    token_sources: list[TokenSource] = field(default_factory=list)  # most tokens first
    # the optimizer's parameter list (bytes, at their dtype): the most of any optimizer op, over its
    # distinct signatures (param groups); 0 when no optimizer op ran. The lower bound's unavoidable bytes
    parameter_bytes: float = 0.0
    float32_matmul_precision: Optional[str] = None  # torch's setting at the end of the first process
    world_size: int = 0  # ranks of the job (a fake world: more than the processes that ran); 0: one per process
    collectives: list[CollectiveWork] = field(default_factory=list)  # per step, per rank
    # the run's work in phases that were not training steps (evaluation, generation, setup), by kind;
    # empty for a simulator before ``outside_calls`` (its calls are then attributed by first sighting)
    outside_phases: list[PhaseWork] = field(default_factory=list)

    @property
    def steady(self) -> int:
        return max(self.measured - self.warmup, 0)

    def to_json(self) -> dict[str, Any]:
        return {"clock": self.clock, "measured": self.measured, "warmup": self.warmup, "processes": self.processes,
                "work": [i.to_json() for i in self.items], "fallback_calls": self.fallback_calls,
                "fallback_host_seconds": self.fallback_host_seconds, "fallback_copy_bytes": self.fallback_copy_bytes,
                "fallback_modeled_flops": self.fallback_modeled_flops,
                "fallback_modeled_bytes": self.fallback_modeled_bytes, "fallback_flops": self.fallback_flops,
                "outside_steps_calls": self.outside_steps_calls, "eager_neffs": self.eager_neffs,
                "graphs": self.graphs, "graph_runs": self.graph_runs, "graph_kernels": self.graph_kernels,
                "peak_bytes": self.peak_bytes, "steady_compiles": self.steady_compiles,
                "eager_sites": [{"site": site, "calls": calls} for site, calls in self.eager_sites],
                "token_sources": [t.to_json() for t in self.token_sources],
                "parameter_bytes": self.parameter_bytes, "float32_matmul_precision": self.float32_matmul_precision,
                "world_size": self.world_size, "collectives": [c.to_json() for c in self.collectives],
                "outside_phases": [o.to_json() for o in self.outside_phases]}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "estimate.work") -> StepWork:
        """The work a saved report kept; ``saved.DamagedSection`` names the key of a value the cost model
        cannot take (NaN, Infinity, a negative count, an integer beyond int64)."""
        amount, count = saved.amount, saved.count
        return cls(clock=str(data["clock"]), measured=count(data, "measured", where),
                   warmup=count(data, "warmup", where), processes=count(data, "processes", where),
                   items=[WorkItem.from_json(w, at) for at, w in saved.objects(data, "work", where, required=True)],
                   fallback_calls=amount(data, "fallback_calls", where),
                   fallback_host_seconds=amount(data, "fallback_host_seconds", where, None),
                   fallback_copy_bytes=amount(data, "fallback_copy_bytes", where, 0.0),
                   fallback_modeled_flops=amount(data, "fallback_modeled_flops", where, 0.0),
                   fallback_modeled_bytes=amount(data, "fallback_modeled_bytes", where, 0.0),
                   fallback_flops=amount(data, "fallback_flops", where, 0.0),
                   outside_steps_calls=count(data, "outside_steps_calls", where, 0),
                   eager_neffs=count(data, "eager_neffs", where), graphs=count(data, "graphs", where),
                   graph_runs=amount(data, "graph_runs", where, 0.0),
                   graph_kernels=amount(data, "graph_kernels", where, 0.0),
                   steady_compiles=amount(data, "steady_compiles", where, 0.0),
                   eager_sites=[(saved.text(s, "site", at, ""), amount(s, "calls", at, 0.0))
                                for at, s in saved.objects(data, "eager_sites", where)],
                   peak_bytes=count(data, "peak_bytes", where, None),
                   token_sources=[TokenSource.from_json(t, at)
                                  for at, t in saved.objects(data, "token_sources", where)],
                   parameter_bytes=amount(data, "parameter_bytes", where, 0.0),
                   float32_matmul_precision=saved.text(data, "float32_matmul_precision", where, None),
                   world_size=count(data, "world_size", where, 0),
                   collectives=[CollectiveWork.from_json(c, at) for at, c in saved.objects(data, "collectives", where)],
                   outside_phases=[PhaseWork.from_json(o, at)
                                   for at, o in saved.objects(data, "outside_phases", where)])

    @property
    def world(self) -> int:
        """Ranks of the job: the fake world's size, else the processes that ran."""
        return max(self.world_size, self.processes, 1)
