"""What a user deciding to rent Trainium compares (docs/estimate.md "Like for like" and "Calibration"):

* the Trainium rows of a job of N GPUs are the shapes a user would rent for it (``sizing.like_for_like``:
  equal chips, equal HBM, the instance that holds them), each a row on its chips, unless an `--instance`
  sizes that chip or `--compare cores` asks for the rows on the job's logical cores (and per core);
* with `--measured DEVICE=SECONDS[@INSTANCE]`, the model's ratio on that GPU (measured / estimated) and
  every Trainium row's estimate times it, beside the model's own (``calibrated`` of the row).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from neuron_port.check.estimate import sizing
from neuron_port.check.estimate.devices import Device, Price
from neuron_port.check.estimate.model import device_estimate
from neuron_port.check.estimate.options import Measured
from neuron_port.check.estimate.stepwork import StepWork

CALIBRATED_NOTE = ("calibrated = the model's estimate x (your measured {device} step / the model's estimate of "
                   "it): the model's error on your GPU carried to Trainium, assuming it errs alike there; "
                   "uncalibrated = the model alone")


def _price(device: Device, prices: Mapping[str, float]) -> Price:
    if device.price_device in prices:  # as model.device_rows chooses it
        return Price(prices[device.price_device], None, "user", False)
    return device.price


def _reference(rows: Sequence[dict[str, Any]], kinds: Mapping[str, Device],
               measured: Optional[Measured]) -> Optional[dict[str, Any]]:
    """The GPU row the job is: the one the user measured, else one an instance sizes, else the first."""
    gpus = [r for r in rows if kinds[r["device"]].kind == "gpu"]
    if measured is not None:
        gpus = [r for r in gpus if r["device"] == measured.device] or gpus
    return next((r for r in gpus if r.get("instance")), gpus[0] if gpus else None)


def like_for_like(section: dict[str, Any], work: StepWork, devices: Sequence[Device], a: Mapping[str, float],
                  tokens: Optional[float], prices: Mapping[str, float], sized: Sequence[sizing.Sized],
                  compare: Optional[str], measured: Optional[Measured]) -> None:
    """Replaces the Trainium rows no instance sizes with the like-for-like shapes of the job's GPUs (in
    place; ``section["comparison"]`` says on what basis)."""
    basis = compare or "like-for-like"
    by_id = {d.id: d for d in devices}
    rows = section["per_device"]
    reference = _reference(rows, by_id, measured)
    held = {s.device for s in sized}
    trainium = [d for d in devices if d.kind == "trainium" and d.price_device not in held]
    if basis == "cores" or reference is None or not trainium:
        section["comparison"] = {"basis": basis, "gpu": None}
        return
    gpu = by_id[reference["device"]]
    gpus = max(1, round(reference["price"]["chips"]))
    new_rows = []
    for device in trainium:
        if device.per != "chip":
            continue  # per-core rows: `--compare cores`
        for shape in sizing.like_for_like(device, gpus, gpu.hbm_gib):
            row = device_estimate(work, device, shape.chips * device.chip_cores, a, tokens, _price(device, prices))
            row["shape"] = shape.to_json()
            if shape.instance is not None:
                row["instance"] = shape.instance.to_json()
            new_rows.append(row)
    replaced = {d.id for d in trainium}
    first = next((i for i, r in enumerate(rows) if r["device"] in replaced), len(rows))
    kept = [r for r in rows if r["device"] not in replaced]
    section["per_device"] = kept[:first] + new_rows + kept[first:]
    section["comparison"] = {
        "basis": basis,
        "gpu": {"device": gpu.id, "chips": gpus, "hbm_gib": gpu.hbm_gib,
                "instance": (reference.get("instance") or {}).get("spec")},
        "note": (f"Trainium rows for a job of {gpus} {gpu.id}: the instance that holds it (the row compared), "
                 "equal chips and equal HBM; --compare cores gives the rows on the job's logical cores"),
    }


def calibrate(section: dict[str, Any], devices: Sequence[Device], measured: Optional[Measured]) -> None:
    """The model's ratio on the measured GPU row and each Trainium row's estimate times it (in place)."""
    if measured is None:
        return
    kinds = {d.id: d.kind for d in devices}
    row = next((r for r in section["per_device"] if r["device"] == measured.device), None)
    if row is None:
        raise ValueError(f"--measured {measured.spec}: the estimate has no {measured.device} row (give the "
                         "instance it ran on: @NAME)")
    estimated = row["step_seconds"]["expected"]
    ratio = measured.seconds / estimated if estimated > 0 else 1.0
    row["measured_seconds"] = measured.seconds
    section["calibration"] = {
        "device": measured.device, "instance": measured.instance, "measured_seconds": measured.seconds,
        "estimated_seconds": estimated, "ratio": ratio, "applied_to": "trainium",
        "note": CALIBRATED_NOTE.format(device=measured.device)}
    for r in section["per_device"]:
        if kinds.get(r["device"]) != "trainium":
            continue
        price = r["price"]
        r["calibrated"] = {
            "ratio": ratio,
            "step_seconds": r["step_seconds"]["expected"] * ratio,
            "compiled_step_seconds": r["compiled_step_seconds"]["expected"] * ratio,
            "per_step_usd": None if price["per_step_usd"] is None else price["per_step_usd"] * ratio,
            "per_million_tokens_usd": (None if price["per_million_tokens_usd"] is None
                                       else price["per_million_tokens_usd"] * ratio)}
