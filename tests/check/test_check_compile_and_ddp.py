"""`neuron-port check` on the issue-10 fixtures, through the real CLI: a GPT trained with
torch.compile(backend="neuron") and SDPA (its backward used to fail), and two-process DDP with one
NeuronCore per process."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest

from conftest import FIXTURES

pytestmark = pytest.mark.slow


def check(cli, project: Path, *args: str, command: list[str]) -> tuple[dict, int]:
    result = cli("check", str(project), "--output-format", "json", *args, "--", *command)
    assert result.stdout, result.stderr
    return json.loads(result.stdout), result.returncode


def copy_fixture(tmp_path: Path, name: str) -> Path:
    project = tmp_path / name
    shutil.copytree(FIXTURES / name, project)
    return project


def line_of(path: Path, marker: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if marker in line)


@pytest.mark.parametrize("options", [[], ["--activation-checkpointing", "--dropout", "0.1"]],
                         ids=["default", "checkpointing-dropout"])
def test_compiled_gpt_trainer_finishes_under_check(tmp_path, cli, report_schema, options):
    project = copy_fixture(tmp_path, "gpt_compile_trainer")
    doc, code = check(cli, project, command=["python", "train.py", "--steps", "3", *options])
    jsonschema.validate(doc, report_schema)
    status = doc["runtime"]["status"]
    assert code == 0 and status["exit_code"] == 0, status["stderr_tail"]
    assert [line for line in status["stdout_tail"] if line.startswith("step ")][-1].startswith("step 2: loss ")
    assert status["stdout_tail"][-1].startswith("val loss ")
    # the training step and the evaluation compiled (once each: the shapes are fixed), none failed
    compiles = doc["runtime"]["compiles"]
    assert {(c["function"], c["site"]["line"]) for c in compiles} == {
        ("GPT.forward", line_of(project / "train.py", "_, loss = compiled(x, y)")),
        ("GPT.forward", line_of(project / "train.py", "_, val_loss = compiled(x, y)"))}
    assert all(c["count"] == 1 and not c["failures"] for c in compiles)
    assert not [f for f in doc["findings"] if f["code"] in ("NP908", "NP909")]


def test_ddp_fixture_sees_one_core_per_rank(tmp_path, cli, report_schema):
    project = copy_fixture(tmp_path, "ddp_two_process")
    doc, code = check(cli, project, "--nproc", "2", command=["python", "train.py", "--steps", "3"])
    jsonschema.validate(doc, report_schema)
    status = doc["runtime"]["status"]
    assert code == 0 and status["exit_code"] == 0, status["stderr_tail"]
    assert status["command"][:2] == ["torchrun", "--nproc_per_node=2"]
    # each rank's own output (check keeps it per rank under torchrun)
    rank_lines = [line for rank in status["ranks"] for line in rank["stdout_tail"]]
    ranks = {int(m.group(1)): m.group(0) for m in
             (re.search(r"rank (\d): local_rank=\d device_count=(\d+) NEURON_RT_VISIBLE_CORES=(\S+)", line)
              for line in rank_lines) if m}
    assert ranks == {0: "rank 0: local_rank=0 device_count=2 NEURON_RT_VISIBLE_CORES=0",
                     1: "rank 1: local_rank=1 device_count=2 NEURON_RT_VISIBLE_CORES=1"}
    assert any("replicas in sync: True" in line for line in rank_lines)
    assert not [f for f in doc["findings"] if f["code"] in ("NP907", "NP909")]
    collectives = {(d["op"], d["site"]["line"]): d for d in doc["runtime"]["distributed"] if d["site"]}
    assert collectives[("all_reduce", line_of(project / "train.py", "dist.all_reduce(mean_loss)"))]["ranks"] == [0, 1]


def test_ddp_fixture_pinned_to_neuron_0_fails_on_rank_1(tmp_path, cli, report_schema):
    project = copy_fixture(tmp_path, "ddp_two_process")
    doc, code = check(cli, project, "--nproc", "2", command=["python", "train.py", "--steps", "3", "--bad-device"])
    jsonschema.validate(doc, report_schema)
    status = doc["runtime"]["status"]
    assert code != 0 and status["exit_code"] != 0
    (finding,) = [f for f in doc["findings"] if f["code"] == "NP907"]
    assert "Device index 0 is out of range. Valid range is 1 to 1 for this process" in finding["message"]
    (entry,) = [d for d in doc["runtime"]["distributed"] if d["event"] == "unsupported"]
    assert entry["ranks"] == [1] and entry["error"] == "ValueError" and entry["action"] == "raised"
    # as on Trainium (c10_neuron::set_device), rank 1's core is neuron:1: set_device(0) fails there
    train = project / "train.py"
    to_device = line_of(train, "torch.neuron.set_device(0)  # on CUDA")
    assert (entry["site"]["path"], entry["site"]["line"]) == ("train.py", to_device)
    # and the report names the failing rank with its exception and traceback
    (failure,) = doc["runtime"]["failures"]
    assert failure["rank"] == 1 and "Device index 0 is out of range" in failure["exception"]
    assert (failure["site"]["path"], failure["site"]["line"]) == ("train.py", to_device)
    assert failure["traceback"][0] == "Traceback (most recent call last):"
    assert any("torch.neuron.set_device(0)" in line for line in failure["traceback"])
    assert not any("site-packages" in line for line in failure["traceback"])
    assert any(f["code"] == "NP909" for f in doc["findings"])  # the command failed


RANK_DEVICE_REPRO = '''\
import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group(backend="nccl"); r = int(os.environ["LOCAL_RANK"])
dev = f"cuda:{r}"; torch.cuda.set_device(dev)
m = DDP(torch.nn.Linear(4, 4).to(dev), device_ids=[r])
m(torch.randn(2, 4, device=dev)).sum().backward()
print("rank", r, "trained on", next(m.parameters()).device)
'''


def test_rewritten_rank_devices_keep_the_local_rank_and_train_on_two_ranks(tmp_path, cli):
    """Scoreboard pattern F: the rewrite renames a rank's device (`f"neuron:{r}"`, `torch.neuron.set_device`,
    `device_ids=[r]` kept), TorchNeuron's neuron:<LOCAL_RANK>; it wrote index 0 (`"neuron"`, `device_ids=[0]`),
    and rank 1 failed with "Expected all tensors to be on the same device ... neuron:1 and neuron:0"."""
    project = tmp_path / "rank_repro"
    project.mkdir()
    (project / "r.py").write_text(RANK_DEVICE_REPRO)
    rewrite = cli("rewrite", str(project))
    assert rewrite.returncode == 0, rewrite.stderr
    text = (project / "r.py").read_text()
    assert 'dev = f"neuron:{r}"; torch.neuron.set_device(dev)' in text and "device_ids=[r]" in text
    doc, code = check(cli, project, "--nproc", "2", command=["python", "r.py"])
    status = doc["runtime"]["status"]
    assert code == 0 and status["exit_code"] == 0, status["stderr_tail"]
    lines = [line for rank in status["ranks"] for line in rank["stdout_tail"]]
    assert sorted(line for line in lines if line.startswith("rank ")) == [
        "rank 0 trained on neuron:0", "rank 1 trained on neuron:1"]
    assert not [f for f in doc["findings"] if f["code"] in ("NP907", "NP909")]


HOGWILD = '''\
import torch, torch.multiprocessing as mp
def train(m): print(m(torch.ones(2, 4, device=next(m.parameters()).device)).sum().item())
if __name__ == "__main__":
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    m = torch.nn.Linear(4, 1).to(dev); m.share_memory()
    mp.set_start_method("spawn", force=True)
    p = mp.Process(target=train, args=(m,)); p.start(); p.join()
'''


def test_hogwild_keeps_its_device_choice_and_np513_names_the_share(tmp_path, cli):
    """Scoreboard pattern C: a model moved to the chosen device and then shared between processes. The
    rewrite keeps that device choice (NP513, manual: on Trainium the share fails, see the next test), so the
    program runs as the original does on a host without CUDA, and NP513 stands at the `share_memory()`."""
    project = tmp_path / "hogwild"
    project.mkdir()
    (project / "h.py").write_text(HOGWILD)
    assert cli("rewrite", "--exit-zero", str(project)).returncode == 0  # NP513 is left: manual
    assert (project / "h.py").read_text().splitlines()[3] == HOGWILD.splitlines()[3]  # the choice is kept
    doc, code = check(cli, project, command=["python", "h.py"])
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]
    assert not doc["runtime"]["failures"]
    assert [(f["path"], f["line"]) for f in doc["findings"] if f["code"] == "NP513"] == [("h.py", 5)]


def test_hogwild_ported_by_hand_to_the_device_fails_as_on_trainium(tmp_path, cli):
    """The same program with the model moved to `neuron` by hand: starting the worker fails in PyTorch's
    pickler (`_share_fd_: only available on CPU`), as it does for any non-CPU device but CUDA."""
    project = tmp_path / "hogwild"
    project.mkdir()
    (project / "h.py").write_text(HOGWILD.replace('"cuda" if torch.cuda.is_available() else "cpu"', '"neuron"'))
    doc, code = check(cli, project, command=["python", "h.py"])
    assert code != 0 and doc["runtime"]["status"]["exit_code"] != 0
    (failure,) = doc["runtime"]["failures"]
    assert "_share_fd_: only available on CPU" in failure["exception"]
