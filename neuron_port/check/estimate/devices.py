"""The device table of the cost model: ``rules/devices.toml`` (installed as ``neuron_port.rules``), each
figure with its source URL, and the dated per-chip-hour prices the user may override."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEVICES_FILE = "devices.toml"


class DeviceTableError(ValueError):
    """devices.toml is missing a figure or has one of the wrong type (the message names the file)."""


@dataclass(frozen=True)
class Price:
    usd: Optional[float]  # per chip-hour (per GPU-hour); None: no published price, the user sets one
    dated: Optional[str]
    source: Optional[str]
    third_party: bool
    derived: Optional[str] = None  # how a price printed nowhere was computed (the Trainium2 default)
    next_update: Optional[str] = None  # when the source's prices change, as it announces

    def to_json(self) -> dict[str, Any]:
        extra = {k: v for k, v in (("derived", self.derived), ("next_update", self.next_update)) if v}
        return {"per_chip_hour_usd": self.usd, "source": self.source, "dated": self.dated,
                "third_party": self.third_party, **extra}


@dataclass(frozen=True)
class Device:
    id: str
    name: str
    kind: str  # trainium | gpu | cpu
    per: str  # core (a logical core, a 1/chip_cores share of a chip) | chip
    peak_tflops: dict[str, float]
    hbm_gbps: float
    hbm_gib: float
    chip_cores: int  # logical cores of the chip this device is (or is part of)
    price_device: str  # the chip whose price applies
    sources: tuple[str, ...] = ()
    price: Price = field(default_factory=lambda: Price(None, None, None, False))
    # a measured rate of one op family, "FAMILY" or "FAMILY_backward" (the host CPU's convolutions, forward and
    # backward; docs/estimate.md "Validation")
    family_peak_tflops: dict[str, float] = field(default_factory=dict)
    link_gbps: float = 0.0  # to the other chips of its node (0: no interconnect figure)
    node_chips: int = 1
    network_gbps: float = 0.0  # its share of the node's network, for groups that span nodes
    # matrix efficiency (efficiency.py): units one rank's GEMM tiles spread over, their tiles, the best
    # fraction of peak a full wave reaches, and the flash-attention kernel's fraction of peak (0: none)
    matmul_units: int = 0
    matmul_tiles: tuple[tuple[int, int, int], ...] = ()
    matmul_ceiling: float = 0.0
    attention_efficiency: float = 0.0
    # the share of the listed peaks the expected time assumes the part sustains: 1 unless the table knows the
    # part's peak only as a range (a power-capped part: the middle of the range; the lower bound keeps the top)
    sustained_compute_share: float = 1.0
    listed: bool = True  # a row of every estimate; False: only when an --instance holds it (the A100 40GB)

    def collective_gbps(self, group_chips: int) -> float:
        """The bandwidth a ring over ``group_chips`` chips moves at: the node's links while the group fits
        one node, else the slower of links and network; 0 when the table has no figure."""
        if group_chips <= self.node_chips or self.network_gbps <= 0:
            return self.link_gbps
        return min(self.link_gbps, self.network_gbps) if self.link_gbps > 0 else self.network_gbps

    def peak(self, dtype: str, family: str = "") -> float:
        """Peak FLOP/s of ``dtype`` (fp32 when the table has no figure for it), or of the family where a
        measured rate of it is higher (either direction): the rate no schedule of the op beats."""
        tflops = self.peak_tflops.get(dtype, self.peak_tflops.get("fp32", 0.0))
        measured = [v for k, v in self.family_peak_tflops.items() if k in (family, f"{family}_backward")]
        return max([tflops, *measured]) * 1e12

    def rate(self, dtype: str, family: str = "", backward: bool = False) -> float:
        """FLOP/s an op of ``family`` runs at before efficiency: the measured rate of the family in that
        direction where the device has one (the CPU's oneDNN convolutions), else ``peak``."""
        key = f"{family}_backward" if backward and f"{family}_backward" in self.family_peak_tflops else family
        if key in self.family_peak_tflops:
            return self.family_peak_tflops[key] * 1e12
        return self.peak(dtype, family)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "kind": self.kind, "per": self.per,
                "peak_tflops": {("fp32" if k == "fp32" else k): v for k, v in self.peak_tflops.items()},
                "hbm_gbps": self.hbm_gbps, "hbm_gib": self.hbm_gib, "sources": list(self.sources),
                "chip_cores": self.chip_cores, "price_device": self.price_device, "link_gbps": self.link_gbps,
                "node_chips": self.node_chips, "network_gbps": self.network_gbps, "matmul_units": self.matmul_units,
                "matmul_tiles": [list(t) for t in self.matmul_tiles], "matmul_ceiling": self.matmul_ceiling,
                "attention_efficiency": self.attention_efficiency,
                "sustained_compute_share": self.sustained_compute_share}

    @classmethod
    def from_json(cls, data: dict[str, Any], price: Price) -> Device:
        return cls(id=data["id"], name=data["name"], kind=data["kind"], per=data.get("per", "chip"),
                   peak_tflops={k: float(v) for k, v in data["peak_tflops"].items()},
                   hbm_gbps=float(data["hbm_gbps"]), hbm_gib=float(data["hbm_gib"]),
                   chip_cores=int(data.get("chip_cores", 1)), price_device=data.get("price_device", data["id"]),
                   sources=tuple(data.get("sources", ())), price=price, link_gbps=float(data.get("link_gbps", 0.0)),
                   node_chips=int(data.get("node_chips", 1)), network_gbps=float(data.get("network_gbps", 0.0)),
                   **_efficiency(data, "report"))


def _efficiency(entry: dict[str, Any], where: str) -> dict[str, Any]:
    """The matrix-efficiency figures of a table entry (or a report's device), checked."""
    tiles = entry.get("matmul_tiles", [])
    if not isinstance(tiles, list) or not all(isinstance(t, list) and len(t) == 3 for t in tiles):
        raise DeviceTableError(f"{where}.matmul_tiles: expected a list of [rows, columns, depth] tiles")
    return {"matmul_units": int(_number(entry.get("matmul_units", 0), f"{where}.matmul_units")),
            "matmul_tiles": tuple(tuple(int(_number(v, f"{where}.matmul_tiles")) for v in t) for t in tiles),
            "matmul_ceiling": _number(entry.get("matmul_ceiling", 0.0), f"{where}.matmul_ceiling"),
            "attention_efficiency": _number(entry.get("attention_efficiency", 0.0), f"{where}.attention_efficiency"),
            "sustained_compute_share": _share(entry.get("sustained_compute_share", 1.0),
                                              f"{where}.sustained_compute_share")}


def _share(value: Any, where: str) -> float:
    share = _number(value, where)
    if not 0.0 < share <= 1.0:
        raise DeviceTableError(f"{where}: expected a share of the peak in (0, 1], got {share!r}")
    return share


def devices_path() -> Path:
    import neuron_port.rules  # the registry package: imports nothing heavy

    return Path(neuron_port.rules.__file__).resolve().parent / DEVICES_FILE


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DeviceTableError(f"{where}: expected a number, got {value!r}")
    return float(value)


def load_devices(path: Optional[Path] = None) -> list[Device]:
    """Every device of the table, chips first as listed; a per-core device takes 1/chip_cores of its chip."""
    path = path or devices_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DeviceTableError(f"{path}: {exc}") from None
    urls: dict[str, str] = data.get("sources", {})
    prices: dict[str, Any] = data.get("prices", {})
    raw: dict[str, Any] = data.get("devices", {})
    out: list[Device] = []
    for device_id, entry in raw.items():
        where = f"{path}: devices.{device_id}"
        chip_id = entry.get("chip", device_id)
        chip = raw.get(chip_id)
        if chip is None:
            raise DeviceTableError(f"{where}: chip {chip_id!r} is not in the table")
        share = 1.0 / int(chip.get("chip_cores", 1)) if entry.get("per") == "core" else 1.0
        try:
            peaks = {k: _number(v, f"{where}.peak_tflops.{k}") * share for k, v in chip["peak_tflops"].items()}
            bandwidth = _number(chip["hbm_gbps"], f"{where}.hbm_gbps") * share
            capacity = _number(chip["hbm_gib"], f"{where}.hbm_gib") * share
            link = _number(chip.get("link_gbps", 0.0), f"{where}.link_gbps") * share
            network = _number(chip.get("network_gbps", 0.0), f"{where}.network_gbps") * share
        except KeyError as exc:
            raise DeviceTableError(f"{where}: missing {exc.args[0]}") from None
        price_entry = prices.get(chip_id, {})
        usd = price_entry.get("usd")
        source = price_entry.get("source")
        price = Price(usd=None if usd is None else _number(usd, f"{path}: prices.{chip_id}.usd"),
                      dated=price_entry.get("dated"), source=urls.get(source, source),
                      third_party=bool(price_entry.get("third_party", False)),
                      derived=price_entry.get("derived"), next_update=price_entry.get("next_update"))
        out.append(Device(id=device_id, name=entry.get("name", device_id), kind=entry.get("kind", "trainium"),
                          per=entry.get("per", "chip"), peak_tflops=peaks, hbm_gbps=bandwidth, hbm_gib=capacity,
                          chip_cores=int(chip.get("chip_cores", 1)), price_device=chip_id,
                          sources=tuple(urls.get(s, s) for s in chip.get("sources", ())), price=price,
                          link_gbps=link, node_chips=int(chip.get("node_chips", 1)), network_gbps=network,
                          listed=bool(entry.get("listed", True)), **_efficiency(chip, f"{path}: devices.{chip_id}")))
    return out
