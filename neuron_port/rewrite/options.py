"""What decides a file's result in a run: the selected rules, the target, unsafe fixes, diffs, the size
limit and the Trainium layout for launch files. Every field but ``want_diff`` is part of the cache key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class RunOptions:
    rule_codes: tuple[str, ...]
    target: str = "neuron"
    unsafe_fixes: bool = False
    want_diff: bool = False
    max_bytes: int = 0  # 0 = no limit
    instance: Optional[str] = None  # --instance / --neuron-cores: GPU counts in launch scripts -> NeuronCores
    neuron_cores: Optional[int] = None
