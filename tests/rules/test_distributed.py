"""NP5xx beyond the per-rule examples: point-to-point calls through aliases, NCCL in other cases, torch.cuda.nccl,
and DDP / torchrun trainers with every rule enabled (each process's NeuronCore is neuron:<LOCAL_RANK>, as
TorchNeuron's c10_neuron makes it: a rank device is renamed and keeps its index), rewritten, settled and
parsed."""

from __future__ import annotations

import ast

import pytest

from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rules.registry import all_rules
from rule_runs import findings_of as codes, rewrite_twice as run
from rule_runs import rules_by_code as _rules, run_rules as _run


# -- point-to-point --------------------------------------------------------------------------------

def test_p2p_through_aliases():
    src = "import torch.distributed as d\nfrom torch.distributed import irecv as r\nd.isend(t, 1)\nr(t, 0)\n"
    codes = [f.code for f in _run(src, _rules("NP509")).findings]
    assert codes == ["NP509", "NP509"]


# -- NP501: NCCL in other cases --------------------------------------------------------------------

def test_upper_case_nccl_backends_are_rewritten_only_where_a_backend_is_named():
    code, _ = run('import torch\nimport torch.distributed as dist\n'
                  'dist.init_process_group(backend="NCCL" if torch.cuda.is_available() else "gloo")\n'
                  'timings = {"NCCL": 0.0}\n')
    assert 'backend="neuron" if torch.neuron.is_available() else "gloo"' in code
    assert 'timings = {"NCCL": 0.0}' in code


# -- NP512: torch.cuda.nccl ------------------------------------------------------------------------

def test_torch_cuda_nccl_import_and_version_are_reported():
    _, findings = run("import torch.cuda.nccl as nccl\nprint(nccl.version())\n")
    found = codes(findings, "NP512")
    assert [(f.line, f.severity) for f in found] == [(1, "warning"), (2, "error")]
    assert "torch-neuronx" in found[1].message


# -- a DDP trainer, every rule ---------------------------------------------------------------------

REALISTIC = '''\
"""DDP trainer (CUDA)."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])  # where to run
parser.add_argument("--dist-backend", default="nccl", type=str)
args = parser.parse_args()


def main(local_rank, world_size):
    os.environ["NCCL_DEBUG"] = "INFO"
    dist.init_process_group(backend=args.dist_backend, rank=local_rank, world_size=world_size)
    torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}")
    model = Net().cuda(local_rank)
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
    ckpt = torch.load("ckpt.pt", map_location=lambda storage, loc: storage.cuda(local_rank))
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.to(device)
        if x.is_cuda and device.type == 'cuda':
            torch.cuda.synchronize()
    mask = torch.cuda.LongTensor([0, 1])


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(main, args=(world_size,), nprocs=world_size)
'''


@pytest.mark.parametrize("target", ["neuron", "accelerator"])
@pytest.mark.parametrize("unsafe", [False, True])
def test_realistic_idempotent_and_parses(target, unsafe):
    options = EngineOptions(target=target, unsafe_fixes=unsafe)
    first = transform_source(REALISTIC, all_rules(), options)
    ast.parse(first.code)
    second = transform_source(first.code, all_rules(), options)
    assert second.code == first.code
    assert not any(f.fix.applied for f in second.findings)


def test_realistic_neuron_rewrite():
    out = transform_source(REALISTIC, all_rules(), EngineOptions())
    code = out.code
    assert 'default="neuron", choices=["cpu", "cuda", "neuron"])  # where to run' in code
    assert 'default="neuron", type=str' in code
    # the process's core is neuron:<LOCAL_RANK> (op_policy.toml [distributed.confirmed] device_index): a rank
    # device keeps its index, as on CUDA
    assert 'device = torch.device(f"neuron:{local_rank}")' in code
    assert "Net().to(local_rank)" in code
    assert "torch.neuron.set_device(local_rank)" in code
    assert 'x.to("neuron", non_blocking=True)' in code
    assert "x.is_neuron and device.type == 'neuron'" in code
    assert 'map_location=f"neuron:{local_rank}"' in code
    assert 'torch.tensor([0, 1], dtype=torch.int64, device="neuron")' in code
    assert "torch.neuron.synchronize()" in code
    assert "DDP(model, device_ids=[local_rank], output_device=local_rank)" in code  # kept
    codes = {f.code for f in out.findings}
    assert {"NP506", "NP507"} <= codes and "NP503" not in codes
    unsafe = transform_source(REALISTIC, all_rules(), EngineOptions(unsafe_fixes=True)).code
    assert "model = DDP(model, device_ids=[local_rank], output_device=local_rank)" in unsafe


# -- a torchrun trainer, every rule ----------------------------------------------------------------

TORCHRUN = '''\
"""torchrun --nproc_per_node=8 train.py"""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def setup():
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group(backend="nccl")
    torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}")
    return local_rank, device


def load(path, args):
    state = torch.load(path, map_location=f"cuda:{args.local_rank}")
    other = torch.load(path, map_location='cuda:%d' % dist.get_rank())
    return state, other


def train(model, loader, args):
    local_rank, device = setup()
    torch.cuda.set_device(device)
    model = model.to(torch.device("cuda", local_rank))
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
    aux = torch.zeros(4, device="cuda:{}".format(args.gpu))
    replicas = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    for x, y in loader:
        x = x.to(device, non_blocking=True)
        y = y.cuda(local_rank)
        loss = model(x, y)
    dist.destroy_process_group()
'''


@pytest.mark.parametrize("unsafe", [False, True])
def test_torchrun_rank_devices_keep_the_local_rank(unsafe):
    options = EngineOptions(unsafe_fixes=unsafe)
    out = transform_source(TORCHRUN, all_rules(), options)
    code = out.code
    ast.parse(code)
    assert 'device = torch.device(f"neuron:{local_rank}")' in code
    assert 'map_location=f"neuron:{args.local_rank}"' in code
    assert "map_location='neuron:%d' % dist.get_rank()" in code
    assert 'model.to(torch.device("neuron", local_rank))' in code
    assert 'device="neuron:{}".format(args.gpu))' in code
    assert "y = y.to(local_rank)" in code
    assert 'replicas = [f"neuron:{i}" for i in range(torch.neuron.device_count())]' in code
    assert "torch.neuron.set_device(local_rank)" in code and "torch.neuron.set_device(device)" in code
    assert "model = DDP(model, device_ids=[local_rank], output_device=local_rank)" in code
    assert 'backend="neuron"' in code and "torch.cuda" not in code
    # the global rank as an index: renamed, and the finding says to index by LOCAL_RANK
    [global_rank] = [f for f in out.findings if f.code == "NP101" and "get_rank" in f.message]
    assert "index by LOCAL_RANK" in global_rank.message
    assert not [f for f in out.findings if f.code == "NP101" and "local_rank" in f.message
                and "LOCAL_RANK" in f.message]
    second = transform_source(code, all_rules(), options)
    assert second.code == code
    assert not any(f.fix.applied for f in second.findings)


def test_torchrun_accelerator_keeps_rank_index():
    out = transform_source(TORCHRUN, all_rules(), EngineOptions(target="accelerator", unsafe_fixes=True))
    code = out.code
    assert "torch.accelerator.set_device_index(local_rank)" in code
    assert ":{local_rank}" in code
    again = transform_source(code, all_rules(), EngineOptions(target="accelerator", unsafe_fixes=True))
    assert again.code == code


def test_backend_map_is_rewritten_key_and_value_together():
    # a renamed value under the key "cuda" is never found by the renamed device type: gloo, silently
    code, findings = run(
        "import torch\nimport torch.distributed as dist\n"
        "device_type = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "dist.init_process_group(backend={'cuda': 'nccl', 'cpu': 'gloo'}[device_type])\n")
    assert "{'neuron': 'neuron', 'cpu': 'gloo'}[device_type]" in code
    assert [f for f in findings if f.code == "NP501" and "key" in f.message]
    assert not [f for f in findings if f.code == "NP101" and f.line == 4]  # no second, unsafe advice on the key


def test_backend_map_target_accelerator_keeps_the_key():
    code, _ = run("import torch.distributed as dist\nBACKENDS = {'cuda': 'nccl', 'cpu': 'gloo'}\n",
                  target="accelerator")
    assert "'cuda'" in code


# -- messages that agree with the fixes, mp.spawn told apart from torchrun -------------------------

SPAWNED = '''\
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def worker(rank, world_size):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    model = DDP(torch.nn.Linear(4, 4).to(f"cuda:{rank}"), device_ids=[rank])
    model(torch.randn(2, 4, device=f"cuda:{rank}")).sum().backward()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
'''


def test_an_mp_spawn_worker_keeps_its_rank_devices(tmp_path, cli):
    """mp.spawn on one node: the worker's rank is its local rank, its core neuron:<rank>; the rewrite
    renames the devices and keeps `device_ids=[rank]` (it wrote `[0]`, another process's core on rank 1)."""
    script = tmp_path / "spawned.py"
    script.write_text(SPAWNED)
    result = cli("rewrite", str(script))
    assert result.returncode == 0, result.stderr
    text = script.read_text()
    assert 'DDP(torch.nn.Linear(4, 4).to(f"neuron:{rank}"), device_ids=[rank])' in text
    assert 'device=f"neuron:{rank}"' in text


def test_set_device_with_a_non_rank_argument_is_one_finding():
    """`set_device(device)` (not a rank) in a DDP file: NP201 renames it, and that is the line's only
    finding (the retired NP502 used to add advice beside the rename: two findings, one rename, one "drop")."""
    code, findings = run("import torch\nimport torch.distributed as dist\n"
                         "dist.init_process_group('nccl')\ntorch.cuda.set_device(device)\n")
    assert "torch.neuron.set_device(device)" in code
    on_line = [f for f in findings if f.line == 4]
    assert [f.code for f in on_line] == ["NP201"], on_line


# -- NP513: Hogwild on the device (scoreboard pattern C) ------------------------------------------------

HOGWILD = '''\
import torch, torch.multiprocessing as mp
def train(m): print(m(torch.ones(2, 4, device=next(m.parameters()).device)).sum().item())
if __name__ == "__main__":
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    m = torch.nn.Linear(4, 1).to(dev); m.share_memory()
    mp.set_start_method("spawn", force=True)
    p = mp.Process(target=train, args=(m,)); p.start(); p.join()
'''


def test_a_shared_model_moved_to_the_device_is_one_finding_at_share_memory(tmp_path, cli):
    """The model is on the device by data flow (`m = ....to(dev)`, `dev` neuron after the rewrite): its
    `share_memory()` is reported, once (the Process that receives it is the same cause)."""
    import json

    script = tmp_path / "hogwild.py"
    script.write_text(HOGWILD)
    result = cli("rewrite", "--output-format", "json", str(script))
    found = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "NP513"]
    assert [(f["line"], f["column"]) for f in found] == [(5, 40)], found
    assert "keep it on the CPU, or use DDP" in found[0]["message"] and not found[0]["fix"]["available"]
    # the same program with the shared model kept on the CPU is not reported
    script.write_text(HOGWILD.replace("torch.nn.Linear(4, 1).to(dev)", "torch.nn.Linear(4, 1)"))
    result = cli("rewrite", "--output-format", "json", str(script))
    assert not [f for f in json.loads(result.stdout)["findings"] if f["code"] == "NP513"]


def test_a_device_model_handed_to_spawn_without_share_memory_is_reported_at_the_argument():
    _, findings = run("import torch.multiprocessing as mp\n\ndef main(rank):\n    net = Net()\n    net.cuda()\n"
                      "    mp.spawn(train, args=(net, rank), nprocs=2)\n")
    assert [(f.line, f.message.split("`")[1]) for f in findings if f.code == "NP513"] == [(6, "net")]
