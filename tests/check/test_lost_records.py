"""Issue 33, item 7: lost records are said. `neuron-port check` of a program that removes its events folder,
or whose forked children use the device (and are SIGKILLed, or end normally), reports NP912 naming the
process and saying that its device work is missing, never "no op reached the neuron device" or a silent
success. A forked child that stays on the CPU (a DataLoader worker) is no process of the report and no
finding. Every test runs the real CLI on a real script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conftest import simulator_env

pytestmark = pytest.mark.slow

REMOVES_ITS_FOLDER = """\
import os, shutil, torch
x = torch.ones(4, device="neuron")
print((x * 2).sum().item())
shutil.rmtree(os.environ["NEURON_PORT_EVENTS_DIR"])
"""

# two children that use the device, SIGKILLed while they sleep; the parent's own work is counted as before
KILLS_ITS_CHILDREN = """\
import os, signal, sys, time, torch
for i in range(2):  # a second run in the same folder (text_of) must wait for its own children again
    if os.path.exists(f"child{i}.ready"):
        os.remove(f"child{i}.ready")
x = torch.ones(4, device="neuron") + 1
children = []
for i in range(2):
    pid = os.fork()
    if pid == 0:
        y = torch.ones(8, device="neuron") * 3
        z = y @ y + x.sum()
        open(f"child{i}.ready", "w").close()
        time.sleep(120)
        os._exit(0)
    children.append(pid)
deadline = time.time() + 60
while not all(os.path.exists(f"child{i}.ready") for i in range(2)) and time.time() < deadline:
    time.sleep(0.05)
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
open("children.txt", "w").write(" ".join(map(str, children)))
print("parent done", os.getpid())
"""

# the DataLoader case: forked workers that only touch CPU tensors, ending normally
CPU_CHILDREN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
data = TensorDataset(torch.arange(64, dtype=torch.float32).reshape(16, 4))
model = torch.nn.Linear(4, 2).to("neuron")
for (batch,) in DataLoader(data, batch_size=4, num_workers=2):
    model(batch.to("neuron"))
print("done")
"""


def run_check(tmp_path: Path, script: str) -> tuple[dict, subprocess.CompletedProcess]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(script)
    env = simulator_env()
    env.pop("NEURON_PORT_SIMULATE", None)
    proc = subprocess.run([sys.executable, "-m", "neuron_port", "check", str(project), "-o",
                           str(tmp_path / "report.json"), "--", "python", "train.py"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return json.loads((tmp_path / "report.json").read_text()), proc


def np912(doc: dict) -> list[dict]:
    return [f for f in doc["findings"] if f["code"] == "NP912"]


def text_of(tmp_path: Path) -> str:
    env = simulator_env(COLUMNS="200")
    env.pop("NEURON_PORT_SIMULATE", None)
    proc = subprocess.run([sys.executable, "-m", "neuron_port", "check", str(tmp_path / "project"), "--", "python",
                           "train.py"], cwd=tmp_path / "project", env=env, capture_output=True, text=True,
                          timeout=600)
    return proc.stdout


def test_a_removed_events_folder_is_said_not_read_as_no_device_use(tmp_path, sim_build, report_schema):
    doc, proc = run_check(tmp_path, REMOVES_ITS_FOLDER)
    jsonschema.validate(doc, report_schema)
    runtime = doc["runtime"]
    assert runtime["status"]["exit_code"] == 0 and "8.0" in runtime["status"]["stdout_tail"], proc.stderr
    [finding] = np912(doc)
    assert finding["severity"] == "warning" and finding["path"] == "."
    assert "the events folder ($NEURON_PORT_EVENTS_DIR) was removed while the command ran" in finding["message"]
    assert "missing from the counts" in finding["message"]
    assert [lost["reason"] for lost in runtime["lost_records"]] == ["folder_removed"]
    text = text_of(tmp_path)
    assert "no op reached the neuron device" not in text
    assert "records lost: the events folder was removed" in text and "NP912" in text


def test_forked_children_killed_after_using_the_device_are_named_with_their_work_missing(tmp_path, sim_build,
                                                                                         report_schema):
    doc, proc = run_check(tmp_path, KILLS_ITS_CHILDREN)
    jsonschema.validate(doc, report_schema)
    runtime = doc["runtime"]
    assert runtime["status"]["exit_code"] == 0, proc.stderr
    children = sorted(int(p) for p in (tmp_path / "project" / "children.txt").read_text().split())
    parent = int(next(line for line in runtime["status"]["stdout_tail"] if line.startswith("parent done")).split()[-1])
    lost = sorted(runtime["lost_records"], key=lambda lost: lost["pid"])
    assert [(lost["reason"], lost["pid"], lost["parent_pid"]) for lost in lost] == \
        [("forked_child", pid, parent) for pid in children]
    assert all(lost["calls"] > 0 and lost["argv"] == ["train.py"] for lost in lost)
    messages = sorted(f["message"] for f in np912(doc))
    assert len(messages) == 2
    for pid, message in zip(children, messages):
        assert f"process {pid}, forked from process {parent} (train.py), made " in message
        assert "call(s) on the neuron device that are missing from the counts" in message
    # the parent is the one process recorded, with its own work only (the children's never leak into it)
    assert [p["pid"] for p in runtime["processes"]] == [parent]
    text = text_of(tmp_path)
    assert "records lost: 2 forked child(ren) used the device" in text


def test_cpu_only_forked_workers_are_no_finding_and_no_process(tmp_path, sim_build):
    doc, proc = run_check(tmp_path, CPU_CHILDREN)
    runtime = doc["runtime"]
    assert runtime["status"]["exit_code"] == 0, proc.stderr
    assert np912(doc) == [] and "lost_records" not in runtime
    assert len(runtime["processes"]) == 1 and runtime["ops"]["calls"] > 0
