"""The user's choices for the estimate: ``[tool.neuron-port.estimate]`` in pyproject.toml, then flags.

    [tool.neuron-port.estimate]
    tokens-per-step = 4096             # or "embedding", "embedding@model.py:115", "embedding@transformer.wte"
    cores = 4
    instances = ["trn2.48xlarge", "p5.48xlarge"]   # rows of those chips on those instances (NAME or NAME:N)
    prices = { trn2-chip = 1.50 }      # USD per chip-hour (H100: per GPU-hour)
    dispatch-seconds-per-op = 3e-05    # any assumption of docs/estimate.md, by its name with dashes
"""

from __future__ import annotations

import math
import re
import sys
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from neuron_port.check.estimate import saved
from neuron_port.check.estimate.assumptions import DEFAULTS
from neuron_port.check.estimate.devices import load_devices
from neuron_port.check.estimate.sizing import parse_instances
from neuron_port.config import ConfigError, at, key_line

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TABLE = "[tool.neuron-port.estimate]"
ASSUMPTION_KEYS = {a.key for a in DEFAULTS}
KEYS = {"tokens-per-step", "cores", "instances", "prices", "compare"} | ASSUMPTION_KEYS
# counted from the recorded shapes: every embedding lookup, or the one at FILE:LINE or in MODULE
TOKENS_SPEC = re.compile(r"^embedding(@(?P<where>[^@\s]+))?$")
TOKENS_FORMS = "a positive number, embedding, embedding@FILE:LINE or embedding@MODULE"
Tokens = Union[float, str]  # a number, or a spec resolved against the run's embedding lookups


@dataclass(frozen=True)
class Measured:
    """``--measured DEVICE=SECONDS[@INSTANCE]``: the step time the user measured on a GPU of the table."""

    device: str
    seconds: float
    instance: Optional[str] = None  # NAME or NAME:N: the GPUs it ran on (sizes that row, as --instance)

    @property
    def spec(self) -> str:
        return f"{self.device}={self.seconds:g}" + (f"@{self.instance}" if self.instance else "")


MEASURED_FORM = "DEVICE=SECONDS[@INSTANCE], e.g. h100-sxm=0.216@p5.48xlarge"


def parse_measured(text: str, devices: Mapping[str, str]) -> Measured:
    """``DEVICE=SECONDS[@INSTANCE]`` of ``--measured`` against ``devices`` (chip id -> kind); ValueError
    naming the option says what is wrong."""
    from neuron_port.check.estimate.sizing import parse_instance, refuse_trn1

    where = f"--measured {text!r}"
    device, sep, rest = str(text).partition("=")
    device = device.strip()
    seconds_text, at_sign, instance = rest.partition("@")
    if not sep or not seconds_text.strip() or (at_sign and not instance.strip()):
        raise ValueError(f"{where}: expected {MEASURED_FORM}")
    refuse_trn1("--measured", text, device)
    if device not in devices:
        raise ValueError(f"{where}: unknown device {device!r} (GPUs of the table: "
                         f"{', '.join(sorted(d for d, k in devices.items() if k == 'gpu'))})")
    if devices[device] != "gpu":
        raise ValueError(f"{where}: {device} is not a GPU; --measured takes the step time you measured on a GPU, "
                         "to calibrate the Trainium rows by the model's error there")
    try:
        value = positive(float(seconds_text), where)
    except ValueError:
        raise ValueError(f"{where}: {seconds_text.strip()!r} is not a step time in seconds (a finite number > 0)") \
            from None
    spec = None
    if at_sign:
        try:
            sized = parse_instance(instance.strip())
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if sized.device != device:
            raise ValueError(f"{where}: {sized.name} holds {sized.device}, not {device}")
        spec = sized.spec
    return Measured(device, value, spec)


def parse_compare(value: Any, where: str = "--compare") -> str:
    from neuron_port.check.estimate.sizing import COMPARE

    if value not in COMPARE:
        raise ValueError(f"{where} {value!r}: expected {' or '.join(COMPARE)}")
    return str(value)


@dataclass(frozen=True)
class EstimateOptions:
    cores: Optional[int] = None  # None: one per process of the run
    tokens_per_step: Optional[Tokens] = None
    prices: dict[str, float] = field(default_factory=dict)  # chip id -> USD per chip-hour
    assumptions: dict[str, float] = field(default_factory=dict)  # name -> value
    instances: tuple[str, ...] = ()  # NAME or NAME:N (sizing.py): rows of those chips on those instances
    compare: Optional[str] = None  # sizing.COMPARE; None: like-for-like
    measured: Optional[Measured] = None  # --measured: the user's GPU step (calibrate_rows.py)

    def updated(self, other: EstimateOptions) -> EstimateOptions:
        """``other``'s values where it sets them."""
        return replace(self, cores=other.cores or self.cores,
                       tokens_per_step=other.tokens_per_step or self.tokens_per_step,
                       prices={**self.prices, **other.prices}, assumptions={**self.assumptions, **other.assumptions},
                       instances=other.instances or self.instances, compare=other.compare or self.compare,
                       measured=other.measured or self.measured)

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> EstimateOptions:
        """The options a saved ``estimate`` section was made with; ``saved.DamagedSection`` names the key of
        a value no flag or pyproject.toml could have set (NaN, Infinity, a negative or zero price)."""
        where = "estimate"
        prices = {}
        for at, row in saved.objects(section, "per_device", where):
            price = row.get("price") or {}
            if price.get("source") == "user" and price.get("per_chip_hour_usd") is not None:
                device = next((d for d in section.get("devices", []) if d.get("id") == row.get("device")), {})
                prices[device.get("price_device", row.get("device"))] = saved.amount(
                    price, "per_chip_hour_usd", f"{at}.price", positive=True)
        steps = section.get("steps", {})
        spec = (steps.get("tokens_from") or {}).get("spec")  # re-resolved: the same lookups, the same number
        tokens = spec if isinstance(spec, str) and spec else steps.get("tokens_per_step")
        if tokens is not None and not isinstance(tokens, str):
            tokens = saved.amount(steps, "tokens_per_step", f"{where}.steps", positive=True)
        measured, calibration = None, section.get("calibration")
        if isinstance(calibration, dict) and isinstance(calibration.get("device"), str):
            measured = Measured(calibration["device"], saved.amount(calibration, "measured_seconds",
                                                                    f"{where}.calibration", positive=True),
                                calibration.get("instance"))
        compare = (section.get("comparison") or {}).get("basis")
        return cls(cores=saved.count(section, "cores", where, None, least=1), tokens_per_step=tokens, prices=prices,
                   measured=measured, compare=compare if compare in ("like-for-like", "cores") else None,
                   assumptions={str(a["name"]): saved.amount(a, "value", at, positive=True)
                                for at, a in saved.objects(section, "assumptions", where)},
                   instances=tuple(str(i["spec"]) for _, i in saved.objects(section, "instances", where)))


def positive(value: Any, what: str) -> float:
    """``value`` as a float when it is a finite number > 0 (``inf`` too is refused: a price or an assumption of
    Infinity makes every time or dollar figure inf or NaN); ValueError naming ``what`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{what}: expected a finite number > 0, got {value!r}")
    return float(value)


def parse_tokens(value: Any) -> Tokens:
    """A number of tokens per step (a positive number, or its text) or an ``embedding`` spec (module
    docstring); ValueError says what is wrong."""
    if isinstance(value, str):
        text = value.strip()
        if TOKENS_SPEC.match(text):
            return text
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"expected {TOKENS_FORMS}, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise ValueError(f"expected {TOKENS_FORMS}, got {value!r}")
    return float(value)


def parse_price(text: str, chips: set[str]) -> tuple[str, float]:
    """``DEVICE=USD_PER_CHIP_HOUR`` of ``--price``; ValueError says what is wrong."""
    from neuron_port.check.estimate.sizing import refuse_trn1

    device, sep, usd = text.partition("=")
    device = device.strip()
    refuse_trn1("--price", text, device)
    if not sep:
        raise ValueError(f"--price {text!r}: expected DEVICE=USD_PER_CHIP_HOUR, e.g. trn2-chip=1.5")
    if device not in chips:
        raise ValueError(f"--price {text!r}: unknown device {device!r} (prices are per chip: "
                         f"{', '.join(sorted(chips))})")
    try:
        value = float(usd)
    except ValueError:
        raise ValueError(f"--price {text!r}: {usd!r} is not a number") from None
    return device, positive(value, f"--price {text!r}")


def from_pyproject(source: Optional[str], chips: set[str]) -> EstimateOptions:
    """The options of ``[tool.neuron-port.estimate]`` in ``source`` (the settings' pyproject.toml);
    ConfigError names the file, line and key of a bad value."""
    if not source:
        return EstimateOptions()
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
        table = tomllib.loads(text).get("tool", {}).get("neuron-port", {}).get("estimate")
    except (OSError, tomllib.TOMLDecodeError, AttributeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if table is None:
        return EstimateOptions()

    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{at(path, key_line(text, key, after=TABLE))}: {TABLE} {key}: {problem}")

    if not isinstance(table, dict):
        raise ConfigError(f"{path}: {TABLE} must be a table")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise fail(unknown[0], f"unknown key (known: {', '.join(sorted(KEYS))})")
    options: dict[str, Any] = {"prices": {}, "assumptions": {}}
    try:
        for key, value in table.items():
            if key == "cores":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f"expected a positive integer, got {value!r}")
                options["cores"] = value
            elif key == "tokens-per-step":
                options["tokens_per_step"] = parse_tokens(value)
            elif key == "instances":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError('expected a list of instance names, e.g. ["trn2.48xlarge", "p5.48xlarge:2"]')
                options["instances"] = tuple(one.spec for one in parse_instances(value))
            elif key == "compare":
                if value not in ("like-for-like", "cores"):
                    raise ValueError(f"expected like-for-like or cores, got {value!r}")
                options["compare"] = value
            elif key == "prices":
                if not isinstance(value, dict):
                    raise ValueError("expected a table of DEVICE = USD_PER_CHIP_HOUR")
                for device, usd in value.items():
                    if device not in chips:
                        raise ValueError(f"unknown device {device!r} (prices are per chip: {', '.join(sorted(chips))})")
                    options["prices"][device] = positive(usd, device)
            else:
                options["assumptions"][key.replace("-", "_")] = positive(value, "value")
    except ValueError as exc:
        raise fail(key, str(exc)) from None
    return EstimateOptions(**options)


# The flags of `check` (neuron_port/commands/estimate.py sets them around the command; api callers leave it unset).
CLI_OPTIONS: ContextVar[Optional[EstimateOptions]] = ContextVar("neuron_port_estimate_flags", default=None)


def chip_ids() -> set[str]:
    return {d.price_device for d in load_devices()}


def estimate_options(source: Optional[str]) -> EstimateOptions:
    """[tool.neuron-port.estimate] of the settings' pyproject.toml, with the flags of `check` over it."""
    base = from_pyproject(source, chip_ids())
    flags = CLI_OPTIONS.get()
    return base.updated(flags) if flags is not None else base
