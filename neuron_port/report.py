"""The report of one `rewrite` or `check` run: what neuron_port.api returns and the reporters render."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from neuron_port.results import FileError, FileResult, Finding

if TYPE_CHECKING:  # pragma: no cover (the static path imports neither the cache nor the runtime half)
    from neuron_port.check.runtime import RuntimeSection
    from neuron_port.rewrite.cache import CacheStats


@dataclass
class Report:
    """What a `rewrite` or `check` run found (neuron_port.api builds it; reporters render it)."""

    command: str  # "rewrite" or "check"
    target: str
    wrote: bool = False  # the run wrote the rewritten files (rewrite without --diff / --check)
    files: list[FileResult] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    runtime: Optional["RuntimeSection"] = None  # `check` only
    runtime_findings: list[Finding] = field(default_factory=list)  # NP9xx from `check`
    cache_stats: Optional["CacheStats"] = None  # the result cache's counts, when it was used

    @property
    def findings(self) -> list[Finding]:
        out = [f for r in self.files for f in r.reported_findings()] + list(self.runtime_findings)
        out.sort(key=Finding.sort_key)
        return out
