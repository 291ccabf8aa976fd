"""The roofline model on a synthetic op stream: an events file as the simulator writes it, read by the
events reader, turned into per-step work and timed on a device table written here, against the
formulas of docs/estimate.md computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_port.check.estimate import EstimateOptions, estimate_from_work, recompute
from neuron_port.check.estimate.assumptions import assumptions
from neuron_port.check.estimate.devices import DeviceTableError, load_devices
from neuron_port.check.estimate.model import estimate
from neuron_port.check.estimate.options import from_pyproject, parse_price
from neuron_port.check.estimate.work import per_step_calls, step_work
from neuron_port.check.events import parse_events_file
from neuron_port.config import ConfigError

TABLE = """
[sources]
t = "https://example.invalid/table"
[devices.test-chip]
name = "test chip"
kind = "trainium"
chip_cores = 2
per = "chip"
peak_tflops = { bf16 = 2.0, fp32 = 1.0 }
hbm_gbps = 100.0
hbm_gib = 1.0
sources = ["t"]
[devices.test-core]
name = "half a test chip"
chip = "test-chip"
per = "core"
[prices.test-chip]
usd = 36.0
dated = "2026-01-01"
source = "t"
third_party = true
"""


def events(lines: list[dict]) -> str:
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def synthetic_run() -> str:
    """10 optimizer steps: a matmul seen at step 0 (20 calls), an add first seen at step 5 (10 calls), an
    elementwise op after the last step (generation: outside the steps), a fallback with 1 s of host time."""
    sig_mm = ["bf16[1000,1000]", "bf16[1000,1000]"]  # 2e9 FLOPs, 6e6 bytes: compute bound
    sig_add = ["f32[1000000]", "f32[1000000]", "1"]  # 1e6 FLOPs, 12e6 bytes: memory bound
    return events([
        {"kind": "process", "schema": 1, "pid": 1, "status": "exited"},
        {"kind": "op", "op": "aten::mm", "policy": "native", "calls": 20, "unique_signatures": 1},
        {"kind": "eager_compile", "op": "aten::mm", "signature": sig_mm, "calls": 20,
         "first_seen": {"optimizer_step": 0, "forward": 1, "seq": 0}},
        {"kind": "eager_compile", "op": "aten::add.Tensor", "signature": sig_add, "calls": 10,
         "first_seen": {"optimizer_step": 5, "forward": 6, "seq": 1}},
        {"kind": "eager_compile", "op": "aten::mul.Tensor", "signature": sig_add, "calls": 7,
         "first_seen": {"optimizer_step": 10, "forward": 11, "seq": 2}},
        {"kind": "fallback", "op": "aten::multinomial", "calls": 10, "host_seconds": 1.0, "sites": [],
         "signatures": [{"signature": ["f32[1000]", "1"], "calls": 10,
                         "first_seen": {"optimizer_step": 0, "forward": 1, "seq": 3}}]},
        {"kind": "summary", "optimizer_steps": 10, "forwards": 10, "eager_compiles": 3,
         "peak_allocated_bytes": 2**29, "complete": True},
    ])


@pytest.fixture
def devices(tmp_path):
    path = tmp_path / "devices.toml"
    path.write_text(TABLE)
    return load_devices(path)


def test_per_step_calls_follow_the_steady_state_rule():
    assert per_step_calls(20, 0, 10) == 2.0  # seen in warm-up: spread over all steps
    assert per_step_calls(10, 5, 10) == 10 / 8  # first seen in the steady state: calls / steady steps
    assert per_step_calls(7, 10, 10) == 0.0  # after the last step
    assert per_step_calls(6, None, 3) == 2.0  # no first sighting: total / steps
    assert per_step_calls(6, 1, 2) == 3.0  # no steady step: the mean over the measured ones


def test_roofline_on_a_synthetic_op_stream(tmp_path, devices):
    process = parse_events_file(tmp_path / "e.jsonl", synthetic_run())
    work = step_work([process])
    assert (work.clock, work.measured, work.steady, work.peak_bytes) == ("optimizer_step", 10, 8, 2**29)
    assert work.outside_steps_calls == 7
    assert work.fallback_calls == 1.0 and work.fallback_host_seconds == pytest.approx(0.1)
    assert work.fallback_copy_bytes == 4 * 1000 * 2  # its input to the host and the result back

    a = assumptions({"dispatch_seconds_per_op": 1e-3, "compute_fraction": 0.5, "memory_fraction": 0.25,
                     "host_link_gbps": 1.0, "host_transfer_seconds": 0.01})
    section = estimate(work, devices, a, cores=1, tokens_per_step=1000)
    core = next(r for r in section["per_device"] if r["device"] == "test-core")
    # the core: 1 bf16 TFLOP/s, 50 GB/s (half the chip)
    mm = max(2 * 2e9 / 1e12, 2 * 6e6 / 50e9)  # 2 calls per step, compute bound: 4 ms
    add = max(10 / 8 * 1e6 / 0.5e12, 10 / 8 * 12e6 / 50e9)  # fp32 peak 0.5 TFLOP/s: memory bound
    dispatch = (2 + 10 / 8) * 1e-3
    fallback = 0.1 + 8000 / 1e9 + 1 * 0.01
    # the lower bound: every FLOP at its dtype's peak (no optimizer list: no unavoidable bytes counted)
    assert core["step_seconds"]["lower"] == pytest.approx(2 * 2e9 / 1e12 + 10 / 8 * 1e6 / 0.5e12)
    assert mm + add > core["step_seconds"]["lower"]
    device = 4e-3 / 0.5 + (10 / 8 * 12e6 / 50e9) / 0.25
    # an asynchronous device: the host's dispatch overlaps the device; the fallback's round trip does not
    expected = max(device, dispatch) + fallback
    assert core["step_seconds"]["expected"] == pytest.approx(expected)
    assert core["compiled_step_seconds"]["expected"] == pytest.approx(device + fallback)
    assert core["memory"] == {"peak_bytes": 2**29, "hbm_bytes": 2**29, "fits": True, "per_rank": True,
                              "sharding": "none"}  # half of 1 GiB
    # price: 36 USD per chip-hour, the core is half a chip
    assert core["price"]["per_step_usd"] == pytest.approx(expected * 36 / 3600 / 2)
    assert core["price"]["per_million_tokens_usd"] == pytest.approx(expected * 36 / 3600 / 2 / 1000 * 1e6)
    assert core["compile"] == {"neff": True, "eager_neffs": 3, "graphs": 0, "first_run_seconds": 9.0,
                               "warm_cache_seconds": pytest.approx(0.15), "steady_compiles_per_step": 0.0,
                               "steady_seconds_per_step": 0.0}
    chip = next(r for r in section["per_device"] if r["device"] == "test-chip")
    assert chip["step_seconds"]["lower"] < core["step_seconds"]["lower"]  # twice the peak, two issuing cores
    [mm_row] = [r for r in section["per_step"]["by_family"] if r["family"] == "matmul"]
    assert mm_row == {"family": "matmul", "calls": 2.0, "flops": 4e9, "bytes": 12e6, "flops_by_dtype": {"bf16": 4e9}}


def test_recompute_from_the_saved_section_keeps_what_is_not_overridden(tmp_path):
    process = parse_events_file(tmp_path / "e.jsonl", synthetic_run())
    section = estimate_from_work(step_work([process]), EstimateOptions(tokens_per_step=1000.0,
                                                                       prices={"trn2-chip": 2.0}, compare="cores"))
    saved = json.loads(json.dumps(section))  # what a report file holds
    again = recompute(saved, EstimateOptions())
    assert again == section
    cheaper = recompute(saved, EstimateOptions(prices={"trn2-chip": 1.0}, cores=2))
    row = next(r for r in cheaper["per_device"] if r["device"] == "trn2-lnc2-core")
    assert cheaper["cores"] == 2 and cheaper["steps"]["tokens_per_step"] == 1000.0
    assert row["price"]["per_step_usd"] == pytest.approx(row["step_seconds"]["expected"] * 1.0 / 3600 * 2 / 4)


def test_bad_input_names_the_file_and_line(tmp_path):
    assert parse_price("trn2-chip=1.5", {"trn2-chip"}) == ("trn2-chip", 1.5)
    for bad in ("trn2-chip", "nope=1", "trn2-chip=x", "trn2-chip=-1"):
        with pytest.raises(ValueError, match="--price"):
            parse_price(bad, {"trn2-chip"})
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.neuron-port.estimate]\ncores = 2\nprices = { trn2-chip = "cheap" }\n')
    with pytest.raises(ConfigError, match=r"pyproject.toml:3: .*prices.*trn2-chip"):
        from_pyproject(str(pyproject), {"trn2-chip"})
    pyproject.write_text("[tool.neuron-port.estimate]\ntokens-per-step = 4096\ndispatch-seconds-per-op = 3e-5\n")
    options = from_pyproject(str(pyproject), {"trn2-chip"})
    assert options.tokens_per_step == 4096 and options.assumptions == {"dispatch_seconds_per_op": 3e-5}
    broken = tmp_path / "devices.toml"
    broken.write_text(TABLE.replace("hbm_gbps = 100.0", 'hbm_gbps = "fast"'))
    with pytest.raises(DeviceTableError, match=r"devices.toml: devices.test-chip.hbm_gbps"):
        load_devices(broken)


def test_shipped_table_has_every_device_with_sources():
    devices = {d.id: d for d in load_devices()}
    assert {"trn2-lnc2-core", "trn2-chip", "trn3-lnc2-core", "trn3-chip", "h100-sxm"} <= set(devices)
    assert devices["trn2-lnc2-core"].peak("bf16") == pytest.approx(667e12 / 4)
    assert devices["trn3-chip"].hbm_gbps == 4900.0
    assert all(d.sources and all(s.startswith("https://") for s in d.sources) for d in devices.values())
    assert devices["h100-sxm"].price.usd is not None and devices["h100-sxm"].price.dated
    # AWS prints none: a default derived from the Capacity Blocks page of 2026-10-20 (37% of an H100 hour)
    trn2 = devices["trn2-chip"].price
    assert trn2.usd == pytest.approx(0.37 * devices["h100-sxm"].price.usd, abs=0.005)
    assert trn2.derived and trn2.dated == "2026-10-20" and trn2.next_update


def test_more_cores_shrink_the_work_not_the_per_op_costs(tmp_path, devices):
    """Data parallel: every core runs one process's whole op stream on its share of the data, so dispatch
    and host round trips stay per step whatever the core count; the compute halves on two cores, and a
    two-core chip running one process's step costs what two logical cores do."""
    work = step_work([parse_events_file(tmp_path / "e.jsonl", synthetic_run())])
    a = assumptions({"dispatch_seconds_per_op": 1e-3, "compute_fraction": 1.0, "memory_fraction": 1.0,
                     "host_link_gbps": 1.0, "host_transfer_seconds": 0.01})
    one, two = (estimate(work, devices, a, cores=n) for n in (1, 2))

    def row(section, device):
        return next(r for r in section["per_device"] if r["device"] == device)

    for section in (one, two):
        for device in ("test-core", "test-chip"):
            assert row(section, device)["seconds_by_family"]["dispatch"] == pytest.approx((2 + 10 / 8) * 1e-3)
    assert row(two, "test-core")["seconds_by_family"]["matmul"] == pytest.approx(
        row(one, "test-core")["seconds_by_family"]["matmul"] / 2)
    # the fallback: half the host time and copies per core, every round trip
    assert row(two, "test-core")["seconds_by_family"]["fallback"] == pytest.approx((0.1 + 8000 / 1e9) / 2 + 0.01)
    assert row(one, "test-chip")["step_seconds"]["lower"] == pytest.approx(row(two, "test-core")["step_seconds"]["lower"])


def test_a_fallback_without_measured_host_time_is_modelled_from_its_work(tmp_path, devices):
    """A shape-only run measures no host time (nothing ran): the fallback's kernel costs its FLOPs at
    host_fallback_gflops and its bytes at host_fallback_gbps instead."""
    lines = [json.loads(line) for line in synthetic_run().splitlines()]
    for line in lines:
        if line["kind"] == "fallback":
            del line["host_seconds"]
    process = parse_events_file(tmp_path / "e.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n")
    work = step_work([process])
    assert work.fallback_host_seconds is None
    assert work.fallback_modeled_bytes == work.fallback_copy_bytes == 4 * 1000 * 2
    common = {"host_link_gbps": 1.0, "host_transfer_seconds": 0.01}
    a = assumptions({"host_fallback_gflops": 1.0, "host_fallback_gbps": 2.0, **common})
    core = next(r for r in estimate(work, devices, a, cores=1, tokens_per_step=None)["per_device"]
                if r["device"] == "test-core")
    free = assumptions({"host_fallback_gflops": 1e30, "host_fallback_gbps": 1e30, **common})  # no modelled time
    baseline = next(r for r in estimate(work, devices, free, cores=1, tokens_per_step=None)["per_device"]
                    if r["device"] == "test-core")
    modelled = work.fallback_modeled_flops / 1e9 + 8000 / 2e9
    assert core["step_seconds"]["expected"] - baseline["step_seconds"]["expected"] == pytest.approx(modelled)
