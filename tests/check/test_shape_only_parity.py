"""Parity of `check --shape-only` with a real `check`, end to end through the real CLI, on fixture
workloads a real run can compute: the runtime findings and their lines, CPU fallbacks and their sites,
float64 / unsupported sites, eager compile signatures per site, NP902 / NP910, torch.compile graphs and
their recompiles, collectives, the estimate's work per op, and the peak device memory (within 10%) are
the same.

The one difference that remains is documented (docs/shape-only.md, "What differs"): autograd adds up the
gradients that reach one tensor in place (``aten::add_.Tensor``) for real tensors and out of place
(``aten::add.Tensor``) for tensor subclasses such as FakeTensor, so the two ops' signatures and calls
are compared together (same work), not per site.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter

import jsonschema
import pytest

from conftest import FIXTURES

pytestmark = pytest.mark.slow

WORKLOADS = {
    "resnet_static": ["train.py", "--steps", "5"],
    "uneven_last_batch": ["train.py"],
    "kv_cache_generation": ["generate.py", "--new-tokens", "12"],
    "gpt_compile_trainer": ["train.py", "--steps", "4"],
}
ACCUMULATION = {"aten::add.Tensor", "aten::add_.Tensor"}  # see the module docstring
SHAPE_ONLY_CODES = {"NP911"}  # findings only a shape-only run makes (its placeholders and size rules)


def run(cli, schema, tmp_path, fixture, command, shape_only):
    project = tmp_path / ("shape_only" if shape_only else "real") / fixture
    shutil.copytree(FIXTURES / fixture, project)
    result = cli("check", str(project), "--output-format", "json", *(["--shape-only"] if shape_only else []),
                 "--", "python", *command)
    assert result.stdout, result.stderr
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, schema)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    assert doc["runtime"]["mode"] == ("shape_only" if shape_only else "real")
    return doc


def site(entry):
    s = entry.get("site") or {}
    return s.get("path"), s.get("line"), s.get("thread")


def comparable(doc: dict) -> dict:
    rt = doc["runtime"]
    eager = {(e["op"], site(e)): (e["unique_signatures"], e["calls"], e["after_warmup"], tuple(e["modules"]))
             for e in rt["eager_compiles"] if e["op"] not in ACCUMULATION}
    accumulation = Counter()
    for e in rt["eager_compiles"]:
        if e["op"] in ACCUMULATION:
            accumulation["calls"] += e["calls"]
    work = Counter()
    for w in doc["estimate"]["work"]["work"]:
        op = "aten::add.Tensor" if w["op"] in ACCUMULATION else w["op"]
        for key in ("calls", "flops", "bytes"):
            work[(op, w["dtype"], w["compiled"], key)] += w[key]
    shapes = {k: v for k, v in rt["shapes"].items() if k != "first_run_compiles"}
    return {
        "findings": sorted((f["code"], f["path"], f["line"]) for f in doc["findings"]
                           if f["code"].startswith("NP9") and f["code"] not in SHAPE_ONLY_CODES),
        "fallbacks": sorted(json.dumps(f, sort_keys=True) for f in rt["fallbacks"]),
        "demotions": sorted(json.dumps(d, sort_keys=True) for d in rt["demotions"]),
        "unsupported": sorted(json.dumps(u, sort_keys=True) for u in rt["unsupported"]),
        "eager": eager,
        "accumulation": accumulation,
        "shapes": shapes,
        "shape_variance": rt["shape_variance"],
        "compiles": rt["compiles"],
        "distributed": rt["distributed"],
        "work": {k: round(v, 3) for k, v in work.items()},
    }


@pytest.mark.parametrize("fixture", WORKLOADS)
def test_a_shape_only_check_reports_what_a_real_check_reports(fixture, tmp_path, cli, report_schema, sim_build):
    real = run(cli, report_schema, tmp_path, fixture, WORKLOADS[fixture], shape_only=False)
    fake = run(cli, report_schema, tmp_path, fixture, WORKLOADS[fixture], shape_only=True)
    expected, got = comparable(real), comparable(fake)
    for part in expected:
        assert got[part] == expected[part], part
    peak_real = real["estimate"]["work"]["peak_bytes"]
    peak_fake = fake["estimate"]["work"]["peak_bytes"]
    assert abs(peak_fake - peak_real) <= 0.1 * peak_real, (peak_real, peak_fake)
