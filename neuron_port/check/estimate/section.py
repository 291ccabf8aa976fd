"""The report's ``estimate`` section: of a run (``build_estimate``: the events of every process), or again
of a saved report's section (``recompute``: its per-step work with other options), and the tokens per
step a spec picks among the run's embedding lookups (``resolve_tokens``).

The value goes one way: the events become the work of one steady step (``work.step_work``), the user's
options pick the tokens, devices and assumptions, and the cost model (``model.estimate``) makes the section.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Optional

from neuron_port.check.estimate import compare, sizing
from neuron_port.check.estimate.assumptions import assumptions, values
from neuron_port.check.estimate.devices import Device, load_devices
from neuron_port.check.estimate.flops import base_name
from neuron_port.check.estimate.model import estimate
from neuron_port.check.estimate.options import EstimateOptions
from neuron_port.check.estimate.stepwork import StepWork, TokenSource
from neuron_port.check.estimate.work import step_work
from neuron_port.check.events import ProcessEvents


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


def tokens_per_step(work: StepWork, tokens: Any) -> tuple[Optional[float], Optional[dict[str, Any]]]:
    """(the number of tokens per step, where it came from when counted from the shapes); TokensError for
    a spec that names not exactly one embedding lookup."""
    if not isinstance(tokens, str):
        return tokens, None
    source = resolve_tokens(tokens, work.token_sources)
    # a fake world ran one rank of `world`: the step's tokens are every rank's
    return source.per_step * work.world / max(work.processes, 1), {"spec": tokens, **source.to_json()}


def estimate_from_work(work: StepWork, options: EstimateOptions,
                       devices: Optional[list[Device]] = None) -> Optional[dict[str, Any]]:
    """The ``estimate`` section for ``work`` (None when the run recorded no device op); TokensError for a
    tokens-per-step spec that names not exactly one embedding lookup."""
    if not work.items and not work.fallback_calls:
        return None
    devices = devices if devices is not None else load_devices()
    measured = options.measured
    specs = list(options.instances)
    if measured is not None and measured.instance:  # the GPUs the user measured on size that row, as --instance
        chip = sizing.parse_instance(measured.instance).device
        specs = [s for s in specs if sizing.parse_instance(s).device != chip] + [measured.instance]
    sized = sizing.resolve(specs, devices)
    cores = options.cores or work.world
    tokens, tokens_from = tokens_per_step(work, options.tokens_per_step)
    rows = sizing.rows(devices, sized)
    chosen = assumptions(options.assumptions)
    section = estimate(work, rows, chosen, cores=cores, tokens_per_step=tokens, prices=options.prices, sized=sized)
    compare.like_for_like(section, work, rows, values(chosen), tokens, options.prices, sized, options.compare,
                          measured)
    compare.calibrate(section, rows, measured)
    section["instances"] = [s.to_json() for s in sized if s.spec in options.instances]
    if tokens_from is not None:
        section["steps"]["tokens_from"] = tokens_from
    return section


def build_estimate(processes: Iterable[ProcessEvents], options: EstimateOptions) -> Optional[dict[str, Any]]:
    """The section of a run. A spec that names not exactly one lookup does not lose the run: the
    section is made without tokens, and ``steps.tokens_from.error`` lists the candidates (the panel shows
    them; `neuron-port estimate REPORT.json --tokens-per-step embedding@...` picks one)."""
    work = step_work(processes)
    try:
        return estimate_from_work(work, options)
    except TokensError as exc:
        section = estimate_from_work(work, replace(options, tokens_per_step=None))
        if section is not None:
            section["steps"]["tokens_from"] = {"spec": options.tokens_per_step, "error": str(exc)}
        return section


def withheld_reason(processes: Iterable[ProcessEvents], succeeded: bool) -> Optional[str]:
    """Why a run's estimate is withheld (None: it is made): the command failed before a whole step ran (no
    optimizer step, at most one forward started), so "per step" would price a partial one, the crash's few
    ops (a run that succeeded without steps is priced as one step of the whole run, as docs/estimate.md says)."""
    if succeeded:
        return None
    summaries = [p.summary for p in processes if p.summary is not None]
    steps = max((s.optimizer_steps or 0 for s in summaries), default=0)
    forwards = max((s.forwards or 0 for s in summaries), default=0)
    if steps or forwards > 1:
        return None
    return (f"no estimate: the command failed before a whole step ran ({steps} optimizer steps, {forwards} "
            "forward(s) started), and a step's time and price would be those of the ops before the failure")


def recompute(section: dict[str, Any], options: EstimateOptions) -> Optional[dict[str, Any]]:
    """The section again from a saved report's ``estimate``: its per-step work with ``options``; what
    ``options`` leaves unset (tokens, cores, prices the user set at check time, assumptions) is kept."""
    work = StepWork.from_json(section["work"])
    saved = EstimateOptions.from_section(section)
    return estimate_from_work(work, saved.updated(options))
