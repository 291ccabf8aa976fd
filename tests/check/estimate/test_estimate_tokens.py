"""Tokens per step counted from the recorded shapes (`--tokens-per-step embedding[@WHERE]`, issue 14): the
spec's parse, its resolution against the run's embedding lookups, and end to end on the GPT trainer as a
user runs it: `check` once, then `neuron-port estimate REPORT.json --tokens-per-step embedding@...`."""

from __future__ import annotations

import json
import shutil

import jsonschema
import pytest

from conftest import FIXTURES
from neuron_port.check.estimate.options import from_pyproject, parse_tokens
from neuron_port.check.estimate.flops import token_count
from neuron_port.check.estimate.section import TokensError, resolve_tokens
from neuron_port.check.estimate.stepwork import TokenSource
from neuron_port.config import ConfigError

BATCH, BLOCK = 3, 16  # the trainer's --batch-size and --block-size: the token embedding looks up 3 x 16


@pytest.mark.parametrize("text, expected", [
    ("4096", 4096.0), ("1.5e3", 1500.0), (512, 512.0), ("embedding", "embedding"),
    (" embedding@model.py:115 ", "embedding@model.py:115"), ("embedding@transformer.wte", "embedding@transformer.wte"),
])
def test_parse_tokens_accepts_numbers_and_specs(text, expected):
    assert parse_tokens(text) == expected


@pytest.mark.parametrize("text", ["0", "-3", "nan", "inf", "tokens", "embedding@", "embedding@a@b", "Embedding",
                                  True, None, [4]])
def test_parse_tokens_rejects_the_rest(text):
    with pytest.raises(ValueError, match="expected a positive number, embedding, embedding@FILE:LINE"):
        parse_tokens(text)


def test_config_key_takes_a_spec_and_names_the_line_of_a_bad_one(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.neuron-port.estimate]\ntokens-per-step = "embedding@wte"\n')
    assert from_pyproject(str(pyproject), {"trn2-chip"}).tokens_per_step == "embedding@wte"
    pyproject.write_text('[tool.neuron-port.estimate]\ncores = 2\ntokens-per-step = "embeddings"\n')
    with pytest.raises(ConfigError, match=r"pyproject.toml:3: .*tokens-per-step: expected a positive number"):
        from_pyproject(str(pyproject), {"trn2-chip"})


def test_token_count_reads_the_integer_index_tensor():
    assert token_count("aten::embedding", ("f32[256,64]", "i64[4,32]", "-1", "False", "False")) == 128
    assert token_count("aten::_embedding_bag", ("f32[10,3]", "i32[7]", "i64[2]")) == 7
    assert token_count("aten::embedding", ("f32[256,64]", "f32[4,32]")) is None  # not indices
    assert token_count("aten::index_select", ("f32[256,64]", "0", "i64[9]")) is None


SOURCES = [TokenSource("aten::embedding", "pkg/model.py:115", "transformer.wte", 128.0),
           TokenSource("aten::embedding", "pkg/model.py:115", "transformer.wpe", 32.0),
           TokenSource("aten::embedding", "pkg/heads.py:9", "head.emb", 8.0)]


def test_resolve_picks_by_site_or_module_and_lists_candidates_otherwise():
    assert resolve_tokens("embedding@heads.py:9", SOURCES).per_step == 8.0
    assert resolve_tokens("embedding@pkg/heads.py:9", SOURCES).per_step == 8.0
    assert resolve_tokens("embedding@wte", SOURCES).per_step == 128.0
    assert resolve_tokens("embedding", SOURCES[:1]).per_step == 128.0
    for spec, problem in [("embedding", "3 embedding lookups;"), ("embedding@model.py:115", "2 embedding lookups match"),
                          ("embedding@eads.py:9", "no embedding lookup matches"), ("embedding@heads.py:10", "no")]:
        with pytest.raises(TokensError) as info:
            resolve_tokens(spec, SOURCES)
        message = str(info.value)
        assert problem in message
        for line in ("embedding@transformer.wte", "embedding@transformer.wpe", "embedding@pkg/heads.py:9"):
            assert line in message, message  # each candidate with a spec that picks it alone
        assert "128 tokens per step" in message and "32 tokens per step" in message
    with pytest.raises(TokensError, match="looked up no embedding"):
        resolve_tokens("embedding", [])


@pytest.fixture(scope="module")
def gpt_report(tmp_path_factory, sim_build):
    """One `check` of the GPT trainer, as a user runs it, with a spec that names two lookups (the token and
    position embeddings are on one line): the run is kept, the panel lists the candidates."""
    from conftest import run_cli

    root = tmp_path_factory.mktemp("tokens")
    project = root / "gpt_trainer"
    shutil.copytree(FIXTURES / "gpt_trainer", project)
    report = root / "report.json"
    result = run_cli("check", str(project), "--preview", "-o", str(report), "--tokens-per-step", "embedding@model.py:115",
                     "--compare", "cores", "--", "python", "train.py", "--steps", "6", "--batch-size", str(BATCH), "--block-size", str(BLOCK))
    assert report.exists(), result.stderr[-3000:]
    return report, result


@pytest.mark.slow
def test_check_records_the_lookups_and_keeps_the_run_when_the_spec_is_ambiguous(gpt_report, report_schema):
    report, result = gpt_report
    doc = json.loads(report.read_text())
    jsonschema.validate(doc, report_schema)
    steps, work = doc["estimate"]["steps"], doc["estimate"]["work"]
    sources = {s["module"]: s for s in work["token_sources"]}
    assert set(sources) == {"transformer.wte", "transformer.wpe"}
    assert sources["transformer.wte"]["per_step"] == BATCH * BLOCK  # idx: i64[3,16] once per step
    # pos: i64[16] once per step, and again in the generation after training (its prompt grows to 16):
    # the same signature, so by the per-step rule (docs/estimate.md) its later calls count in the steps too
    wpe = sources["transformer.wpe"]["per_step"]
    assert wpe >= BLOCK and (wpe * 6 / BLOCK) == pytest.approx(round(wpe * 6 / BLOCK))  # calls / 6 steps
    assert all(s["site"] == "model.py:115" and s["op"] == "aten::embedding" for s in sources.values())
    lookups = sum(i["calls"] for i in work["work"] if i["op"] == "aten::embedding")
    assert lookups == pytest.approx(sources['transformer.wte']['per_step'] / (BATCH * BLOCK) + wpe / BLOCK)  # the work's per-step calls
    assert steps["tokens_per_step"] is None and "2 embedding lookups match" in steps["tokens_from"]["error"]
    assert "embedding@transformer.wte" in result.stdout and "embedding@transformer.wpe" in result.stdout


@pytest.mark.slow
def test_estimate_from_the_saved_report_counts_the_token_embedding(gpt_report, cli):
    from test_estimate_gpt import by_hand

    report, _ = gpt_report
    doc = json.loads(report.read_text())
    run = cli("estimate", str(report), "--tokens-per-step", "embedding@transformer.wte", "--price", "trn2-chip=1.75",
              "--format", "json")
    assert run.returncode == 0, run.stderr
    section = json.loads(run.stdout)
    assert section["steps"]["tokens_per_step"] == BATCH * BLOCK
    assert section["steps"]["tokens_from"] == {"spec": "embedding@transformer.wte", "op": "aten::embedding",
                                               "site": "model.py:115", "module": "transformer.wte",
                                               "per_step": BATCH * BLOCK}
    row = next(r for r in section["per_device"] if r["device"] == "trn2-lnc2-core")
    _, usd = by_hand(doc, "trn2-lnc2-core", 1.75)
    assert row["price"]["per_million_tokens_usd"] == pytest.approx(usd / (BATCH * BLOCK) * 1e6, rel=1e-9)

    shown = cli("estimate", str(report), "--tokens-per-step", "embedding@wte")
    assert shown.returncode == 0, shown.stderr
    assert f"{BATCH * BLOCK} tokens per step (the indices of aten::embedding at model.py:115 in transformer.wte" \
        in " ".join(shown.stdout.replace("│", " ").split())

    for spec, problem in [("embedding@train.py:1", "no embedding lookup matches"), ("embedding", "2 embedding lookups")]:
        bad = cli("estimate", str(report), "--tokens-per-step", spec)
        assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
        assert problem in bad.stderr and str(report) in bad.stderr
        assert "embedding@transformer.wte" in bad.stderr and f"{BATCH * BLOCK} tokens per step" in bad.stderr
    typo = cli("estimate", str(report), "--tokens-per-step", "embeding")
    assert typo.returncode == 2 and "--tokens-per-step: expected a positive number" in typo.stderr
