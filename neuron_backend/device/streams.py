"""Streams and events of ``torch.neuron`` (no-ops with CUDA-like semantics): the simulator executes
ops synchronously, so a stream is only an id the C++ device guard keeps and an event records host
time."""

from __future__ import annotations

import time
from typing import Any

import torch

from . import runtime
from .management import device as device_context
from .management import index


class Stream(torch.Stream):
    """A neuron stream. The simulator executes synchronously, so streams only keep CUDA-like semantics."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:
            return super().__new__(cls, **kwargs)
        with device_context(device):
            return super().__new__(cls, device=torch.device("neuron", runtime.C.current_device()), priority=priority)

    def wait_event(self, event) -> None:
        event.wait(self)

    def wait_stream(self, stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        if event is None:
            event = Event()
        event.record(self)
        return event


class Event:
    """A neuron event (CUDA-like). Records host time, so elapsed_time() measures wall time between
    two record() calls (the simulator executes ops synchronously)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self.blocking = blocking
        self.interprocess = interprocess
        self.device = torch.device("neuron", runtime.C.current_device())
        self._t: float | None = None

    def record(self, stream=None) -> None:
        self._t = time.perf_counter()

    def wait(self, stream=None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end_event: "Event") -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._t is None or end_event._t is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._t - self._t) * 1000.0

    def __repr__(self) -> str:
        return f"<torch.neuron.Event {id(self):#x} on {self.device}>"


def _as_stream(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device: Any = None) -> Stream:
    return _as_stream(torch.accelerator.current_stream(index(device)))


def default_stream(device: Any = None) -> Stream:
    return Stream(stream_id=0, device_index=index(device), device_type=_NEURON_DEVICE_TYPE)


_NEURON_DEVICE_TYPE = 20  # c10::DeviceType::PrivateUse1


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    def __init__(self, stream):
        self.stream = stream
        self.prev = None

    def __enter__(self):
        if self.stream is not None:
            self.prev = torch.accelerator.current_stream(self.stream.device_index)
            torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None and self.prev is not None:
            torch.accelerator.set_stream(self.prev)
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)
