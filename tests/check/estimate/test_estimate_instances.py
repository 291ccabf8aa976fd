"""Device rows sized by instance (check/estimate/sizing.py, rules/instances.toml): `--instance trn2.48xlarge`
is 16 Trainium2 chips, `p5.48xlarge` 8 H100, `p4d.24xlarge` 8 A100 40GB (a row only when asked for)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from neuron_port.check.estimate.devices import load_devices
from neuron_port.check.estimate.options import EstimateOptions, from_pyproject
from neuron_port.check.estimate.section import estimate_from_work, recompute
from neuron_port.check.estimate.sizing import parse_instance, parse_instances
from neuron_port.check.estimate.stepwork import StepWork, WorkItem
from neuron_port.config import ConfigError
from neuron_port.rules.instances import load_instances

MB = 1_000_000


def work() -> StepWork:
    """One process of a data-parallel job: a bf16 GEMM step with a 400 MB parameter list (no collective
    recorded: the all-reduce is assumed)."""
    mm = WorkItem("aten::mm", "matmul", "bf16", 10, 2e15, 3e9, gemm=(1, 8192, 8192, 8192))
    return StepWork(clock="optimizer_step", measured=6, processes=1, items=[mm], parameter_bytes=400 * MB,
                    peak_bytes=30 * 2**30)


def rows(section: dict) -> dict:
    return {r["device"]: r for r in section["per_device"]}


def test_every_instance_names_a_chip_of_the_device_table_with_sourced_figures():
    chips = {d.price_device: d for d in load_devices()}
    for name, instance in load_instances().items():
        assert instance.device in chips, name
        assert instance.source.startswith("https://"), name
        device = chips[instance.device]
        assert instance.kind == ("gpu" if device.kind == "gpu" else "trainium"), name
        per_chip = 1 if instance.kind == "gpu" else 4  # a GPU is one rank; a Trainium chip 4 logical cores
        assert instance.cores == per_chip * instance.chips, name
    assert load_instances()["trn2.48xlarge"].total_chips == 16
    assert load_instances()["p5.48xlarge"].total_chips == 8


def test_an_instance_sizes_the_rows_of_its_chip_and_no_other():
    section = estimate_from_work(work(), EstimateOptions(instances=("trn2.48xlarge", "p5.48xlarge"), compare="cores"))
    by_id = rows(section)
    assert "a100-40gb-sxm" not in by_id  # listed only when an instance holds it
    assert by_id["trn2-chip"]["price"]["chips"] == 16 and by_id["trn2-chip"]["collectives"]["ranks"] == 64
    assert by_id["trn2-lnc2-core"]["collectives"]["ranks"] == 64 and by_id["trn2-lnc2-core"]["price"]["chips"] == 16
    assert by_id["h100-sxm"]["price"]["chips"] == 8 and by_id["h100-sxm"]["collectives"]["ranks"] == 8
    assert by_id["trn3-chip"]["collectives"]["ranks"] == 1 and "instance" not in by_id["trn3-chip"]  # --cores
    assert by_id["trn2-chip"]["instance"]["spec"] == "trn2.48xlarge"
    # the instance is the same job as --cores 64 on the Trainium2 rows, and --cores 8 on the H100 row
    cores64 = rows(estimate_from_work(work(), EstimateOptions(cores=64, compare="cores")))
    cores8 = rows(estimate_from_work(work(), EstimateOptions(cores=8, compare="cores")))
    assert by_id["trn2-chip"]["step_seconds"] == cores64["trn2-chip"]["step_seconds"]
    assert by_id["h100-sxm"]["step_seconds"] == cores8["h100-sxm"]["step_seconds"]
    # 64 cores are one trn2.48xlarge: the gradient all-reduce stays on NeuronLink (1,024 GB/s a chip)
    assert by_id["trn2-chip"]["collectives"]["gbps"] == pytest.approx(1024.0)


def test_p4d_brings_its_a100_40gb_row_with_its_capacity_block_price(report_schema):
    section = estimate_from_work(work(), EstimateOptions(instances=("p4d.24xlarge:2",), tokens_per_step=1e6))
    jsonschema.validate(json.loads(json.dumps(section)), report_schema["properties"]["estimate"])
    row = rows(section)["a100-40gb-sxm"]
    assert row["instance"] == {**row["instance"], "count": 2, "chips": 16}
    assert row["memory"]["hbm_bytes"] == int(37.25 * 2**30) and row["memory"]["fits"] is True
    step = row["step_seconds"]["expected"]
    assert row["price"]["per_step_usd"] == pytest.approx(step * 1.844 / 3600 * 16)  # $14.75/h per 8 GPUs
    assert row["price"]["per_million_tokens_usd"] == pytest.approx(row["price"]["per_step_usd"])  # 1e6 tokens
    # a saved section recomputed without flags keeps its instances
    again = recompute(section, EstimateOptions())
    assert again["instances"] == section["instances"] and rows(again)["a100-40gb-sxm"] == row


def test_bad_instance_specs_say_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match=r"unknown instance \(known: trn2.3xlarge, "):
        parse_instance("p9.96xlarge")
    with pytest.raises(ValueError, match="not a whole number"):
        parse_instance("trn2.48xlarge:two")
    with pytest.raises(ValueError, match="both size trn2-chip"):
        parse_instances(["trn2.3xlarge", "trn2.48xlarge"])
    assert parse_instance("TRN2.48xlarge:3").spec == "trn2.48xlarge:3" and parse_instance("p5.48xlarge:3").chips == 24
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.neuron-port.estimate]\ncores = 4\ninstances = ["trn2.48xlarge", "p7"]\n')
    with pytest.raises(ConfigError, match=r"pyproject.toml:3: .*instances: --instance 'p7': unknown instance"):
        from_pyproject(str(pyproject), {"trn2-chip"})
    pyproject.write_text('[tool.neuron-port.estimate]\ninstances = ["p5.48xlarge:2"]\n')
    assert from_pyproject(str(pyproject), {"trn2-chip"}).instances == ("p5.48xlarge:2",)


def test_the_cli_sizes_rows_by_instance_and_refuses_an_unknown_one(tmp_path, cli):
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"estimate": estimate_from_work(work(), EstimateOptions())}))
    result = cli("estimate", str(report), "--instance", "trn2.48xlarge", "--instance", "p5.48xlarge",
                 "--output-format", "json")
    assert result.returncode == 0, result.stderr
    by_id = rows(json.loads(result.stdout))
    assert by_id["trn2-chip"]["price"]["chips"] == 16 and by_id["h100-sxm"]["price"]["chips"] == 8
    text = cli("estimate", str(report), "--instance", "trn2.48xlarge", env={"COLUMNS": "140"})
    assert "trn2-chip x16 (trn2.48xlarge)" in text.stdout and "instances: trn2.48xlarge = 16 trn2-chip" in text.stdout
    bad = cli("estimate", str(report), "--instance", "p9.96xlarge")
    assert bad.returncode == 2 and "--instance 'p9.96xlarge': unknown instance" in bad.stderr
