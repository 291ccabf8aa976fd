"""Static findings checked against the run: a rule's ``RUN_PREMISE`` (rules/spec.py) says what its finding
assumes that a `check` run can see (a float64 tensor reaching the device, PyTorch's native multi-head
attention path, a resampling op that falls back). After the run:

- the run showed it at the finding's own line (an op, a fallback, an unsupported feature or a demotion of
  the premise): the finding keeps its severity and says "seen in this run here";
- the run showed it only at other lines: no confirmation (a nearest upsample that fell back elsewhere does
  not vouch for a bilinear one on a line that never ran on the device), no refutation either (the finding's
  line may create what another line uses: a module built here runs its forward there). The finding keeps
  its severity and says where the run showed it instead, and whether its own line ran on the device;
- the run succeeded and ran ops on the device, its file was part of the run (a process imported it, or an
  event has a site in it) and none of it happened:
  the finding says "not seen in this run" with the premise found false, and becomes info. `check`'s exit
  code counts it as info (docs/check.md, "Exit status");
- otherwise (the run failed, nothing ran on the device, or the file was never imported) it is left as it
  was: the run says nothing about it.
"""

from __future__ import annotations

from dataclasses import replace
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Iterable, Optional

from neuron_port.check.events import ProcessEvents, Site
from neuron_port.check.runtime import RuntimeSection
from neuron_port.check.sites import SiteMapper, UserSite
from neuron_port.report import Report
from neuron_port.results import Finding
from neuron_port.rules.registry import rule_by_code

if TYPE_CHECKING:  # rules/spec.py imports LibCST: loaded later by the scan, its dataclass methods from their cache
    from neuron_port.rules.spec import RunPremise

__all__ = ["Evidence", "check_static_findings", "imported_files"]


class Evidence:
    """What the run showed, as the premises ask: ops that ran, ops that fell back, unsupported features,
    demoted dtypes, each with the sites it was seen at; and the files that ran on the device."""

    def __init__(self, runtime: RuntimeSection, imported: Iterable[str] = ()) -> None:
        parts = runtime.parts
        self.ops: list[tuple[str, Optional[UserSite]]] = []
        self.fallbacks: list[tuple[str, Optional[UserSite]]] = []
        self.features: list[tuple[str, Optional[UserSite]]] = []
        self.demotions: list[tuple[str, Optional[UserSite]]] = []
        for entry in parts.get("eager_compiles", ()):
            self.ops.append((entry.op, entry.site))
        for entry in parts.get("fallbacks", ()):
            for site in entry.sites or ():
                self.fallbacks.append((entry.op, site.site))
                self.ops.append((entry.op, site.site))
        for entry in parts.get("unsupported", ()):
            self.features.append((entry.feature or "", entry.site))
        for entry in parts.get("demotions", ()):
            sites = getattr(entry, "sites", None) or (getattr(entry, "site", None),)
            for site in sites:
                self.demotions.append((entry.dtype, site))
        everything = (*self.ops, *self.features, *self.demotions)
        self.files = {site.path for _, site in everything if site is not None} | set(imported)
        self.lines = {(site.path, site.line) for _, site in everything if site is not None}  # ran on the device

    def seen(self, premise: RunPremise) -> list[Optional[UserSite]]:
        """The sites at which the run showed the premise (empty: it did not)."""
        def matching(pairs: Iterable[tuple[str, Optional[UserSite]]], patterns: tuple[str, ...]):
            return [site for name, site in pairs if any(fnmatchcase(name, p) for p in patterns)]

        return [*matching(self.ops, premise.ops), *matching(self.fallbacks, premise.fallback_ops),
                *matching(self.features, premise.features), *matching(self.demotions, premise.demotions)]


def judgeable(runtime: Optional[RuntimeSection]) -> bool:
    """The run can refute a premise: the command succeeded, was not interrupted and ran ops on the device."""
    if runtime is None or runtime.status.interrupted or not runtime.status.succeeded:
        return False
    ops = runtime.parts.get("ops")
    return bool(ops is not None and getattr(ops, "calls", 0) > 0)


def _judge(finding: Finding, evidence: Evidence) -> Finding:
    try:
        premise = getattr(rule_by_code(finding.code), "RUN_PREMISE", None)
    except (KeyError, LookupError, ValueError):
        return finding
    if premise is None:
        return finding
    sites = evidence.seen(premise)
    if any(s is not None and (s.path, s.line) == (finding.path, finding.line) for s in sites):
        return replace(finding, message=f"{finding.message} (seen in this run here)")
    if sites:  # only elsewhere: judged at this finding's own line, it is neither confirmed nor refuted
        where = sorted({f"{s.path}:{s.line}" for s in sites if s is not None})
        shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
        ran = ("this line ran on the device" if (finding.path, finding.line) in evidence.lines
               else "this line ran no op on the device")
        return replace(finding, message=f"{finding.message} (not seen at this line in this run, {ran}; "
                                        f"seen at {shown or 'a line outside the project'})")
    if finding.path not in evidence.files:
        return finding  # its file was not part of the run: the run says nothing about it
    return replace(finding, severity="info", message=f"{finding.message} (not seen in this run: {premise.absent})")


def imported_files(processes: Iterable[ProcessEvents], mapper: SiteMapper) -> set[str]:
    """The user's files the processes imported, as the report names them (relative to the checked folder)."""
    out = set()
    for process in processes:
        for name in (process.summary.user_files if process.summary else ()):
            site = mapper(Site(file=name, line=1, function=None, code=""))
            if site is not None:
                out.add(site.path)
    return out


def check_static_findings(report: Report, imported: Iterable[str] = ()) -> int:
    """Judge the static findings of ``report`` by its run (in place); the number found not seen.
    ``imported``: the files the run imported (``imported_files``)."""
    if not judgeable(report.runtime):
        return 0
    assert report.runtime is not None
    evidence = Evidence(report.runtime, imported)
    refuted = 0
    for result in report.files:
        judged = [_judge(f, evidence) for f in result.findings]
        refuted += sum(1 for old, new in zip(result.findings, judged) if new.severity != old.severity)
        result.findings = judged
    return refuted
