"""Copies cost bytes (issue 24, Build 5: counting): TorchNeuron runs casts, ``clone`` and ``copy_`` natively
without a NEFF (``native_no_neff``), and the simulator writes their most-called signatures on the ``op``
line (EVENTS.md), so the estimate charges the bytes they move. A shape-only run of FSDP2 (``fully_shard``
per block, as torchtitan) counts the copies a real run makes inside FSDP2's own ops (``fsdp::
split_with_sizes_copy`` after every all-gather, ``fsdp::chunk_cat`` before every reduce-scatter): the
shape-only mode runs another library's kernel for the device under its recording mode, as a real run
calls it. Through the real CLI, two fake ranks."""

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


@pytest.fixture(scope="module")
def work(tmp_path_factory, sim_build) -> dict:
    project = tmp_path_factory.mktemp("fsdp_copies")
    shutil.copy(PUBLISHED / "train.py", project / "train.py")
    shutil.copy(MODELS, project / "models.py")
    out = project / "report.json"
    result = subprocess.run([sys.executable, "-m", "neuron_port", "check", str(project), "--shape-only",
                             "--world-size", "2", "--exit-zero", "-o", str(out), "--", "python", "train.py",
                             *LLAMA.split()], cwd=project, env=simulator_env(), capture_output=True, text=True,
                            timeout=600)
    assert out.exists(), result.stdout[-2000:] + result.stderr[-3000:]
    return json.loads(out.read_text())["estimate"]["work"]


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
