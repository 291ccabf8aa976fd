"""Device rows sized by instance: `--instance NAME[:N]` (repeatable; [tool.neuron-port.estimate] instances)
runs each row of the instance's chip on N instances' chips, so "16 Trainium2 chips" is `trn2.48xlarge` and
"8 H100" is `p5.48xlarge` (the catalogue: rules/instances.toml, each figure with its source). One rank per
logical NeuronCore (per GPU), as `--cores`; rows of other chips keep `--cores`. A device the table lists only
on request (`listed = false`: the p4d.24xlarge's A100 40GB) is a row only when an instance holds it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

from neuron_port.check.estimate.devices import Device


@dataclass(frozen=True)
class Sized:
    """One instance spec, resolved: ``count`` instances of ``name`` hold ``chips`` chips of ``device``."""

    spec: str
    name: str
    count: int
    device: str  # the chip's row in devices.toml (a Device's price_device)
    chips: int
    source: str

    def ranks(self, device: Device) -> int:
        """Ranks of ``device`` (a chip or one of its logical cores) on these chips: one per logical core."""
        return self.chips * max(device.chip_cores, 1)

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "name": self.name, "count": self.count, "device": self.device,
                "chips": self.chips, "source": self.source}


TRN1 = ("Trainium1 (trn1) is not a TorchNeuron target (TorchNeuron runs on Trn2 and Trn3; a Trn1 runs PyTorch "
        "through torch-xla, a different program path), so the estimate has no Trn1 row or price")


def refuse_trn1(option: str, text: str, name: str) -> None:
    """ValueError saying why a Trainium1 instance or chip has no row (docs/estimate.md "Prices")."""
    if name.strip().lower().startswith(("trn1", "trainium1")):
        raise ValueError(f"{option} {text!r}: {TRN1}")


def parse_instance(text: str) -> Sized:
    """``NAME`` or ``NAME:N`` of the catalogue; ValueError names the known instances."""
    from neuron_port.rules.instances import load_instances

    name, _, count_text = str(text).strip().partition(":")
    key = name.strip().lower()
    refuse_trn1("--instance", text, key)
    instances = load_instances()
    found = instances.get(key)
    if found is None or not found.device:
        raise ValueError(f"--instance {text!r}: unknown instance (known: {', '.join(instances)})")
    try:
        count = int(count_text) if count_text else 1
    except ValueError:
        raise ValueError(f"--instance {text!r}: {count_text!r} is not a whole number of instances") from None
    if count < 1:
        raise ValueError(f"--instance {text!r}: at least 1 instance")
    return Sized(spec=f"{key}:{count}" if count > 1 else key, name=key, count=count, device=found.device,
                 chips=found.total_chips * count, source=found.source)


def parse_instances(texts: Iterable[str]) -> list[Sized]:
    """Each spec parsed, each chip sized at most once; ValueError says what is wrong."""
    sized: list[Sized] = []
    for text in texts:
        one = parse_instance(text)
        clash = next((s for s in sized if s.device == one.device), None)
        if clash is not None:
            raise ValueError(f"--instance {text!r} and {clash.spec!r} both size {one.device}; give one "
                             f"(several instances: {one.name}:N)")
        sized.append(one)
    return sized


def resolve(specs: Iterable[str], devices: Sequence[Device]) -> list[Sized]:
    """The specs against the device table (a catalogue entry whose chip the table lacks is a broken
    package: tests/check/estimate keeps the two files in step)."""
    sized = parse_instances(specs)
    chips = {d.price_device for d in devices}
    missing = [s for s in sized if s.device not in chips]
    if missing:
        raise ValueError(f"instance {missing[0].name}: its chip {missing[0].device!r} is not in the device table")
    return sized


def rows(devices: Sequence[Device], sized: Sequence[Sized]) -> list[Device]:
    """The estimate's rows: the listed devices, and the unlisted ones an instance holds."""
    held = {s.device for s in sized}
    return [d for d in devices if d.listed or d.price_device in held]


def sized_for(device: Device, sized: Sequence[Sized]) -> Optional[Sized]:
    return next((s for s in sized if s.device == device.price_device), None)


COMPARE = ("like-for-like", "cores")  # --compare: the Trainium rows a job's GPUs are compared with


@dataclass(frozen=True)
class Shape:
    """A Trainium shape a user would rent for a job of ``gpus`` GPUs: ``chips`` chips of ``device`` on
    ``basis`` (equal chips, equal HBM, or the instance that holds them); ``compared``: the row the report
    compares (the instance a user rents)."""

    device: str
    chips: int
    basis: str
    instance: Optional[Sized] = None
    compared: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"basis": self.basis, "chips": self.chips, "compared": self.compared,
                "instance": self.instance.name if self.instance else None}


def like_for_like(device: Device, gpus: int, gpu_hbm_gib: float) -> list[Shape]:
    """The shapes of ``device`` (a Trainium chip) for a job of ``gpus`` GPUs of ``gpu_hbm_gib`` each: equal
    chips, equal HBM (when that needs other chips), and the smallest one-node instance of the catalogue
    that holds the larger of the two (e.g. trn2.48xlarge, 16 chips, for 8 H100), which is the row compared;
    with no such instance the equal-chips row is."""
    from neuron_port.rules.instances import load_instances

    equal_hbm = max(1, math.ceil(gpus * gpu_hbm_gib / device.hbm_gib - 1e-9)) if device.hbm_gib else gpus
    need = max(gpus, equal_hbm)
    holders = sorted((i for i in load_instances().values() if i.device == device.price_device and i.nodes == 1
                      and i.total_chips >= need), key=lambda i: (i.total_chips, i.name))
    instance = None
    if holders:
        one = holders[0]
        instance = Sized(spec=one.name, name=one.name, count=1, device=one.device, chips=one.total_chips,
                         source=one.source)
    shapes = [Shape(device.id, instance.chips, "instance", instance, True)] if instance else []
    if not instance or instance.chips != gpus:
        shapes.append(Shape(device.id, gpus, "equal chips", compared=not instance))
    if equal_hbm != gpus and (not instance or instance.chips != equal_hbm):
        shapes.append(Shape(device.id, equal_hbm, "equal HBM"))
    return shapes
