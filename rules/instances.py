"""Trainium instances: logical NeuronCores per node, for --instance (GPU counts in launch scripts become
NeuronCore counts, NP521) and for the cost estimate.

Each figure names its source; what the sources do not document is not guessed (Trn3 single-instance
sizes: use --neuron-cores N).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Instance:
    name: str
    chips: int  # Trainium chips per node (one instance / one server)
    chip: str
    cores: int  # logical NeuronCores per node at the default LNC=2
    nodes: int  # nodes in the system (UltraServers: servers)
    source: str

    def describe(self) -> str:
        nodes = f" per node, {self.nodes} nodes" if self.nodes > 1 else ""
        return (f"{self.name}: {self.chips} {self.chip} chip(s) x 4 = {self.cores} logical NeuronCores at the "
                f"default LNC=2{nodes}")


# Logical NeuronCores per node at the default LNC=2 (4 per chip: 8 physical cores, two per logical core;
# LNC=1 doubles the count). Sources: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/get-started/quickstart-build-first-model.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/nrt-env-var-reference.html (LNC, default per platform: trn2/trn3
# "2", trn2.48xlarge = 64 cores at LNC=2), https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-features/logical-neuroncore-config.rst, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-hardware/trainium2.rst, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-hardware/trainium3.rst (instances). Trn3 single-instance sizes are NOT
# documented there ("Trn3 single-instance sizes/prices: NOT found"), so only the two UltraServer
# layouts are known; anything else takes --neuron-cores N.
INSTANCES: dict[str, Instance] = {
    "trn2.3xlarge": Instance("trn2.3xlarge", 1, "Trainium2", 4, 1,
                             "https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-hardware/trainium2.rst (1 chip, 4 logical cores at LNC=2)"),
    "trn2.48xlarge": Instance("trn2.48xlarge", 16, "Trainium2", 64, 1,
                              "https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-hardware/trainium2.rst, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-features/logical-neuroncore-config.rst (16 chips, 64 cores at LNC=2, 128 at LNC=1)"),
    "trn2u.48xlarge": Instance("trn2u.48xlarge", 16, "Trainium2", 64, 1,
                               "https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-hardware/trainium2.rst (UltraServer node: 16 chips; 4 nodes per Trn2 UltraServer)"),
    "trn3-ultraserver-gen1": Instance("trn3-ultraserver-gen1", 16, "Trainium3", 64, 4,
                                      "https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-hardware/trainium3.rst (Trn3 Gen1 UltraServer: 64 chips = 4 servers x 16) "
                                      "and https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-features/logical-neuroncore-config.rst (trn3 default LNC=2)"),
    "trn3-ultraserver-gen2": Instance("trn3-ultraserver-gen2", 4, "Trainium3", 16, 36,
                                      "https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-hardware/trainium3.rst (Trn3 Gen2 UltraServer: 144 chips = 36 servers x 4) "
                                      "and https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-features/logical-neuroncore-config.rst (trn3 default LNC=2)"),
}


INSTANCE_HELP = (f"Trainium instance the launch scripts are for ({', '.join(INSTANCES)}): GPU counts such as "
                 "torchrun --nproc_per_node become its logical NeuronCore count (unsafe fix).")


class InstanceError(ValueError):
    pass


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
    if key in INSTANCES:
        found = INSTANCES[key]
        return found.cores, found.describe()
    known = ", ".join(INSTANCES)
    if key.startswith("trn3"):
        raise InstanceError(
            f"{instance!r}: Trn3 single-instance sizes are not documented in the sources neuron-port uses "
            f"(https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-hardware/trainium3.rst); use a known layout ({known}) or --neuron-cores N "
            "(logical NeuronCores per node: 4 per Trainium3 chip at the default LNC=2)")
    raise InstanceError(f"unknown instance {instance!r}; known: {known}; or give --neuron-cores N")


def describe_cores(instance: Optional[str], neuron_cores: Optional[int]) -> Optional[tuple[int, str]]:
    try:
        return resolve_instance(instance, neuron_cores)
    except InstanceError:
        return None
