"""What ``neuron_port/check/runtime.py`` asks of an aggregator: the event kinds it takes, the keys of the
report's ``runtime`` section it fills, and its NP9xx findings. runtime.py builds its handler table, the
section and the order of the findings from its one list of aggregators; a new event kind with a new
finding is one new aggregator module and its place in that list."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Mapping, Optional

from neuron_port.check.events import SummaryEvent
from neuron_port.check.sites import SiteMapper
from neuron_port.results import Finding


class Aggregator(ABC):
    """Takes the events of ``EVENTS`` (event class -> the name of the method that takes ``(event, rank)``),
    merged over processes, and fills the ``SECTION`` keys of the runtime section (``section()``: their
    values in that order, each with a ``to_json()`` or a tuple of such entries)."""

    EVENTS: ClassVar[Mapping[type, str]] = {}
    SECTION: ClassVar[tuple[str, ...]] = ()

    def __init__(self, mapper: Optional[SiteMapper] = None) -> None:
        self.mapper = mapper

    def start_process(self, summary: Optional[SummaryEvent]) -> None:
        """The events that follow come from one process, whose summary line is ``summary``."""

    @abstractmethod
    def section(self) -> tuple[Any, ...]:
        """The values of the ``SECTION`` keys, in that order (every aggregator has its own)."""

    def findings(self) -> list[Finding]:
        return []
