"""The first and last line of an events file: ``process`` (who wrote it, how it ended) and ``summary``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Optional

from neuron_port.check.events.fields import EventFields, Site, site_field


@dataclass(frozen=True)
class ExceptionInfo:
    """The uncaught exception of a process with ``status: "exception"``."""

    type: Optional[str]
    message: Optional[str]
    site: Optional[Site]  # the innermost user frame of the traceback
    time: Optional[float] = None  # epoch seconds when it reached sys.excepthook (which rank raised first)


@dataclass(frozen=True)
class ProcessEvent:
    KIND: ClassVar[str] = "process"
    schema: Optional[int] = None
    simulator: Optional[str] = None
    pid: Optional[int] = None
    rank: Optional[int] = None
    local_rank: Optional[int] = None
    world_size: Optional[int] = None
    argv: tuple[str, ...] = ()
    cwd: Optional[str] = None
    torch: Optional[str] = None
    torchneuron_release: Optional[Mapping[str, Any]] = None  # the op policy's release versions
    unsupported_mode: Optional[str] = None  # raise | record
    mode: str = "real"  # real | shape_only (every neuron tensor fake); absent (older simulators): real
    started: Optional[float] = None
    written: Optional[float] = None
    status: Optional[str] = None  # running | exited | exception | sigterm
    exception: Optional[ExceptionInfo] = None
    token: Optional[str] = None  # the run's NEURON_PORT_EVENTS_TOKEN (None: not set)
    forked_from: Optional[int] = None  # a forked child's records: its parent's pid (it writes no snapshot)

    @classmethod
    def from_fields(cls, f: EventFields) -> ProcessEvent:
        exc = f.nested("exception")
        return cls(
            schema=f.optional_integer("schema"), simulator=f.text("simulator"), pid=f.optional_integer("pid"),
            rank=f.optional_integer("rank"), local_rank=f.optional_integer("local_rank"),
            world_size=f.optional_integer("world_size"), argv=f.texts("argv"), cwd=f.text("cwd"),
            torch=f.text("torch"), torchneuron_release=f.mapping("torchneuron_release"),
            unsupported_mode=f.text("unsupported_mode"), mode=f.text("mode") or "real", started=f.number("started"),
            written=f.number("written"),
            status=f.text("status"), token=f.text("token"), forked_from=f.optional_integer("forked_from"),
            exception=None if exc is None else ExceptionInfo(exc.text("type"), exc.text("message"), site_field(exc),
                                                              exc.number("time")))


@dataclass(frozen=True)
class SummaryEvent:
    KIND: ClassVar[str] = "summary"
    op_calls: int = 0
    native_calls: int = 0
    fallback_calls: int = 0
    fallback_ops: int = 0
    eager_compiles: int = 0
    eager_cache_hits: int = 0
    complete: bool = False  # false: the snapshot was not written at exit, exception or SIGTERM
    optimizer_steps: Optional[int] = None  # the step clock at the end (None: a simulator without one)
    forwards: Optional[int] = None
    peak_allocated_bytes: Optional[int] = None  # on the simulated device (None: an older simulator)
    user_files: tuple[str, ...] = ()  # the user's files the process imported, under its working folder
    frameworks: tuple[str, ...] = ()  # imported frameworks without a Trainium accelerator ("lightning", ...)
    # torch.get_float32_matmul_precision() at the end: "highest", "high" (TF32 on a GPU), "medium"
    float32_matmul_precision: Optional[str] = None

    @classmethod
    def from_fields(cls, f: EventFields) -> SummaryEvent:
        return cls(op_calls=f.integer("op_calls"), native_calls=f.integer("native_calls"),
                   fallback_calls=f.integer("fallback_calls"), fallback_ops=f.integer("fallback_ops"),
                   eager_compiles=f.integer("eager_compiles"), eager_cache_hits=f.integer("eager_cache_hits"),
                   complete=bool(f.flag("complete")), optimizer_steps=f.optional_integer("optimizer_steps"),
                   forwards=f.optional_integer("forwards"),
                   peak_allocated_bytes=f.optional_integer("peak_allocated_bytes"),
                   user_files=f.texts("user_files"),
                   frameworks=f.texts("frameworks"),
                   float32_matmul_precision=f.text("float32_matmul_precision"))
