"""The estimate end to end, as a user runs it: `check` on the GPT trainer fixture shows the Estimate panel
and saves the report; `neuron-port estimate REPORT.json --price trn2-chip=X` recomputes it, and the price per
step matches a recomputation by hand from the saved JSON (docs/estimate.md, "Formulas")."""

from __future__ import annotations

import json
import math
import shutil

import jsonschema
import pytest

from conftest import FIXTURES

pytestmark = pytest.mark.slow


def by_hand(doc: dict, device_id: str, price: float) -> tuple[float, float]:
    """(expected step seconds, USD per step) of ``device_id`` from the saved section's work, devices and
    assumptions, with the formulas of docs/estimate.md."""
    section = doc["estimate"]
    a = {x["name"]: x["value"] for x in section["assumptions"]}
    device = next(d for d in section["devices"] if d["id"] == device_id)
    assert device["per"] == "core"
    cores = section["cores"]
    share = 1 / cores
    work = section["work"]
    step = 0.0
    eager = 0.0
    for item in work["work"]:
        peak = device["peak_tflops"].get(item["dtype"], device["peak_tflops"]["fp32"]) * 1e12
        step += max(item["flops"] * share / (peak * a["compute_fraction"]),
                    item["bytes"] * share / (device["hbm_gbps"] * 1e9 * a["memory_fraction"]))
        if not item["compiled"] and item["family"] != "fallback":
            eager += item["calls"]
    # an asynchronous device: the host issues ahead, the step is the slower of host and device
    step = max(step, eager * share * a["dispatch_seconds_per_op"])
    step += share * ((work["fallback_host_seconds"] or 0.0) + work["fallback_copy_bytes"] / (a["host_link_gbps"] * 1e9)
                     + work["fallback_calls"] * a["host_transfer_seconds"])
    return step, step * price / 3600 * cores / device["chip_cores"]


def test_gpt_fixture_estimate_panel_and_recompute(tmp_path, cli, report_schema, sim_build):
    project = tmp_path / "gpt_trainer"
    shutil.copytree(FIXTURES / "gpt_trainer", project)
    report = tmp_path / "report.json"
    result = cli("check", str(project), "--preview", "-o", str(report), "--tokens-per-step", "512",
                 "--compare", "cores", "--", "python", "train.py", "--steps", "6")
    assert report.exists(), result.stderr
    text = result.stdout
    assert "Estimate" in text and "not a measurement of Trainium" in text, text[-3000:]
    for device in ("trn2-lnc2-core", "trn2-chip", "trn3-lnc2-core", "trn3-chip", "h100-sxm"):
        assert device in text
    doc = json.loads(report.read_text())
    jsonschema.validate(doc, report_schema)
    section = doc["estimate"]
    assert section["steps"]["clock"] == "optimizer_step" and section["steps"]["measured"] == 6
    assert section["steps"]["tokens_per_step"] == 512
    families = {r["family"] for r in section["per_step"]["by_family"]}
    assert {"matmul", "attention", "norm", "softmax", "embedding", "elementwise"} <= families
    # the sampling fallback runs after training (generation): outside the steps
    assert section["per_step"]["fallback"]["calls"] == 0 and section["work"]["outside_steps_calls"] > 0
    core = next(r for r in section["per_device"] if r["device"] == "trn2-lnc2-core")
    assert core["memory"]["peak_bytes"] > 0 and core["memory"]["fits"] is True
    assert core["price"]["per_chip_hour_usd"] == 1.82 and core["price"]["derived"]  # the dated derived default
    expected, _ = by_hand(doc, "trn2-lnc2-core", 1.0)
    assert core["step_seconds"]["expected"] == pytest.approx(expected, rel=1e-9)

    again = cli("estimate", str(report), "--price", "trn2-chip=1.75", "--format", "json")
    assert again.returncode == 0, again.stderr
    recomputed = json.loads(again.stdout)
    row = next(r for r in recomputed["per_device"] if r["device"] == "trn2-lnc2-core")
    step, usd = by_hand(doc, "trn2-lnc2-core", 1.75)
    assert row["step_seconds"]["expected"] == pytest.approx(step, rel=1e-9)
    assert row["price"]["per_step_usd"] == pytest.approx(usd, rel=1e-9)
    assert row["price"]["per_million_tokens_usd"] == pytest.approx(usd / 512 * 1e6, rel=1e-9)
    assert not math.isclose(usd, 0.0)

    shown = cli("estimate", str(report), "--price", "trn2-chip=1.75")
    assert shown.returncode == 0 and "Estimate" in shown.stdout and "$1.75 (set by you)" in shown.stdout
    bad = cli("estimate", str(report), "--price", "trn2=1")
    assert bad.returncode == 2 and "unknown device 'trn2'" in bad.stderr
