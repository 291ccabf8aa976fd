"""How far the estimate was off where it could be checked: the published GPU runs of docs/estimate.md
("Validation against published runs"), measured by bench/estimate/published.py (results/published.json) and,
for three of them, tests/check/estimate/test_published_runs.py. A row's error is that of the runs on its own
kind of GPU (an H100 row: every H100 run, whatever its part), beside the range over every run; a device
the table has no published run for says so (every Trainium: no published run of the same program)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuron_port.check.estimate.devices import Device


@dataclass(frozen=True)
class Run:
    key: str  # its row of bench/estimate/published.py (results/published.json)
    name: str
    device: str  # the row of rules/devices.toml it ran on
    ratio: float  # estimate / published
    held_out: bool  # added after the model was tuned, nothing changed for it


# bench/estimate/results/published.json (as recorded at 6293ab7; tests/check/estimate/test_estimate_compare.py keeps
# the two in step); held out: the two llm.c rows added after the tuning and run once with nothing changed for them
RUNS: tuple[Run, ...] = (
    Run("gpt2-124m-a100", "llm.c GPT-2 124M, 8 A100", "a100-sxm", 1.14, False),
    Run("gpt2-350m-a100", "llm.c GPT-2 350M, 8 A100", "a100-sxm", 1.01, True),
    Run("gpt2-774m-a100", "llm.c GPT-2 774M, 8 A100", "a100-sxm", 0.97, True),
    Run("gpt2-1558m-h100", "llm.c GPT-2 1.5B, 8 H100", "h100-sxm", 0.90, False),
    Run("llama3-8b-fsdp8-h100", "torchtitan Llama 3.1 8B FSDP, 8 H100, eager", "h100-hbm2e-500w", 0.87, False),
    Run("llama3-8b-fsdp8-compile-h100", "torchtitan Llama 3.1 8B FSDP, 8 H100, compiled", "h100-hbm2e-500w", 0.75,
        False),
    Run("llama3-8b-fsdp128-h100", "torchtitan Llama 3.1 8B FSDP, 128 H100, eager", "h100-hbm2e-500w", 0.84, False),
    Run("llama3-8b-fsdp128-compile-h100", "torchtitan Llama 3.1 8B FSDP, 128 H100, compiled", "h100-hbm2e-500w",
        0.85, False),
)
NOT_VALIDATED = "not validated on hardware: no published run of the same program on this device"


def gpu_kind(device_id: str) -> str:
    """The kind of GPU a row is (``h100``, ``a100``): the part's name before its variant."""
    return device_id.split("-", 1)[0]


def validation(device: Device) -> dict[str, Any]:
    """The ``validation`` entry of a per-device estimate: the measured error range of the runs on the
    row's kind of GPU and over every run, or why none."""
    every = [r.ratio for r in RUNS]
    overall = {"all_ratio_low": min(every), "all_ratio_high": max(every), "all_runs": len(RUNS),
               "held_out_runs": sum(r.held_out for r in RUNS)}
    own = [r for r in RUNS if device.kind == "gpu" and gpu_kind(r.device) == gpu_kind(device.price_device)]
    if not own:
        return {"validated": False, "note": NOT_VALIDATED, **overall}
    low, high = min(r.ratio for r in own), max(r.ratio for r in own)
    kind = gpu_kind(device.price_device).upper()
    held = sum(r.held_out for r in own)
    return {"validated": True, "ratio_low": low, "ratio_high": high, "kind": kind, "runs": len(own),
            "note": (f"estimate / published {low:.2f}-{high:.2f} on {len(own)} {kind} run(s) ({held} held out); "
                     f"{min(every):.2f}-{max(every):.2f} over all {len(RUNS)} runs (docs/estimate.md)"),
            **overall}
