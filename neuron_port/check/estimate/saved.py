"""The numbers of a saved report's ``estimate`` section, read back (`neuron-port estimate REPORT.json`).

A report is a file anyone can edit, and Python's JSON reader takes ``NaN``, ``Infinity`` and any integer.
The cost model multiplies them through: ``nan FLOP``, a negative host time, and a bare ``NaN`` in the JSON it
prints (not JSON). So every number the recomputation takes is checked here, at its key: counts, FLOPs, bytes
and seconds are finite and not negative, integers fit an int64 (what the simulator counts in). A value that
is not raises ``DamagedSection`` naming its key, e.g. ``estimate.work.work[0].calls: expected a finite number
>= 0, got NaN``.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterator, Mapping, Optional

INT64_MAX = 2**63 - 1
_REQUIRED: Any = object()


class DamagedSection(ValueError):
    """A value of a saved ``estimate`` section the cost model cannot take; the message names its key."""


def shown(value: Any) -> str:
    """``value`` as the report spells it (``NaN``, ``-Infinity``, ``-3``), cut short; a container by its type."""
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:20] + f"... ({len(text)} characters)"


def _value(data: Mapping[str, Any], key: str, where: str, default: Any) -> Any:
    if not isinstance(data, Mapping):
        raise DamagedSection(f"{where}: expected a JSON object, got {shown(data)}")
    if key not in data:
        if default is _REQUIRED:
            raise DamagedSection(f"{where}.{key}: missing")
        return default
    return data[key]


def amount(data: Mapping[str, Any], key: str, where: str, default: Any = _REQUIRED, positive: bool = False) -> Any:
    """A finite number >= 0 (> 0 with ``positive``) at ``data[key]``, as a float; ``default`` when absent
    (null is absent only where ``default`` is None)."""
    value = _value(data, key, where, default)
    if value is default and (default is None or key not in data):
        return value
    try:
        number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except OverflowError:  # an integer beyond a float
        number = math.inf
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        bound = "> 0" if positive else ">= 0"
        raise DamagedSection(f"{where}.{key}: expected a finite number {bound}, got {shown(value)}")
    return number


def count(data: Mapping[str, Any], key: str, where: str, default: Any = _REQUIRED, least: int = 0) -> Any:
    """An integer from ``least`` to the int64 maximum at ``data[key]``; ``default`` when absent (or null where
    ``default`` is None)."""
    value = _value(data, key, where, default)
    if value is default and (default is None or key not in data):
        return value
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a count a writer put as 6.0
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= INT64_MAX:
        raise DamagedSection(f"{where}.{key}: expected an integer from {least} to 2**63-1, got {shown(value)}")
    return value


def counts(data: Mapping[str, Any], key: str, where: str) -> Optional[tuple[int, ...]]:
    """The integers (>= 0) of the list at ``data[key]``; None when it is absent, null or empty."""
    items = _value(data, key, where, None)
    if not items:
        return None
    if not isinstance(items, list):
        raise DamagedSection(f"{where}.{key}: expected a JSON array, got {shown(items)}")
    return tuple(count({f"{key}[{i}]": v}, f"{key}[{i}]", where) for i, v in enumerate(items))


def objects(data: Mapping[str, Any], key: str, where: str, required: bool = False) -> Iterator[tuple[str, Mapping]]:
    """``(its key path, the object)`` for each object of the list at ``data[key]`` (none when absent)."""
    items = _value(data, key, where, _REQUIRED if required else [])
    if not isinstance(items, list):
        raise DamagedSection(f"{where}.{key}: expected a JSON array, got {shown(items)}")
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise DamagedSection(f"{where}.{key}[{i}]: expected a JSON object, got {shown(item)}")
        yield f"{where}.{key}[{i}]", item


def text(data: Mapping[str, Any], key: str, where: str, default: Any = _REQUIRED) -> Optional[str]:
    """A string at ``data[key]`` (``default`` when absent or, where ``default`` is None, null)."""
    value = _value(data, key, where, default)
    if value is default and (default is None or key not in data):
        return value
    if not isinstance(value, str):
        raise DamagedSection(f"{where}.{key}: expected a string, got {shown(value)}")
    return value
