"""Issue 12, items 1 and 3: `neuron-port check` keeps what the simulator counted when the process dies
without running any Python (SIGSEGV, os._exit, SIGKILL from outside, as the OOM killer sends), and
builds its report when the events folder holds malformed lines or files, naming what it ignored. Every
test runs the real CLI on a real script; nothing flushes the events by hand."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, simulator_env

pytestmark = pytest.mark.slow

# One training step: a CPU fallback (linalg_qr) and float64 ops (demoted on Trainium), forward, backward
# and an optimizer step; a flushed progress line after it.
TRAIN = """\
import os, sys, torch
open("pid.txt", "w").write(str(os.getpid()))
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = int(sys.argv[1])
for step in range(steps):
    x = torch.randn(8, 16, device="neuron")
    loss = model(x).pow(2).mean()
    q = torch.linalg.qr(x)[0]
    d = (x.double() * 2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} done", flush=True)
DEATH
"""

DEATHS = {
    "sigsegv": "import signal, time; time.sleep(3); os.kill(os.getpid(), signal.SIGSEGV)",
    "os_exit": "os._exit(3)",
    "clean": "",
}


def write_project(tmp_path: Path, death: str) -> Path:
    project = tmp_path / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / "train.py").write_text(TRAIN.replace("DEATH", DEATHS[death]))
    return project


def check_command(project: Path, steps: int) -> list[str]:
    return [sys.executable, "-m", "neuron_port", "check", str(project), "-o", str(project / "report.json"),
            "--", "python", "train.py", str(steps)]


def run_check(project: Path, steps: int) -> tuple[dict, subprocess.CompletedProcess]:
    proc = subprocess.run(check_command(project, steps), cwd=project, env=cli_env(), capture_output=True,
                          text=True, timeout=600)
    return json.loads((project / "report.json").read_text()), proc


def cli_env() -> dict[str, str]:
    env = simulator_env()
    env.pop("NEURON_PORT_SIMULATE", None)
    return env


def fallback_calls(runtime: dict, op: str = "aten::linalg_qr") -> int:
    return sum(f["calls"] for f in runtime["fallbacks"] if f["op"] == op)


def float64_calls(runtime: dict, op: str = "aten::mul.Tensor") -> int:
    return sum(d["calls"] for d in runtime["demotions"] if d["op"] == op and d.get("dtype", "float64") == "float64")


def steps_printed(runtime: dict) -> int:
    done = [int(m.group(1)) for line in runtime["status"]["stdout_tail"] if (m := re.match(r"step (\d+) done", line))]
    return max(done) + 1 if done else 0


@pytest.fixture(scope="module")
def per_step(tmp_path_factory, sim_build) -> dict:
    """Op calls of one training step, from two clean runs (2 and 4 steps): the slope."""
    counts = {}
    for steps in (2, 4):
        doc, proc = run_check(write_project(tmp_path_factory.mktemp(f"clean{steps}"), "clean"), steps)
        assert doc["runtime"]["status"]["exit_code"] == 0, proc.stderr
        counts[steps] = doc["runtime"]["ops"]["calls"]
    return {"calls": (counts[4] - counts[2]) // 2, "base": counts[2] - 2 * ((counts[4] - counts[2]) // 2)}


@pytest.mark.parametrize("death, code", [("sigsegv", -11), ("os_exit", 3)])
def test_item1_a_hard_death_keeps_the_counts(tmp_path, per_step, death, code):
    project = write_project(tmp_path, death)
    doc, proc = run_check(project, 5)
    runtime = doc["runtime"]
    assert runtime["status"]["exit_code"] == code, proc.stderr
    assert steps_printed(runtime) == 5
    # everything ran before the death: the counts of a clean run of 5 steps
    assert runtime["ops"]["calls"] == per_step["base"] + 5 * per_step["calls"]
    assert fallback_calls(runtime) == 5 and float64_calls(runtime) == 5
    assert [(s["path"], s["line"]) for f in runtime["fallbacks"] if f["op"] == "aten::linalg_qr" for s in f["sites"]] \
        == [("train.py", 9)]
    assert runtime["processes"][0]["complete"] is False and runtime["processes"][0]["rebuilt"] is True
    assert "rebuilt from its crash-proof records" in proc.stderr


def test_item1_sigkill_at_random_moments_keeps_the_steps_that_ran(tmp_path, per_step):
    rng = random.Random(os.environ.get("NEURON_PORT_TEST_SEED", time.time_ns()))
    for attempt in range(4):
        project = write_project(tmp_path / f"kill{attempt}", "clean")
        pid_file = project / "pid.txt"
        check = subprocess.Popen(check_command(project, 100000), cwd=project, env=cli_env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and check.poll() is None, "the script did not start"
            time.sleep(0.02)
        delay = rng.uniform(0.0, 2.5)  # from the first op (model on the device) to well into training
        time.sleep(delay)
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        _, stderr = check.communicate(timeout=300)
        runtime = json.loads((project / "report.json").read_text())["runtime"]
        assert runtime["status"]["signal"] == "SIGKILL", stderr
        printed = steps_printed(runtime)
        what = f"attempt {attempt}: killed after {delay:.2f} s, {printed} step(s) printed"
        # at least the ops of the steps printed, at most those of one more step
        assert fallback_calls(runtime) in (printed, printed + 1), what
        assert float64_calls(runtime) in (printed, printed + 1), what
        assert per_step["base"] * (printed > 0) + printed * per_step["calls"] <= runtime["ops"]["calls"], what
        assert runtime["ops"]["calls"] <= per_step["base"] + (printed + 1) * per_step["calls"], what
        if printed:
            assert runtime["ops"]["calls"] > 0 and runtime["ops"]["unique_signatures"] > 0, what


# ---------------------------------------------------------------- item 3: malformed events
# The script writes into its own events folder what a broken or foreign writer might leave there.
MALFORMED = {
    "truncated_line": ('{"kind": "op", "op": "aten::add.Tensor", "calls": 3', "not JSON"),
    "non_json": ("this is not json at all", "not JSON"),
    "not_an_object": ('[1, 2, 3]', "not an object: list"),
    "wrong_field_types": ('{"kind": "fallback", "op": "aten::foo", "calls": "many", "sites": 7}',
                          "sites: expected a list, got int 7"),
}
GARBAGE_SCRIPT = """\
import os, pathlib, torch
x = torch.ones(4, device="neuron")
y = torch.linalg.qr(torch.ones(3, 3, device="neuron"))[0]
folder = pathlib.Path(os.environ["NEURON_PORT_EVENTS_DIR"])
WRITE
"""


def test_item3_a_torn_and_a_malformed_record_in_the_journal_are_named(tmp_path, cli):
    """The process's own crash-proof journal: a bad line in the middle, a cut last line, then a hard death."""
    project = tmp_path / "project"
    project.mkdir()
    write = """\
(journal,) = folder.glob("neuron-records-*.journal")
with open(journal, "a") as f:
    f.write('{"kind": "signature", "slot": "seven", "op": "aten::foo", "policy": "native"}\\n')
z = torch.linalg.qr(torch.ones(3, 3, device="neuron"))[0]
with open(journal, "a") as f:
    f.write('{"kind": "sighting", "seq": 1')
os._exit(0)"""
    (project / "job.py").write_text(GARBAGE_SCRIPT.replace("WRITE", write))
    result = cli("check", str(project), "-o", str(project / "report.json"), "--", "python", "job.py",
                 env={"OMP_NUM_THREADS": "1"})
    runtime = json.loads((project / "report.json").read_text())["runtime"]
    assert runtime["status"]["exit_code"] == 0, result.stderr
    assert fallback_calls(runtime) == 2  # both qr calls, counted after the bad line too
    notes = [line for line in result.stderr.splitlines() if "ignored" in line]
    assert len(notes) == 2, result.stderr
    assert re.search(r"neuron-records-norank-pid\d+\.journal:\d+: ignored: slot: expected an integer", notes[0])
    assert re.search(r"\.journal:\d+: ignored: the last line is cut", notes[1])
    # the report says it too, on the process
    (process,) = runtime["processes"]
    printed = [line.split("neuron-port: events: ", 1)[1] for line in notes]
    assert [n for n in process["notes"] if "ignored" in n] == printed, process


@pytest.mark.parametrize("case", [*MALFORMED, "garbage_file"])
def test_item3_malformed_events_are_ignored_and_named(tmp_path, cli, case):
    project = tmp_path / "project"
    project.mkdir()
    if case == "garbage_file":
        write = "(folder / 'core.12345').write_bytes(os.urandom(300))"
        expected = "core.12345: ignored: not a file the simulator writes"
    else:
        line, why = MALFORMED[case]
        # another events file of this run in the folder (a snapshot that is complete but for the bad line)
        write = (f"(folder / 'neuron-events-rank7-pid1.jsonl').write_text("
                 f"'{{\"kind\": \"process\", \"pid\": 1, \"token\": \"' + os.environ['NEURON_PORT_EVENTS_TOKEN'] + '\"}}\\n'"
                 f" + {line!r} + '\\n{{\"kind\": \"summary\", \"complete\": true}}\\n')")
        expected = f"neuron-events-rank7-pid1.jsonl:2: ignored: {why}"
    (project / "job.py").write_text(GARBAGE_SCRIPT.replace("WRITE", write))
    result = cli("check", str(project), "-o", str(project / "report.json"), "--", "python", "job.py",
                 env={"OMP_NUM_THREADS": "1"})
    report = json.loads((project / "report.json").read_text())
    runtime = report["runtime"]
    assert runtime["status"]["exit_code"] == 0, result.stderr
    assert fallback_calls(runtime) == 1  # the script's own events are all there
    assert expected in result.stderr, result.stderr


# ---------------------------------------------------------------- item 2: the folder is not re-created
LATE_GRANDCHILD = """\
import os, subprocess, sys, torch
open("events_dir.txt", "w").write(os.environ["NEURON_PORT_EVENTS_DIR"])
x = torch.ones(2, device="neuron") + 1
late = "import time; time.sleep(3); import torch; torch.ones(2, device='neuron') + 1; open('late.txt', 'w').write('ran')"
# a daemon check cannot find (it ends the command's process tree when the command exits): without the run's
# marker variable, in a session of its own, and nobody's child once the middle process has exited
env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_PORT_RUN_")}
spawn = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', sys.argv[1]], start_new_session=True, "
         "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)")
subprocess.Popen([sys.executable, "-c", spawn, late], env=env, start_new_session=True).wait()
"""


def test_item2_a_late_grandchild_does_not_recreate_the_events_folder(tmp_path, cli):
    project = tmp_path / "project"
    project.mkdir()
    (project / "job.py").write_text(LATE_GRANDCHILD)
    result = cli("check", str(project), "-o", str(project / "report.json"), "--", "python", "job.py",
                 env={"OMP_NUM_THREADS": "1"})
    assert json.loads((project / "report.json").read_text())["runtime"]["status"]["exit_code"] == 0, result.stderr
    events_dir = Path((project / "events_dir.txt").read_text())
    deadline = time.monotonic() + 120
    while not (project / "late.txt").exists():  # the grandchild ran its op after check had finished
        assert time.monotonic() < deadline, "the late grandchild did not run"
        time.sleep(0.1)
    assert not events_dir.exists() and not events_dir.parent.exists()
