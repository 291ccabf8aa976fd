"""The step-time, compile-time, memory and price estimate of a `check` run (docs/estimate.md).

``flops.py`` counts FLOPs and bytes per recorded signature, ``work.py`` turns the events of every process
into the work of one steady-state step, ``devices.py`` reads the device table (rules/devices.toml),
``assumptions.py`` names every assumed constant, ``model.py`` applies the roofline model, ``options.py``
reads the user's choices ([tool.neuron-port.estimate] and flags). ``build_estimate`` makes the report's
``estimate`` section from a run; ``recompute`` makes it again from a saved report's section.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Optional

from neuron_port.check.estimate.assumptions import assumptions
from neuron_port.check.estimate.devices import Device, DeviceTableError, load_devices
from neuron_port.check.estimate.model import estimate
from neuron_port.check.estimate.options import CLI_OPTIONS, EstimateOptions, estimate_options
from neuron_port.check.estimate.work import StepWork, TokensError, resolve_tokens, step_work
from neuron_port.check.events import ProcessEvents

__all__ = ["CLI_OPTIONS", "EstimateOptions", "estimate_options", "DeviceTableError", "TokensError", "build_estimate",
           "recompute", "estimate_from_work"]


def tokens_per_step(work: StepWork, tokens: Any) -> tuple[Optional[float], Optional[dict[str, Any]]]:
    """(the number of tokens per step, where it came from when counted from the shapes); TokensError for
    a spec that names not exactly one embedding lookup."""
    if not isinstance(tokens, str):
        return tokens, None
    source = resolve_tokens(tokens, work.token_sources)
    return source.per_step, {"spec": tokens, **source.to_json()}


def estimate_from_work(work: StepWork, options: EstimateOptions,
                       devices: Optional[list[Device]] = None) -> Optional[dict[str, Any]]:
    """The ``estimate`` section for ``work`` (None when the run recorded no device op); TokensError for a
    tokens-per-step spec that names not exactly one embedding lookup."""
    if not work.items and not work.fallback_calls:
        return None
    devices = devices if devices is not None else load_devices()
    cores = options.cores or max(work.processes, 1)
    tokens, tokens_from = tokens_per_step(work, options.tokens_per_step)
    section = estimate(work, devices, assumptions(options.assumptions), cores=cores,
                       tokens_per_step=tokens, prices=options.prices)
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


def recompute(section: dict[str, Any], options: EstimateOptions) -> Optional[dict[str, Any]]:
    """The section again from a saved report's ``estimate``: its per-step work with ``options``; what
    ``options`` leaves unset (tokens, cores, prices the user set at check time, assumptions) is kept."""
    work = StepWork.from_json(section["work"])
    saved = EstimateOptions.from_section(section)
    return estimate_from_work(work, saved.updated(options))
