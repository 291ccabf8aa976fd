"""Load the simulator's op policy (``rules/op_policy.toml``, installed as ``neuron_port.rules``)."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, installed as tomli (a dependency there)
    import tomli as tomllib

POLICY_FILE = "op_policy.toml"
LIMITATIONS_FILE = "op_limitations.toml"
COMPLEX_ENV = "TORCH_NEURONX_COMPLEX_DECOMPOSE"


def policy_path(name: str = POLICY_FILE) -> Path:
    here = Path(__file__).resolve().parent
    candidates = [here.parent / "rules" / name]  # source checkout / editable install
    for entry in sys.path:  # installed wheel: neuron_port/rules/op_policy.toml
        if entry:
            candidates.append(Path(entry) / "neuron_port" / "rules" / name)
    for c in candidates:
        if c.is_file():
            return c
    raise FileNotFoundError(f"neuron-port: cannot find the simulator op policy {name} (looked in {candidates[0]})")


@lru_cache(maxsize=1)
def load() -> dict:
    with open(policy_path(), "rb") as f:
        return tomllib.load(f)


@lru_cache(maxsize=1)
def limitations() -> list[dict]:
    """The documented TorchNeuron limitations the OpInfo sweep may hit (``rules/op_limitations.toml``)."""
    with open(policy_path(LIMITATIONS_FILE), "rb") as f:
        return list(tomllib.load(f).get("limitation", []))


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


def complex_decompose(environ=None, torch_version: str | None = None) -> bool:
    """TORCH_NEURONX_COMPLEX_DECOMPOSE as TorchNeuron 2.33 reads it: on by default for PyTorch >= 2.13
    (the [complex] section of the policy), off with 0 / false / no / off."""
    import os

    c = load().get("complex", {})
    value = (environ if environ is not None else os.environ).get(c.get("env", COMPLEX_ENV))
    if value is not None and value.strip() != "":
        return value.strip().lower() not in ("0", "false", "no", "off")
    if torch_version is None:
        import torch

        torch_version = torch.__version__
    want = tuple(int(x) for x in str(c.get("default_on_from_pytorch", "2.13")).split("."))
    have = tuple(int(x) for x in torch_version.split("+")[0].split(".")[:2])
    return have >= want


def complex_decomposed_ops() -> tuple[list[str], list[str]]:
    """(ops whose complex signatures are decomposed into real ops, the views among them)."""
    c = load().get("complex", {})
    return sorted(set(c.get("decomposed", []))), sorted(set(c.get("decomposed_views", [])))


def memory_format_note_ops() -> list[str]:
    """Native ops whose CPU kernel allocates the result in suggest_memory_format(input): run, and noted."""
    return sorted(set(load().get("memory_format", {}).get("suggested_format_ops", [])))
