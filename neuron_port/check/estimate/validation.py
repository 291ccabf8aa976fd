"""How far the estimate was off where it could be checked: the published GPU runs of docs/estimate.md
("Validation against published runs"), measured by tests/check/estimate/test_published_runs.py. A device
the table has no published run for says so (every Trainium: no published run of the same program)."""

from __future__ import annotations

from typing import Any

from neuron_port.check.estimate.devices import Device

# device -> (lowest, highest estimate / published ratio measured, the runs); docs/estimate.md has the table
VALIDATED: dict[str, tuple[float, float, str]] = {
    "a100-sxm": (0.97, 1.13, "llm.c GPT-2 124M, 350M and 774M on 8 A100"),
    "h100-sxm": (0.89, 0.89, "llm.c GPT-2 1.5B on 8 H100"),
    "h100-hbm2e-500w": (0.75, 0.86, "torchtitan Llama 3.1 8B FSDP with selective activation checkpointing (eager and "
                        "compiled, 8 and 128 GPUs; bench/README.md)"),
}
NOT_VALIDATED = "not validated on hardware: no published run of the same program on this device"


def validation(device: Device) -> dict[str, Any]:
    """The ``validation`` entry of a per-device estimate: the measured error range, or why none."""
    found = VALIDATED.get(device.price_device) or VALIDATED.get(device.id)
    if found is None:
        return {"validated": False, "note": NOT_VALIDATED}
    low, high, runs = found
    return {"validated": True, "ratio_low": low, "ratio_high": high,
            "note": f"estimate / published {low:.2f}-{high:.2f} on {runs} (docs/estimate.md)"}
