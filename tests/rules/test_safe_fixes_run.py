"""A safe fix must not break a program that ran: every INVALID example whose safe fixes change it and
that declares ``runs=True`` is fixed with the rule (safe fixes only, the engine the example tests use),
written to a file and run as ``__main__`` on the simulated ``neuron`` device, as ``torchrun
--nproc-per-node 1`` would run it (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT set); it must exit 0.

The programs share one runner process that loads torch and the simulator once and forks a fresh child
per program (its own namespace and process state; a crash or hang is that program's verdict only). A
program that kills the runner itself is blamed alone and the ones after it run in a new runner, so one
crash never hides the others.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import simulator_env

from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rewrite.line_files import transform_text
from neuron_port.rules.instances import resolve_instance
from neuron_port.rules.registry import all_rules
from neuron_port.rules.spec import LineOptions

pytestmark = pytest.mark.slow

PER_PROGRAM_SECONDS = 60
RUNNER_SECONDS = 600  # the whole batch; a hang inside one program is cut by PER_PROGRAM_SECONDS first

# Imports torch and the simulator once, then forks one child per program of a manifest: each program
# starts from the same fresh process state (no runtime started, no process group, no default device set
# by an earlier one) and a crash or hang of one is only its own verdict. The runner appends one JSON line
# per program to a results file: ["start", id] before it, [id, "ok" | "fail", detail] after it.
RUNNER = r'''
import atexit, json, os, runpy, signal, socket, sys, time
import torch
import neuron_backend

assert neuron_backend.enable(), "the simulated neuron device did not register"
# modules many programs import, loaded once here so that each fork does not pay for them again
import torch._dynamo, torch.distributed.device_mesh, torch.profiler  # noqa: E401,F401
manifest, results_path, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
results = open(results_path, "a", buffering=1)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def run_child(path, log):
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.argv = [path]
    os.chdir(os.path.dirname(path))
    # what `torchrun --nproc-per-node 1` gives its one process
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port())
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        sys.excepthook(*sys.exc_info())  # as for an uncaught exception: the simulator records it, then prints
        code = 1
    # the exit of a normal run (atexit: the simulator's events, the program's own hooks) without the
    # second-long teardown of torch's modules, which changes no exit status
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


for case_id, path in json.load(open(manifest)):
    results.write(json.dumps(["start", case_id]) + "\n")
    log = path + ".log"
    pid = os.fork()
    if pid == 0:
        run_child(path, log)
    deadline, status = time.monotonic() + seconds, None
    while status is None:
        done, status = os.waitpid(pid, os.WNOHANG)
        if not done:
            status = None
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                status = f"still running after {seconds:.0f}s"
            time.sleep(0.01)
    if isinstance(status, int):
        status = 0 if status == 0 else (f"exit status {os.waitstatus_to_exitcode(status)}"
                                         if os.WIFEXITED(status) else f"killed by signal {os.WTERMSIG(status)}")
    output = open(log, errors="replace").read()[-4000:] if os.path.exists(log) else ""
    verdict = [case_id, "ok", ""] if status == 0 else [case_id, "fail", f"{status}\n{output}"]
    results.write(json.dumps(verdict) + "\n")
'''


def safe_fix_output(rule, example) -> str | None:
    """The example's source after this rule's safe fixes, or None when no safe fix applies."""
    source = example.source()
    if rule.KIND == "python":
        options = EngineOptions(target=example.target, unsafe_fixes=False)
        outcome = transform_source(source, [rule], options)
        fixed = outcome.code
    else:
        cores = resolve_instance(None, example.neuron_cores) if example.neuron_cores else None
        options = LineOptions(target=example.target, unsafe_fixes=False, cores=cores)
        outcome = transform_text(source, example.kind, options, [rule])
        fixed = outcome.text
    applied = any(f.fix.applied for f in outcome.findings if f.code == rule.CODE)
    return fixed if applied else None


def _invalid_examples():
    for rule in all_rules():
        if rule.KIND != "runtime":
            for i, example in enumerate(rule.INVALID):
                yield f"{rule.CODE}-{rule.NAME}-invalid{i}", rule, example


@functools.cache
def examples_with_safe_fixes() -> list[tuple[str, type, object, str]]:
    """(id, rule, example, safely fixed source) of every INVALID example a safe fix changes."""
    out = []
    for case_id, rule, example in _invalid_examples():
        fixed = safe_fix_output(rule, example)
        if fixed is not None:
            out.append((case_id, rule, example, fixed))
    return out


# the ids are known without fixing anything (collection stays cheap); the fixture fixes and runs them
RUNNABLE = {case_id: (rule, example) for case_id, rule, example in _invalid_examples() if example.runs}


def run_programs(programs: dict[str, Path], workdir: Path,
                 seconds: float = PER_PROGRAM_SECONDS) -> dict[str, tuple[str, str]]:
    """Run every program on the simulator; {id: ("ok" | "fail", detail)}. A program still running after
    ``seconds`` is killed and fails. A runner that dies fails the program it was running and starts
    again with the ones after it."""
    outcome: dict[str, tuple[str, str]] = {}
    pending = list(programs)
    attempt = 0
    while pending:
        attempt += 1
        manifest = workdir / f"manifest{attempt}.json"
        results = workdir / f"results{attempt}.jsonl"
        manifest.write_text(json.dumps([[case_id, str(programs[case_id])] for case_id in pending]))
        env = simulator_env(NEURON_PORT_SIMULATE="1", NEURON_PORT_EVENTS_DIR=str(workdir / "events"))
        try:
            proc = subprocess.run(
                [sys.executable, "-c", RUNNER, str(manifest), str(results), str(seconds)],
                cwd=workdir, env=env, capture_output=True, text=True, timeout=RUNNER_SECONDS,
            )
            death = f"the runner exited with {proc.returncode}\n{proc.stderr[-3000:]}"
        except subprocess.TimeoutExpired as exc:
            death = f"the runner hung past {RUNNER_SECONDS}s\n{(exc.stderr or b'')[-3000:]!r}"
        started = None
        for line in results.read_text().splitlines() if results.exists() else ():
            try:
                record = json.loads(line)
            except ValueError:  # the runner died writing it
                break
            if record[0] == "start":
                started = record[1]
            else:
                outcome[record[0]] = (record[1], record[2])
                started = None
        if started is None and not any(p in outcome for p in pending):
            started = pending[0]  # the runner died before its first program: blame that one, go on
        if started is not None:
            outcome[started] = ("fail", death)
        pending = [case_id for case_id in pending if case_id not in outcome]
    return outcome


@pytest.fixture(scope="module")
def run_results(sim_build, tmp_path_factory) -> tuple[dict[str, tuple[str, str]], dict[str, Path]]:
    workdir = tmp_path_factory.mktemp("safe_fixes_run")
    programs = {}
    for case_id, (rule, example) in RUNNABLE.items():
        fixed = safe_fix_output(rule, example)
        if fixed is None:
            continue  # test_runnable_examples_are_python_with_a_safe_fix says so
        folder = workdir / case_id  # each program its own cwd: files it writes do not meet another's
        folder.mkdir()
        programs[case_id] = folder / "program.py"
        programs[case_id].write_text(fixed)
    return run_programs(programs, workdir), programs


@pytest.mark.parametrize("case_id", list(RUNNABLE))
def test_safe_fix_output_runs(case_id, run_results):
    results, programs = run_results
    assert case_id in results, f"{case_id}: runs=True, but no safe fix changes it"
    status, detail = results[case_id]
    assert status == "ok", (
        f"{case_id}: the safely fixed program fails on the simulator\n{programs[case_id].read_text()}\n{detail}")


def test_every_example_with_a_safe_fix_decides_whether_it_runs(record_property):
    safe = examples_with_safe_fixes()
    undecided = [case_id for case_id, _, example, _ in safe if not (example.runs or example.not_runnable)]
    assert undecided == [], "declare runs=True or not_runnable='<why>' on these INVALID examples"
    record_property("runnable", len(RUNNABLE))
    record_property("with_a_safe_fix", len(safe))
    print(f"\n{len(RUNNABLE)} of {len(safe)} INVALID examples with a safe fix run on the simulator")


def test_runnable_examples_are_python_with_a_safe_fix():
    safe = {case_id for case_id, *_ in examples_with_safe_fixes()}
    for case_id, (rule, _example) in RUNNABLE.items():
        assert rule.KIND == "python", f"{case_id}: only Python programs run"
        assert case_id in safe, f"{case_id}: runs=True but no safe fix changes it: nothing new to run"


def test_a_crashing_program_fails_alone_and_the_others_still_run(sim_build, tmp_path):
    """The runner itself: a program that raises, exits, crashes, hangs or kills the runner fails alone;
    the verdicts of the others still come."""
    sources = {
        "first": "import torch\nx = torch.ones(2, device='neuron')\nassert x.sum().item() == 2\n",
        "raises": "import torch\ntorch.zeros(2, device='cuda')\n",
        "dies": "import os\nos._exit(3)\n",
        "after": "import torch\nprint(torch.arange(3, device='neuron').tolist(), end='')\n",
        "exits": "import sys\nsys.exit(2)\n",
        "kills_runner": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
        "hangs": "import time\ntime.sleep(600)\n",
        "segfaults": "import ctypes\nctypes.string_at(0)\n",
        "last": "import torch\nassert torch.neuron.is_available()\n",
    }
    programs = {}
    for name, source in sources.items():
        programs[name] = tmp_path / f"{name}.py"
        programs[name].write_text(source)
    results = run_programs(programs, tmp_path, seconds=6)
    assert {name: status for name, (status, _) in results.items()} == {
        "first": "ok", "raises": "fail", "dies": "fail", "after": "ok", "exits": "fail",
        "kills_runner": "fail", "hangs": "fail", "segfaults": "fail", "last": "ok"}
    assert results["hangs"][1].startswith("still running after 6s")
    assert results["segfaults"][1].startswith("killed by signal 11")
    assert results["dies"][1].startswith("exit status 3")
    assert "Torch not compiled with CUDA enabled" in results["raises"][1]
    assert "the runner exited with -9" in results["kills_runner"][1]
