"""Instances: Trainium ones with their logical NeuronCores per node, for `rewrite --instance` (GPU counts in
launch scripts become NeuronCore counts, NP521), and the GPU instances users compare against, for the
estimate's `--instance NAME[:N]` (chips of a device row by instance). The catalogue is ``instances.toml``
beside this file (each figure with its source), read on first use: ``INSTANCES`` (the Trainium ones) and
``INSTANCE_HELP`` are made when first asked for, so an import of this module reads no file.

What the sources do not document is not guessed (Trn3 single-instance sizes: use --neuron-cores N).
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

INSTANCES_FILE = Path(__file__).resolve().parent / "instances.toml"
TRN3_SOURCE = "https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-hardware/trainium3.rst"


@dataclass(frozen=True)
class Instance:
    name: str
    chips: int  # Trainium chips per node (one instance / one server)
    chip: str
    cores: int  # logical NeuronCores per node at the default LNC=2
    nodes: int  # nodes in the system (UltraServers: servers)
    source: str
    device: str = ""  # the chip's row in devices.toml (the estimate's --instance)
    kind: str = "trainium"  # trainium | gpu (a GPU instance: chips and cores are GPUs)

    @property
    def total_chips(self) -> int:
        """Chips of the whole system: every node's."""
        return self.chips * self.nodes

    def describe(self) -> str:
        if self.kind != "trainium":
            return f"{self.name}: {self.chips} {self.chip} GPU(s)"
        nodes = f" per node, {self.nodes} nodes" if self.nodes > 1 else ""
        return (f"{self.name}: {self.chips} {self.chip} chip(s) x 4 = {self.cores} logical NeuronCores at the "
                f"default LNC=2{nodes}")


class InstanceError(ValueError):
    pass


@functools.lru_cache(maxsize=None)
def load_instances(path: Path = INSTANCES_FILE) -> dict[str, Instance]:
    """The catalogue of ``path``, in its order (a broken file raises: it ships with the package)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {name: Instance(name=name, chips=int(entry["chips"]), chip=str(entry["chip"]), cores=int(entry["cores"]),
                           nodes=int(entry["nodes"]), source=str(entry["source"]), device=str(entry.get("device", "")),
                           kind=str(entry.get("kind", "trainium")))
            for name, entry in data["instances"].items()}


def trainium_instances() -> dict[str, Instance]:
    """The Trainium instances of the catalogue: what `rewrite --instance` converts launch scripts to."""
    return {name: i for name, i in load_instances().items() if i.kind == "trainium"}


def instance_help() -> str:
    return (f"Trainium instance the launch scripts are for ({', '.join(trainium_instances())}): GPU counts such as "
            "torchrun --nproc_per_node become its logical NeuronCore count (unsafe fix).")


def __getattr__(name: str) -> Any:
    """``INSTANCES`` (name -> Instance, the Trainium ones) and ``INSTANCE_HELP`` (the --instance help), read on
    first use."""
    if name == "INSTANCES":
        return trainium_instances()
    if name == "INSTANCE_HELP":
        return instance_help()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_instance(instance: Optional[str], neuron_cores: Optional[int]) -> Optional[tuple[int, str]]:
    """(logical NeuronCores per node, description) for --instance / --neuron-cores, None when neither."""
    if neuron_cores is not None:
        if instance is not None:
            raise InstanceError("give --instance or --neuron-cores, not both")
        if neuron_cores < 1:
            raise InstanceError("--neuron-cores must be at least 1")
        return neuron_cores, f"--neuron-cores {neuron_cores}"
    if instance is None:
        return None
    key = instance.strip().lower()
    instances = trainium_instances()
    if key in instances:
        found = instances[key]
        return found.cores, found.describe()
    known = ", ".join(instances)
    gpu = load_instances().get(key)
    if gpu is not None:
        raise InstanceError(f"{instance!r} is a GPU instance ({gpu.chips} x {gpu.chip}), not a Trainium one: "
                            f"--instance names the Trainium instance the launch scripts are for ({known}); "
                            "or give --neuron-cores N")
    if key.startswith("trn3"):
        raise InstanceError(
            f"{instance!r}: Trn3 single-instance sizes are not documented in the sources neuron-port uses "
            f"({TRN3_SOURCE}); use a known layout ({known}) or --neuron-cores N "
            "(logical NeuronCores per node: 4 per Trainium3 chip at the default LNC=2)")
    raise InstanceError(f"unknown instance {instance!r}; known: {known}; or give --neuron-cores N")


def describe_cores(instance: Optional[str], neuron_cores: Optional[int]) -> Optional[tuple[int, str]]:
    try:
        return resolve_instance(instance, neuron_cores)
    except InstanceError:
        return None
