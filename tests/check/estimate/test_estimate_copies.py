"""Copies cost bytes (issue 24, Build 5: counting): TorchNeuron runs casts, ``clone`` and ``copy_`` natively
without a NEFF (``native_no_neff``), and the simulator writes their most-called signatures on the ``op``
line (EVENTS.md), so the estimate charges the bytes they move. A shape-only run of FSDP2 (``fully_shard``
per block, as torchtitan) counts the copies a real run makes inside FSDP2's own ops (``fsdp::
split_with_sizes_copy`` after every all-gather, ``fsdp::chunk_cat`` before every reduce-scatter): the
shape-only mode runs another library's kernel for the device under its recording mode, as a real run
calls it. Through the real CLI: two fake ranks, and a real two-process run under torchrun on the
simulator, rank for rank the same work: DTensor (FSDP2's sharded parameters) unwraps before the recording
mode counts a call, and the calls DTensor makes on fakes of the global shapes to learn an op's output
metadata are not counted (a real run makes them on fakes too: no device kernel counts them)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import simulator_env

PUBLISHED = Path(__file__).resolve().parent / "published"
MODELS = Path(__file__).resolve().parents[3] / "bench" / "shape_only" / "project" / "models.py"
LLAMA = ("--model llama --layers 2 --d 256 --heads 4 --kv-heads 2 --ffn 512 --vocab 1000 --batch 2 --seq 128 "
         "--dp fsdp")


def _check(root: Path, name: str, options: list[str], command: list[str]) -> dict:
    project = root / name
    project.mkdir()
    shutil.copy(PUBLISHED / "train.py", project / "train.py")
    shutil.copy(MODELS, project / "models.py")
    out = project / "report.json"
    result = subprocess.run([sys.executable, "-m", "neuron_port", "check", str(project), *options, "--exit-zero",
                             "-o", str(out), "--", *command], cwd=project, env=simulator_env(), capture_output=True,
                            text=True, timeout=600)
    assert out.exists(), result.stdout[-2000:] + result.stderr[-3000:]
    return json.loads(out.read_text())["estimate"]["work"]


@pytest.fixture(scope="module")
def work(tmp_path_factory, sim_build) -> dict:
    return _check(tmp_path_factory.mktemp("fsdp_copies"), "shape_only", ["--shape-only", "--world-size", "2"],
                  ["python", "train.py", *LLAMA.split()])


@pytest.fixture(scope="module")
def real_work(tmp_path_factory, sim_build) -> dict:
    return _check(tmp_path_factory.mktemp("fsdp_copies"), "real", [],
                  ["torchrun", "--nproc-per-node", "2", "train.py", "--", *LLAMA.split()])


def _items(work: dict, op: str) -> list[dict]:
    return [i for i in work["work"] if i["op"] == op and not i["compiled"]]


def _collective(work: dict, op: str) -> dict:
    return next(c for c in work["collectives"] if c["op"] == op)


def test_fsdp2s_copy_out_reads_and_writes_what_its_all_gathers_gathered(work):
    gathered = _collective(work, "all_gather_into_tensor")
    full = gathered["bytes"] * gathered["group_size"]  # the recorded bytes are one rank's shard
    copies = _items(work, "aten::copy_")
    assert copies and sum(i["bytes"] for i in copies) == pytest.approx(2 * full, rel=1e-9)


def test_the_reduce_scatters_chunk_cat_and_the_casts_move_bytes(work):
    scattered = _collective(work, "reduce_scatter_tensor")
    chunk_cat = _items(work, "aten::cat.out")
    assert chunk_cat and sum(i["bytes"] for i in chunk_cat) >= scattered["bytes"]  # reads the gradients at least
    casts = _items(work, "aten::_to_copy")
    assert casts and all(i["bytes"] > 0 for i in casts), casts  # RMSNorm's float() and back


ACCUMULATION = {"aten::add.Tensor", "aten::add_.Tensor"}  # autograd's in-place sum differs for fakes (docs/shape-only.md)


def _per_rank(work: dict) -> dict:
    ranks = max(work["processes"], 1)
    totals: dict = {}
    for i in work["work"]:
        op = "aten::add.Tensor" if i["op"] in ACCUMULATION else i["op"]
        calls, nbytes = totals.get((op, i["dtype"], i["compiled"]), (0.0, 0.0))
        totals[(op, i["dtype"], i["compiled"])] = (calls + i["calls"] / ranks, nbytes + i["bytes"] / ranks)
    return {k: (round(c, 6), round(b)) for k, (c, b) in totals.items()}


def test_a_shape_only_fsdp2_rank_does_the_work_of_a_real_fsdp2_rank(work, real_work):
    """Every op's calls and bytes per step: FSDP2's copies and the optimizer on the shards (not also on the
    global shapes DTensor propagates) included."""
    assert real_work["processes"] == 2
    assert _per_rank(work) == _per_rank(real_work)
    # and about the same peak memory a rank (13.8 MB shape-only, 15.7 MB real: the real rank keeps a
    # collective's CPU aliases, and the buffers they hold, until its next collective; 26.1 MB when it kept them
    # all, tests/simulator/distributed/test_collective_memory.py)
    assert 0.8 <= work["peak_bytes"] / real_work["peak_bytes"] <= 1.25, (work["peak_bytes"], real_work["peak_bytes"])
