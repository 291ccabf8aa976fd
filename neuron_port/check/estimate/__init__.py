"""The step-time, compile-time, memory and price estimate of a `check` run (docs/estimate.md).

``flops.py`` counts FLOPs, bytes and tokens per recorded signature, ``work.py`` turns the events of every
process into the work of one steady-state step (one handler per event kind), kept as ``stepwork.py``'s
records, ``devices.py`` reads the
device table (rules/devices.toml), ``assumptions.py`` names every assumed constant, ``roofline.py`` times the
work on one device, ``model.py`` adds dispatch and collectives and lays out the section's devices, ``options.py`` reads the user's choices ([tool.neuron-port.estimate] and flags).
``section.py`` makes the report's ``estimate`` section: ``build_estimate`` from a run, ``recompute`` again
from a saved report's section. This package re-exports what its callers use.
"""

from __future__ import annotations

from neuron_port.check.estimate.devices import DeviceTableError
from neuron_port.check.estimate.options import CLI_OPTIONS, EstimateOptions, estimate_options
from neuron_port.check.estimate.section import (TokensError, build_estimate, estimate_from_work, recompute,
                                                withheld_reason)

__all__ = ["CLI_OPTIONS", "EstimateOptions", "estimate_options", "DeviceTableError", "TokensError", "build_estimate",
           "recompute", "estimate_from_work", "withheld_reason"]
