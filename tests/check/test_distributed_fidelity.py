"""Issue 35 item 7: distributed runs under `neuron-port check --nproc 2` as PyTorch and TorchNeuron do them,
through the real CLI with its JSON report (`-o`), each a small user-style script.

- A gloo-only group with `neuron` tensors: PyTorch gives a group one backend per device type, and
  `backend="gloo"` maps only gloo's (cpu, cuda); TorchNeuron registers its backend for `neuron` alone. So DDP's
  first collective fails with PyTorch's own "No backend type associated with device type neuron", and NP907
  stands at the `init_process_group` line with the fix (`backend="neuron"`).
- NP909 names the rank that died first and how (a SIGKILL), not its peer's "Connection closed by peer".
- `Work.get_future()` of `reduce_scatter_tensor(..., async_op=True)` (gloo has none) under a DDP comm hook.
- `--nproc` with a project's own interpreter that has no neuron-port runs with neuron-port's, saying so.
- HF `Trainer` (one step) under `--nproc 2`: each process's core is `neuron:<LOCAL_RANK>` (TorchNeuron's
  c10_neuron::device_count() is LOCAL_WORLD_SIZE and set_local_device_start_index(local_rank)), so
  accelerate's `DDP(device_ids=[local_process_index])` works on rank 1.
Each fails on 858089d."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def run_check(cli, tmp_path: Path, script: str, *command: str, options=("--nproc", "2"), env=None):
    """`neuron-port check PROJECT [options] -o report.json -- COMMAND` (default: python train.py): the report,
    the CLI's result and the script's path."""
    project = tmp_path / "project"
    project.mkdir(parents=True)
    train = project / "train.py"
    train.write_text(textwrap.dedent(script))
    report = tmp_path / "report.json"
    result = cli("check", str(project), *options, "-o", str(report), "--", *(command or ("python", "train.py")),
                 env=env)
    assert report.exists(), result.stderr[-3000:]
    return json.loads(report.read_text()), result, train


def line_of(path: Path, marker: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if marker in line)


def printed(doc: dict) -> list[str]:
    return [line.split(":", 1)[1] if line.startswith("[default") else line
            for rank in doc["runtime"]["status"].get("ranks", []) for line in rank["stdout_tail"]]


GLOO_DDP = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

backend = "nccl" if torch.cuda.is_available() else "gloo"  # what a half-ported NCCL ternary leaves
dist.init_process_group(backend=backend)  # BACKEND LINE
model = DDP(torch.nn.Linear(8, 2).to("neuron"))  # DDP LINE
loss = model(torch.randn(4, 8, device="neuron")).square().mean()
loss.backward()
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_gloo_only_group_with_neuron_tensors_fails_as_upstream_with_np907_at_the_backend_line(tmp_path, cli,
                                                                                             sim_build):
    doc, result, train = run_check(cli, tmp_path, GLOO_DDP)
    assert result.returncode == 1 and doc["runtime"]["status"]["exit_code"] != 0
    (np907,) = [f for f in doc["findings"] if f["code"] == "NP907"]
    assert (Path(np907["path"]).name, np907["line"]) == ("train.py", line_of(train, "# BACKEND LINE"))
    assert 'init_process_group(backend="gloo") made a process group with no backend for neuron tensors' in \
        np907["message"] and 'Use backend="neuron"' in np907["message"], np907
    # PyTorch's own error, raised by the group, at DDP's first collective, on every rank
    failures = doc["runtime"]["failures"]
    assert sorted(f["rank"] for f in failures) == [0, 1], failures
    for failure in failures:
        assert failure["exception"] == "RuntimeError: No backend type associated with device type neuron"
        assert failure["site"]["line"] == line_of(train, "# DDP LINE")


KILLED = """\
import os
import signal
import time
import torch
import torch.distributed as dist

dist.init_process_group(backend="neuron")
rank = dist.get_rank()
t = torch.ones(4, device="neuron")
dist.all_reduce(t)
if rank == 1:
    time.sleep(0.3)  # rank 0 waits in the next collective
    os.kill(os.getpid(), signal.SIGKILL)
dist.all_reduce(t)  # rank 0 fails here, its peer gone
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_np909_names_the_rank_that_was_killed_first_and_how(tmp_path, cli, sim_build):
    doc, result, _ = run_check(cli, tmp_path, KILLED)
    assert result.returncode == 1
    (np909,) = [f for f in doc["findings"] if f["code"] == "NP909"]
    assert "rank 1 was killed by SIGKILL (signal 9)" in np909["message"], np909
    first = doc["runtime"]["failures"][0]
    assert (first["rank"], first["exception"]) == (1, "was killed by SIGKILL (signal 9)"), doc["runtime"]["failures"]
    # rank 0's connection error, if it raised before torchrun stopped it, comes after
    assert all(f["rank"] == 0 for f in doc["runtime"]["failures"][1:])


def test_a_lost_peer_error_comes_after_the_worker_that_ended_without_an_exception(tmp_path):
    """Torchrun's thread dates a worker's end when it wakes, which on a busy machine can be after the peer's
    "Connection closed by peer": the death is still the root cause (no timing in this test)."""
    from neuron_port.check.aggregate.command import command_failed_finding, process_failures
    from neuron_port.check.events import ExceptionInfo, ProcessEvent, ProcessEvents, WorkerExit
    from neuron_port.check.runner import RunStatus
    from neuron_port.check.sites import SiteMapper

    lost = ExceptionInfo(type="RuntimeError", message="[pair.cc:553] Connection closed by peer [127.0.0.1]:1234. This "
                         "is typically caused by a remote worker crashing.", site=None, time=100.0)
    rank0 = ProcessEvents(tmp_path / "rank0.jsonl", process=ProcessEvent(pid=10, rank=0, status="exception",
                                                                         exception=lost))
    status = RunStatus(command=["torchrun"], exit_code=1, worker_exits=[
        WorkerExit(pid=11, rank=1, ended=100.4, signal="SIGKILL", signal_number=9),
        WorkerExit(pid=10, rank=0, ended=100.5, exit_code=1)])
    failures = process_failures([rank0], status, SiteMapper(tmp_path))
    assert [(f.rank, f.describe()) for f in failures] == [
        (1, "rank 1 was killed by SIGKILL (signal 9)"),
        (0, "rank 0 failed with RuntimeError: " + lost.message)]
    assert command_failed_finding(status, failures).message.endswith(
        "rank 1 was killed by SIGKILL (signal 9) (and 1 more process(es))")


REDUCE_SCATTER_HOOK = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group(backend="neuron")
rank, world = dist.get_rank(), dist.get_world_size()

def sharded_allreduce(state, bucket):  # reduce-scatter, then all-gather the shards
    flat = bucket.buffer()
    full = torch.cat([flat, flat.new_zeros((-flat.numel()) % world)]).div_(world)
    shard = full.new_empty(full.numel() // world)
    fut = dist.reduce_scatter_tensor(shard, full, async_op=True).get_future()  # FUTURE

    def gather(done):
        out = torch.empty_like(full)
        dist.all_gather_into_tensor(out, done.value()[0])
        return out[:flat.numel()]
    return fut.then(gather)

grads = []
for hook in (None, sharded_allreduce):
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to("neuron"))
    if hook is not None:
        model.register_comm_hook(None, hook)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(rank)).to("neuron")
    model(x).square().mean().backward()
    grads.append(torch.cat([p.grad.flatten().cpu() for p in model.parameters()]))
print(f"rank {rank} hook matches allreduce: {torch.allclose(grads[0], grads[1], atol=1e-6)}")
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_reduce_scatter_future_in_a_ddp_comm_hook(tmp_path, cli, sim_build):
    doc, result, _ = run_check(cli, tmp_path, REDUCE_SCATTER_HOOK)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    assert sorted(line for line in printed(doc) if "hook matches" in line) == \
        [f"rank {r} hook matches allreduce: True" for r in (0, 1)]
    ops = {d["op"] for d in doc["runtime"]["distributed"]}
    assert {"reduce_scatter_tensor", "all_gather_into_tensor", "all_reduce"} <= ops, ops


INTERPRETER = """\
import sys
import torch
import torch.distributed as dist

dist.init_process_group(backend="neuron")
t = torch.ones(2, device="neuron")
dist.all_reduce(t)
print(f"rank {dist.get_rank()} ran {sys.executable} {t.tolist()}")
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_nproc_runs_the_projects_interpreter_or_says_it_uses_its_own(tmp_path, cli, sim_build):
    # a project environment without neuron-port (nor torch): a fresh venv
    venv = tmp_path / "project-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    bare = venv / "bin" / "python"
    doc, result, _ = run_check(cli, tmp_path, INTERPRETER, str(bare), "train.py")
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    note = [line for line in result.stderr.splitlines() if line.startswith("neuron-port: --nproc:")]
    assert len(note) == 1 and f"{bare} has no neuron-port" in note[0] and sys.executable in note[0], result.stderr
    assert sorted(line for line in printed(doc) if " ran " in line) == \
        [f"rank {r} ran {sys.executable} [2.0, 2.0]" for r in (0, 1)]
    # an interpreter that has neuron-port (this one, by another name) is the one the ranks run
    own = Path(sys.executable).with_name("python3")
    if own.exists() and str(own) != sys.executable:
        doc, result, _ = run_check(cli, tmp_path / "second", INTERPRETER, str(own), "train.py")
        assert "neuron-port: --nproc:" not in result.stderr
        assert sorted(line for line in printed(doc) if " ran " in line) == \
            [f"rank {r} ran {own} [2.0, 2.0]" for r in (0, 1)]


HF_TRAINER = """\
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

torch.manual_seed(0)
model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                     pad_token_id=0, eos_token_id=1, bos_token_id=None))
ids = torch.randint(2, 64, (8, 16))
args = TrainingArguments(output_dir="out", max_steps=1, per_device_train_batch_size=2, report_to=[],
                         save_strategy="no", logging_strategy="no", disable_tqdm=True)
trainer = Trainer(model=model, args=args, train_dataset=[{"input_ids": row, "labels": row} for row in ids])
trainer.train()
print(f"rank {args.process_index}: {args.device} {next(model.parameters()).device} {trainer.state.global_step}")
"""


@pytest.mark.slow
def test_hf_trainer_one_step_on_two_ranks(tmp_path, cli, sim_build):
    pytest.importorskip("accelerate")
    doc, result, _ = run_check(cli, tmp_path, HF_TRAINER, env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    # each rank trains on its own core, neuron:<LOCAL_RANK>, with DDP's gradient all-reduce
    assert sorted(line for line in printed(doc) if line.startswith("rank ")) == \
        ["rank 0: neuron:0 neuron:0 1", "rank 1: neuron:1 neuron:1 1"]
    assert doc["runtime"]["ops"]["native_calls"] > 0
    assert any(d["op"] == "all_reduce" and d["ranks"] == [0, 1] for d in doc["runtime"]["distributed"])
