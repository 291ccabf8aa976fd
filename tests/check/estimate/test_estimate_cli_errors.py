"""`neuron-port estimate` on bad input: a clear error naming the file, exit 2, nothing written."""

from __future__ import annotations

import json


def test_estimate_rejects_what_is_not_a_report_with_an_estimate(tmp_path, cli):
    missing = tmp_path / "nope.json"
    result = cli("estimate", str(missing))
    assert result.returncode == 2 and f"{missing}: cannot read" in result.stderr

    cut = tmp_path / "cut.json"
    cut.write_text('{"schema_version": 1, "estimate": {"vers')
    result = cli("estimate", str(cut))
    assert result.returncode == 2 and f"{cut}: not a JSON report" in result.stderr

    rewrite_report = tmp_path / "rewrite.json"
    rewrite_report.write_text(json.dumps({"schema_version": 1, "command": "rewrite"}))
    result = cli("estimate", str(rewrite_report))
    assert result.returncode == 2 and "no `estimate` section" in result.stderr

    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps({"estimate": {"work": {"clock": "forward"}}}))
    before = damaged.read_bytes()
    result = cli("estimate", str(damaged), "--format", "json")
    assert result.returncode == 2 and f"{damaged}: the `estimate` section is damaged" in result.stderr
    assert result.stdout == "" and damaged.read_bytes() == before

    result = cli("estimate", str(damaged), "--format", "yaml")
    assert result.returncode == 2 and "--format 'yaml'" in result.stderr
