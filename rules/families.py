"""Rule families: the hundred of a rule's code names its family and the package that holds it.

Every consumer (the `rules` listing, SARIF tags, docs) asks ``rule.FAMILY``; this is the one table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    prefix: str  # "NP1"
    name: str  # kebab-case, as shown in SARIF tags and `rules --output-format json`
    title: str
    package: str  # the package under rules/ holding the family's rules


FAMILIES: tuple[Family, ...] = (
    Family("NP1", "device-placement", "Device placement", "device_placement"),
    Family("NP2", "cuda-api", "The torch.cuda API", "cuda_api"),
    Family("NP3", "mixed-precision", "Mixed precision", "mixed_precision"),
    Family("NP4", "compile", "torch.compile and CUDA-only backend flags", "compile"),
    Family("NP5", "distributed", "Distributed, sharding and launch files", "distributed"),
    Family("NP6", "ecosystem", "Hugging Face, accelerate, Lightning", "ecosystem"),
    Family("NP7", "no-port", "CUDA-only code with no automatic port", "no_port"),
    Family("NP8", "precision-features", "Precision and unsupported features", "precision_features"),
    Family("NP9", "runtime", "Runtime findings of `check`", "runtime"),
)

_BY_PREFIX = {family.prefix: family for family in FAMILIES}


def family_of(code: str) -> Family:
    try:
        return _BY_PREFIX[code[:3]]
    except KeyError:
        raise ValueError(f"rule code {code!r} belongs to no family (NP1xx-NP9xx)") from None
