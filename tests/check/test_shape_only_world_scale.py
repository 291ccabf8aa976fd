"""Fake worlds that scale (issue 36 item 3): rank 0 of a `check --shape-only --world-size N` run builds only
its own piece of each parameter (neuron_backend/distributed/fake_world.py), so its work does not grow with
N, and its report is the one it was when every rank's piece was made (`NEURON_PORT_FAKE_WORLD_PIECES=all`,
PyTorch's own `_chunk_with_empty`). The model has a layer narrower than the world (ranks past the last
chunk get empty pieces) and widths the world does not divide (padded shards); its world comes from
`init_device_mesh`, whose own `init_process_group` call took the env:// rendezvous (a TCPStore waiting for
N processes) before the fake world gave it a FakeStore."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

pytestmark = pytest.mark.slow  # three `check` runs in one module fixture: ~20 CPU-s

FSDP = """
import os, torch, torch.nn as nn, torch.distributed as dist
import neuron_backend
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

def allocations():
    return neuron_backend.stats()["explicit_ops"]["aten::empty.memory_format"]

# init_process_group through the mesh (device_mesh.py took it by name): the env:// rendezvous of a fake world
mesh = init_device_mesh("neuron", (int(os.environ["WORLD_SIZE"]),))
with torch.device("neuron"):
    model = nn.Sequential(*[nn.Sequential(nn.Linear(64, 250), nn.GELU(), nn.Linear(250, 6), nn.Linear(6, 64))
                            for _ in range(2)])
before = allocations()
for block in model:
    fully_shard(block, mesh=mesh)
fully_shard(model, mesh=mesh)
print("shard allocations", allocations() - before)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(2):
    x = torch.randn(4, 16, 64, device="neuron")
    loss = model(x).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print("done", dist.get_rank(), dist.get_world_size())
"""
VOLATILE = ("status", "processes", "neff_cache")  # pids, durations, output; the NEFF cache is per run here


@pytest.fixture(scope="module")
def reports(tmp_path_factory, sim_build):
    project = tmp_path_factory.mktemp("fsdp")
    (project / "train.py").write_text(FSDP)
    out = {}
    for name, world, pieces in (("lazy8", 8, None), ("all8", 8, "all"), ("lazy2048", 2048, None)):
        env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path_factory.mktemp(f"neff-{name}"))}
        if pieces:
            env["NEURON_PORT_FAKE_WORLD_PIECES"] = pieces
        result = run_cli("check", str(project), "--shape-only", "--world-size", str(world), "--timeout", "150",
                         "--output-format", "json", "--", "python", "train.py", env=env)
        doc = json.loads(result.stdout)
        status = doc["runtime"]["status"]
        assert status["exit_code"] == 0, status["stderr_tail"]
        assert f"done 0 {world}" in "\n".join(status["stdout_tail"])
        out[name] = doc
    return out


def _shard_allocations(doc) -> int:
    line = next(x for x in doc["runtime"]["status"]["stdout_tail"] if x.startswith("shard allocations"))
    return int(line.split()[-1])


def test_making_only_rank_0s_pieces_keeps_the_report(reports):
    lazy, every = reports["lazy8"], reports["all8"]
    assert lazy["findings"] == every["findings"]
    assert lazy["estimate"] == every["estimate"]
    for key in lazy["runtime"].keys() | every["runtime"].keys():
        if key not in VOLATILE:
            assert lazy["runtime"].get(key) == every["runtime"].get(key), key
    assert lazy["runtime"]["distributed"], "the collectives are in the report"
    # the layer of 6 outputs has pieces for 6 of the 8 ranks: PyTorch makes an empty tensor for each of
    # the other two, twice per parameter; rank 0 needs none of them
    assert _shard_allocations(lazy) < _shard_allocations(every)


def test_rank_0s_shard_step_does_not_grow_with_the_world(reports):
    # every rank's piece made: 2,042 empty pieces per parameter at 2,048 ranks, twice (old code: ~24,000)
    assert _shard_allocations(reports["lazy2048"]) == _shard_allocations(reports["lazy8"])
    assert '"group_size": 2048' in json.dumps(reports["lazy2048"]["runtime"]["distributed"])


@pytest.mark.parametrize("dim", [0, 1])
def test_a_lazy_piece_is_the_view_torch_chunk_makes(dim):
    import torch
    from torch.distributed.fsdp._fully_shard._fsdp_common import _chunk_with_empty

    from neuron_backend.distributed.fake_world import LazyPieces

    for size in range(0, 13):
        base = torch.empty((size, 3) if dim == 0 else (3, size))
        for num_chunks in range(1, 10):
            lazy, eager = LazyPieces(base, num_chunks, dim), _chunk_with_empty(base, num_chunks, dim)
            assert len(lazy) == len(eager)
            for i in (*range(num_chunks), -1):
                a, b = lazy[i], eager[i]
                assert (a.shape, a.stride(), a.storage_offset()) == (b.shape, b.stride(), b.storage_offset()), (
                    size, num_chunks, i)
                assert (a.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()) == (
                    b.untyped_storage().data_ptr() == base.untyped_storage().data_ptr())
            assert lazy[num_chunks - 1] is lazy[-1]
