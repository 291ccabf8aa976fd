"""What a user deciding to rent Trainium compares (issue 37 items 1, 3, 4, 6; docs/estimate.md "Like for like",
"Calibration", "Prices"): an 8-rank GPT job on a p5.48xlarge is compared with the Trainium shape a user would
rent (16 Trainium2 chips, a trn2.48xlarge), labelled with its chips and priced at the dated derived default;
`--measured h100-sxm=0.216` calibrates the Trainium rows by the model's ratio on that GPU, beside the model's
own values; a Trainium1 is refused with the reason; `estimate` in a file cuts no cell.

The record is the `estimate` section of a real `neuron-port check --shape-only --world-size 8 --instance
p5.48xlarge` of GPT-2 124M (records/gpt2_124m_8rank_p5.json says the command): `estimate` recomputes from its
per-step work exactly as `check` does, so no torch run is needed here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_port.check.estimate.options import EstimateOptions, Measured, parse_measured
from neuron_port.check.estimate.section import recompute
from neuron_port.check.estimate.sizing import parse_instance
from neuron_port.check.estimate.validation import RUNS

RECORD = Path(__file__).resolve().parent / "records" / "gpt2_124m_8rank_p5.json"
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def saved() -> dict:
    return json.loads(RECORD.read_text())["estimate"]


def trainium(section: dict) -> list[dict]:
    kinds = {d["id"]: d["kind"] for d in section["devices"]}
    return [r for r in section["per_device"] if kinds[r["device"]] == "trainium"]


def test_an_8_gpu_job_is_compared_with_the_instance_that_holds_as_many_trainium2_chips(saved):
    section = recompute(saved, EstimateOptions())
    assert section["comparison"]["gpu"] == {"device": "h100-sxm", "chips": 8, "hbm_gib": 74.5,
                                            "instance": "p5.48xlarge"}
    [compared] = [r for r in trainium(section) if r["device"] == "trn2-chip" and r["shape"]["compared"]]
    assert compared["instance"]["spec"] == "trn2.48xlarge" and compared["price"]["chips"] == 16
    assert compared["collectives"]["ranks"] == 64  # one rank per logical core of the 16 chips
    price = compared["price"]
    assert price["per_chip_hour_usd"] == 1.82 and price["dated"] == "2026-10-20" and price["derived"]
    assert price["next_update"] == "2027-01" and price["per_million_tokens_usd"] > 0
    shapes = {(r["device"], r["shape"]["basis"]): r["shape"]["chips"] for r in trainium(section)}
    assert shapes[("trn2-chip", "equal chips")] == 8 and shapes[("trn2-chip", "equal HBM")] == 7  # 8 x 80 GB / 96 GiB
    assert not any(r["device"].endswith("-core") for r in section["per_device"])
    # the per-core rows stay available, and a Trainium --instance sizes its chip as before
    cores = recompute(saved, EstimateOptions(compare="cores"))
    assert {"trn2-lnc2-core", "trn2-chip"} <= {r["device"] for r in cores["per_device"]}
    assert next(r for r in cores["per_device"] if r["device"] == "trn2-chip")["price"]["chips"] == 2  # 8 cores
    # a price given overrides the default
    priced = recompute(saved, EstimateOptions(prices={"trn2-chip": 2.5}))
    assert all(r["price"]["per_chip_hour_usd"] == 2.5 and r["price"]["source"] == "user"
               for r in trainium(priced) if r["device"] == "trn2-chip")


def test_a_measured_gpu_step_calibrates_every_trainium_row_beside_the_model_alone(saved):
    plain = recompute(saved, EstimateOptions())
    section = recompute(saved, EstimateOptions(measured=Measured("h100-sxm", 0.216)))
    h100 = next(r for r in section["per_device"] if r["device"] == "h100-sxm")
    ratio = 0.216 / h100["step_seconds"]["expected"]
    assert section["calibration"]["ratio"] == pytest.approx(ratio) and h100["measured_seconds"] == 0.216
    for before, after in zip(trainium(plain), trainium(section)):
        assert after["step_seconds"] == before["step_seconds"]  # the model's own value stays
        assert after["calibrated"]["step_seconds"] == pytest.approx(before["step_seconds"]["expected"] * ratio)
        usd = before["price"]["per_million_tokens_usd"]
        assert after["calibrated"]["per_million_tokens_usd"] == (None if usd is None else pytest.approx(usd * ratio))
    assert "calibrated" not in h100 and ratio != pytest.approx(1.0)
    # kept by a recompute of the saved section, as prices and instances are
    again = recompute(json.loads(json.dumps(section)), EstimateOptions())
    assert again["calibration"] == section["calibration"]


def test_bad_measured_and_trn1_say_what_is_wrong():
    devices = {"h100-sxm": "gpu", "a100-40gb-sxm": "gpu", "trn2-chip": "trainium"}
    assert parse_measured("h100-sxm=0.216@p5.48xlarge", devices) == Measured("h100-sxm", 0.216, "p5.48xlarge")
    for bad, words in (("h100-sxm", "expected DEVICE=SECONDS"), ("h100-sxm=", "expected DEVICE=SECONDS"),
                       ("h100=0.2", "unknown device 'h100'"), ("h100-sxm=fast", "not a step time"),
                       ("h100-sxm=-1", "not a step time"), ("h100-sxm=0.2@", "expected DEVICE=SECONDS"),
                       ("trn2-chip=0.2", "is not a GPU"), ("h100-sxm=0.2@trn2.48xlarge", "holds trn2-chip"),
                       ("h100-sxm=0.2@p9", "unknown instance")):
        with pytest.raises(ValueError, match="--measured") as raised:
            parse_measured(bad, devices)
        assert words in str(raised.value), (bad, raised.value)
    with pytest.raises(ValueError, match="not a TorchNeuron target"):
        parse_instance("trn1.32xlarge")


def test_validated_error_is_the_rows_own_kind_of_gpu_and_the_range_over_every_run(saved):
    section = recompute(saved, EstimateOptions())
    h100 = next(r for r in section["per_device"] if r["device"] == "h100-sxm")["validation"]
    h100_runs = [r.ratio for r in RUNS if r.device.startswith("h100")]
    assert (h100["ratio_low"], h100["ratio_high"]) == (min(h100_runs), max(h100_runs)) and len(h100_runs) > 1
    assert (h100["all_ratio_low"], h100["all_ratio_high"]) == (min(r.ratio for r in RUNS), max(r.ratio for r in RUNS))
    assert all(not r["validation"]["validated"] for r in trainium(section))


def test_the_validated_runs_are_the_published_benchmarks_results():
    """validation.RUNS is bench/estimate/results/published.json, rounded: a re-recorded or added row shows here."""
    rows = json.loads((REPO / "bench" / "estimate" / "results" / "published.json").read_text())["rows"]
    assert {r["name"]: (r["device"], round(r["ratio"], 2)) for r in rows} == {r.key: (r.device, r.ratio) for r in RUNS}


def test_the_html_page_shows_the_calibrated_column_and_the_derived_price(saved):
    from neuron_port.reporters.html.estimate import render_estimate

    page = render_estimate(recompute(saved, EstimateOptions(measured=Measured("h100-sxm", 0.216))))
    assert "calibrated step" in page and "measured 220 ms" in page and "compared like for like" in page
    assert "derived, not a list price" in page and "next AWS price update 2027-01" in page
    assert "trn2-chip</code> x16 (trn2.48xlarge) *" in page


def test_estimate_in_a_file_cuts_no_cell_and_bad_spellings_exit_2(tmp_path):
    """`neuron-port estimate r.json --measured h100-sxm=0.216 > f.txt` under a CI log's COLUMNS=80."""
    env = {k: v for k, v in os.environ.items() if k not in ("LINES",)}
    env["COLUMNS"] = "80"
    out = tmp_path / "f.txt"
    with out.open("w") as handle:
        done = subprocess.run([sys.executable, "-m", "neuron_port", "estimate", str(RECORD), "--measured",
                               "h100-sxm=0.216"], stdout=handle, stderr=subprocess.PIPE, text=True, env=env,
                              cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "…" not in text and "..." not in text.split("Estimated time and price")[1], text
    table = text[text.index("Estimated time and price"):]
    h100 = [r.ratio for r in RUNS if r.device.startswith("h100")]
    error = f"H100 x{min(h100):.2f}-{max(h100):.2f} (all x{min(r.ratio for r in RUNS):.2f}-{max(r.ratio for r in RUNS):.2f})"
    for cell in ("trn2-chip x16 (trn2.48xlarge) *", "h100-sxm x8 (p5.48xlarge)", "calibrated $/M tokens",
                 "measured 220 ms", error, "not validated"):
        assert cell in table, cell
    # the panel's lines are whole too: one width for the report, none wrapped at 80
    assert any("compared like for like: a job of 8 h100-sxm (p5.48xlarge) against trn2-chip x16" in line and
               "--compare cores" in line for line in text.splitlines()), text
    assert any("trn2-chip $1.82 (derived" in line and "next AWS price update 2027-01" in line
               for line in text.splitlines())
    bad = subprocess.run([sys.executable, "-m", "neuron_port", "estimate", str(RECORD), "--measured", "h100-sxm:0.2"],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--measured 'h100-sxm:0.2'" in bad.stderr, bad.stderr
