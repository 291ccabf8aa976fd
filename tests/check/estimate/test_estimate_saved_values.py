"""`neuron-port estimate REPORT.json` on a report whose numbers were edited: NaN, Infinity, a negative count,
an integer beyond int64, deep nesting, a price of inf. Each is exit 2 with one line naming the file and the
key, nothing on stdout; what is printed is always valid JSON (no bare NaN). Issue 33, "estimate accepts NaN".
"""

from __future__ import annotations

import json
import math

import pytest

from neuron_port.check.estimate.options import EstimateOptions
from neuron_port.check.estimate.section import estimate_from_work
from neuron_port.check.estimate.stepwork import CollectiveWork, StepWork, TokenSource, WorkItem


def strict_json(text: str):
    """JSON as the standard has it: NaN and Infinity are not JSON."""
    def refuse(constant: str):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def section() -> dict:
    mm = WorkItem("aten::mm", "matmul", "bf16", 10, 2e12, 3e9, gemm=(1, 1024, 1024, 1024))
    work = StepWork(clock="optimizer_step", measured=6, processes=2, items=[mm], fallback_calls=2.0,
                    fallback_host_seconds=0.001, parameter_bytes=4e8, peak_bytes=2**30,
                    token_sources=[TokenSource("aten::embedding", "train.py:9", "wte", 4096.0)],
                    collectives=[CollectiveWork("all_reduce", 2, 1.0, 4e8)])
    made = estimate_from_work(work, EstimateOptions(tokens_per_step=4096.0, prices={"trn2-chip": 1.5}))
    assert made is not None
    return json.loads(json.dumps(made))


def edited(tmp_path, section: dict, name: str, edit) -> str:
    copy = json.loads(json.dumps(section))
    edit(copy)
    path = tmp_path / name
    path.write_text(json.dumps({"schema_version": 1, "estimate": copy}))  # json.dumps writes NaN as Python does
    return str(path)


def set_at(*keys_and_value):
    *keys, value = keys_and_value

    def edit(section):
        target = section
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return edit


CASES = [
    ("work", "work", 0, "calls", math.nan, "estimate.work.work[0].calls: expected a finite number >= 0, got NaN"),
    ("work", "work", 0, "flops", -5.0, "estimate.work.work[0].flops: expected a finite number >= 0, got -5.0"),
    ("work", "work", 0, "bytes", math.inf, "estimate.work.work[0].bytes: expected a finite number >= 0, got Infinity"),
    ("work", "fallback_host_seconds", -3.0, "estimate.work.fallback_host_seconds: expected a finite number >= 0"),
    ("work", "fallback_calls", -math.inf, "estimate.work.fallback_calls: expected a finite number >= 0, got -Infinity"),
    ("work", "measured", -1, "estimate.work.measured: expected an integer from 0 to 2**63-1, got -1"),
    ("work", "processes", 10**30, "estimate.work.processes: expected an integer from 0 to 2**63-1"),
    ("work", "parameter_bytes", 10**400, "estimate.work.parameter_bytes: expected a finite number >= 0"),
    ("work", "work", 0, "gemm", [1, -1024, 1024, 1024], "estimate.work.work[0].gemm[1]: expected an integer"),
    ("work", "token_sources", 0, "per_step", math.nan, "estimate.work.token_sources[0].per_step: expected a finite"),
    ("work", "collectives", 0, "group_size", 0, "estimate.work.collectives[0].group_size: expected an integer from 1"),
    ("assumptions", 0, "value", math.inf, "estimate.assumptions[0].value: expected a finite number > 0, got Infinity"),
    ("steps", "tokens_per_step", math.nan, "estimate.steps.tokens_per_step: expected a finite number > 0, got NaN"),
    ("cores", -2, "estimate.cores: expected an integer from 1 to 2**63-1, got -2"),
]


@pytest.mark.parametrize("case", CASES, ids=[str(c[-1]).split(":")[0] for c in CASES])
def test_a_value_the_cost_model_cannot_take_is_refused_with_file_and_key(tmp_path, cli, section, case):
    *where, expected = case
    report = edited(tmp_path, section, "edited.json", set_at(*where))
    before = open(report, "rb").read()
    for output_format in ("json", "text"):
        result = cli("estimate", report, "--output-format", output_format)
        assert result.returncode == 2, (result.returncode, result.stdout[-500:], result.stderr)
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"neuron-port: {report}: the `estimate` section is damaged: ")
        assert expected in result.stderr and "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert open(report, "rb").read() == before


def test_a_price_in_the_saved_section_must_be_finite_and_positive(tmp_path, cli, section):
    row = next(i for i, r in enumerate(section["per_device"]) if r["price"].get("source") == "user")
    report = edited(tmp_path, section, "price.json", set_at("per_device", row, "price", "per_chip_hour_usd", -1.5))
    result = cli("estimate", report)
    assert result.returncode == 2 and result.stdout == ""
    assert f"estimate.per_device[{row}].price.per_chip_hour_usd: expected a finite number > 0, got -1.5" in result.stderr


def test_deep_nesting_and_huge_integers_are_one_line_exit_2_never_an_internal_error(tmp_path, cli):
    deep = tmp_path / "deep.json"
    deep.write_text('{"estimate": ' + "[" * 200_000 + "]" * 200_000 + "}")
    huge = tmp_path / "huge.json"
    huge.write_text('{"estimate": {"work": {"measured": ' + "9" * 5000 + "}}}")
    for path, reason in ((deep, "not a JSON report: nested too deeply"), (huge, "")):
        result = cli("estimate", str(path), "--output-format", "json")
        assert result.returncode == 2, (path.name, result.returncode, result.stderr[-500:])
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"neuron-port: {path}: "), lines
        assert reason in lines[0] and "internal error" not in lines[0] and result.stdout == ""


def test_numbers_that_overflow_on_the_way_are_refused_not_printed_as_infinity(tmp_path, cli, section):
    report = edited(tmp_path, section, "vast.json", set_at("work", "parameter_bytes", 1.7e308))
    for output_format in ("json", "text"):
        result = cli("estimate", report, "--output-format", output_format)
        assert result.returncode == 2 and result.stdout == "", result.stdout[-300:]
        assert "the `estimate` section is damaged: its numbers are too large" in result.stderr


def test_a_valid_report_gives_valid_json_and_a_price_of_inf_is_refused_like_nan(tmp_path, cli, section):
    report = edited(tmp_path, section, "ok.json", lambda s: None)
    result = cli("estimate", report, "--output-format", "json")
    assert result.returncode == 0, result.stderr
    recomputed = strict_json(result.stdout)
    assert recomputed["steps"]["tokens_per_step"] == 4096.0
    for bad in ("inf", "Infinity", "-inf", "nan", "1e999"):
        refused = cli("estimate", report, "--price", f"trn2-chip={bad}")
        assert refused.returncode == 2 and refused.stdout == "", (bad, refused.stdout[-300:])
        assert f"--price 'trn2-chip={bad}'" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_infinity_in_pyproject_is_refused_with_file_line_and_key(tmp_path):
    from neuron_port.check.estimate.options import from_pyproject
    from neuron_port.config import ConfigError

    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.neuron-port.estimate]\ncores = 2\nprices = { trn2-chip = inf }\n")
    with pytest.raises(ConfigError, match=r"pyproject.toml:3: .*prices: trn2-chip: expected a finite number > 0, got inf"):
        from_pyproject(str(pyproject), {"trn2-chip"})
    pyproject.write_text("[tool.neuron-port.estimate]\ncompute-fraction = nan\n")
    with pytest.raises(ConfigError, match=r"pyproject.toml:2: .*compute-fraction: value: expected a finite number > 0"):
        from_pyproject(str(pyproject), {"trn2-chip"})
