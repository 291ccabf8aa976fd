"""The device table of docs/estimate.md ("Devices") is a copy of rules/devices.toml for the reader: the
same devices in the same order with the same figures (a per-core device at its share of the chip), and
the shipped prices named in the text."""

from __future__ import annotations

import re

from conftest import REPO
from neuron_port.check.estimate.devices import load_devices

DOC = REPO / "docs" / "estimate.md"
HEADER = "| id | BF16 TFLOPS | FP32 TFLOPS | HBM GB/s | HBM GiB | source |"


def device_rows() -> list[list[str]]:
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(HEADER) + 2  # after the header and its |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def figure(cell: str) -> float:
    """The number a cell starts with (``74.5 (80 GB)`` -> 74.5)."""
    match = re.match(r"^\d+(\.\d+)?", cell)
    assert match, cell
    return float(match.group(0))


def test_the_docs_device_table_has_the_figures_of_devices_toml():
    devices = load_devices()
    rows = device_rows()
    assert [row[0] for row in rows] == [d.id for d in devices]
    for row, device in zip(rows, devices):
        assert len(row) == 6 and row[5], row
        assert [figure(cell) for cell in row[1:5]] == [device.peak_tflops["bf16"], device.peak_tflops["fp32"],
                                                       device.hbm_gbps, device.hbm_gib], device.id


def test_the_docs_name_every_shipped_price():
    text = DOC.read_text(encoding="utf-8")
    for device in load_devices():
        if device.price.usd is not None:
            assert f"${device.price.usd}" in text, device.id
