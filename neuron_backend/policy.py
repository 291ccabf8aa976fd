"""Load the simulator's op policy (``rules/op_policy.toml``, installed as ``neuron_port.rules``)."""

from __future__ import annotations

import sys
import tomllib
from functools import lru_cache
from pathlib import Path

POLICY_FILE = "op_policy.toml"


def policy_path() -> Path:
    here = Path(__file__).resolve().parent
    candidates = [here.parent / "rules" / POLICY_FILE]  # source checkout / editable install
    for entry in sys.path:  # installed wheel: neuron_port/rules/op_policy.toml
        if entry:
            candidates.append(Path(entry) / "neuron_port" / "rules" / POLICY_FILE)
    for c in candidates:
        if c.is_file():
            return c
    raise FileNotFoundError(f"neuron-port: cannot find the simulator op policy {POLICY_FILE} (looked in {candidates[0]})")


@lru_cache(maxsize=1)
def load() -> dict:
    with open(policy_path(), "rb") as f:
        return tomllib.load(f)


def native_ops() -> list[str]:
    p = load()["native"]
    return sorted(set(p["ops"]) | set(p.get("assumed", [])))


def no_neff_ops() -> list[str]:
    return sorted(set(load()["native"].get("no_neff", [])))


def release() -> dict:
    r = load()["release"]
    return {k: r[k] for k in ("torch_neuronx", "neuron_sdk", "pytorch") if k in r}


def unsupported_feature(name: str) -> dict:
    return load()["unsupported"]["features"].get(name, {})
