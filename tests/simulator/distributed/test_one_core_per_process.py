"""One NeuronCore per process under init_process_group(backend="neuron") (issue 10, part 3): 2-rank torchrun runs.

TorchNeuron's process-group setup sets NEURON_RT_VISIBLE_CORES=<LOCAL_RANK> when unset, asserts that the
runtime had not started ("Neuron runtime should not be initialized before the init_process_group.") and that
the process sees one core ("Attempted to have more than one device per process in distributed setup"). As in
c10_neuron (NeuronDevice.cpp), that core is neuron:<LOCAL_RANK>, the current device, and device_count() is
LOCAL_WORLD_SIZE (issue 35 item 7: accelerate's DDP(device_ids=[local_process_index]) failed with neuron:0). The
cases the sources leave open (rules/op_policy.toml [distributed.unconfirmed]) are reported as NP907 events.
"""

from __future__ import annotations

import pytest

from .conftest import torchrun

pytestmark = pytest.mark.slow

PRELUDE = """\
import json, os, torch, torch.distributed as dist
def result(**kw): os.write(1, ("RESULT:" + json.dumps(kw) + "\\n").encode())  # one write: ranks share the pipe
rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
def error(fn):
    try:
        fn()
        return None
    except Exception as e:
        return [type(e).__name__, str(e)]
"""

ONE_CORE = PRELUDE + """\
before = {"count": torch.neuron.device_count(), "available": torch.neuron.is_available(),
          "initialized": torch.neuron.is_initialized(), "visible": os.environ.get("NEURON_RT_VISIBLE_CORES")}
torch.neuron.set_device(0)  # SET_DEVICE BEFORE INIT
del os.environ["LOCAL_WORLD_SIZE"]  # the local rank then comes from the store, as in TorchNeuron
dist.init_process_group(backend="neuron")  # INIT
after = {"count": torch.neuron.device_count(), "current": torch.neuron.current_device(),
         "accel_count": torch.accelerator.device_count(), "initialized": torch.neuron.is_initialized(),
         "visible": os.environ.get("NEURON_RT_VISIBLE_CORES")}
t = torch.full((2,), float(rank + 1), device="neuron")
dist.all_reduce(t)
set_rank = error(lambda: torch.neuron.set_device(local_rank))
set_zero = error(lambda: torch.neuron.set_device(0))  # SET_DEVICE AFTER INIT
on_rank = error(lambda: torch.ones(1, device=f"neuron:{local_rank}"))
on_zero = error(lambda: torch.ones(1, device="neuron:0"))  # another process's core on rank 1
import threading
in_thread = []  # a thread that never set a device uses the process's core (c10_neuron's global default)
worker = threading.Thread(target=lambda: in_thread.append(str(torch.ones(1, device="neuron").device)))
worker.start(); worker.join()
result(rank=rank, before=before, after=after, allreduce=t.tolist(), device=str(t.device), set_rank=set_rank,
       set_zero=set_zero, on_rank=on_rank, on_zero=on_zero, in_thread=in_thread)
dist.destroy_process_group()
"""


def unsupported(run, rank: int) -> list[dict]:
    return [e for e in run.rank_events(rank) if e["kind"] == "distributed" and e.get("event") == "unsupported"]


@pytest.fixture(scope="module")
def one_core(sim_build, tmp_path_factory):
    return torchrun(ONE_CORE, tmp_path_factory.mktemp("one_core"))


def test_each_rank_sees_one_core_after_init(one_core):
    results = one_core.results()
    assert sorted(results) == [0, 1], one_core.proc.stderr[-3000:]
    for rank, r in results.items():
        assert r["before"] == {"count": 4, "available": True, "initialized": False, "visible": None}
        assert r["after"] == {"count": 2, "current": rank, "accel_count": 2, "initialized": True,
                              "visible": str(rank)}
        assert r["allreduce"] == [3.0, 3.0] and r["device"] == f"neuron:{rank}"
        assert r["in_thread"] == [f"neuron:{rank}"]


def test_the_local_rank_is_the_process_device_and_no_other_index(one_core):
    results = one_core.results()
    for rank in (0, 1):
        assert results[rank]["set_rank"] is None and results[rank]["on_rank"] is None
    assert results[0]["set_zero"] is None and results[0]["on_zero"] is None
    assert results[1]["set_zero"] == ["ValueError", "Device index 0 is out of range. Valid range is 1 to 1 for this process"]
    # memory on neuron:0 from rank 1: TorchNeuron's allocator (c10_neuron::get_vnc_id) refuses it
    assert results[1]["on_zero"][0] == "RuntimeError"
    assert ("Attempted to access device that doesn't attach to this process, received 0 expected to be equal or "
            "greater than 1") in results[1]["on_zero"][1]


def test_open_cases_are_np907_events_on_rank_1(one_core):
    assert unsupported(one_core, 0) == []
    events = {e["op"]: e for e in unsupported(one_core, 1)}
    assert set(events) == {"set_device", "device"}
    before = events["set_device"]
    assert before["action"] == "recorded" and before["site"]["line"] == one_core.line_of("SET_DEVICE BEFORE INIT")
    assert "torch.neuron.set_device(0) before init_process_group" in before["message"]
    after = events["device"]
    assert after["action"] == "raised" and after["error"] == "ValueError"
    assert after["site"]["line"] == one_core.line_of("SET_DEVICE AFTER INIT")
    assert after["message"].startswith("[neuron-port simulator] Device index 0 is out of range. Valid range is 1 to 1")


def test_the_process_group_event_records_the_setup(one_core):
    for rank in (0, 1):
        pg = next(e for e in one_core.rank_events(rank) if e["kind"] == "distributed" and e.get("event") == "process_group")
        assert (pg["local_rank"], pg["local_world_size"], pg["visible_cores"], pg["device_count"]) == (rank, 2, str(rank), 2)


RUNTIME_BEFORE_INIT = PRELUDE + """\
os.environ["NEURON_PORT_UNSUPPORTED"] = os.environ.get("MODE", "raise")
x = torch.ones(3, device="neuron")  # TOUCH
init = error(lambda: dist.init_process_group(backend="neuron"))  # INIT
result(rank=rank, init=init, count=torch.neuron.device_count(), ok=dist.is_initialized() and (x * 2).sum().item() == 6)
if dist.is_initialized():
    dist.destroy_process_group()
"""


def test_a_device_touched_before_init_fails_init_on_every_rank(sim_build, tmp_path):
    run = torchrun(RUNTIME_BEFORE_INIT, tmp_path)
    results = run.results()
    assert sorted(results) == [0, 1], run.proc.stderr[-3000:]
    for rank, r in results.items():
        assert r["init"][0] == "AssertionError"
        assert "Neuron runtime should not be initialized before the init_process_group." in r["init"][1]
        (ev,) = unsupported(run, rank)
        assert (ev["op"], ev["error"], ev["action"]) == ("init_process_group", "AssertionError", "raised")
        assert ev["site"]["line"] == run.line_of("# INIT")


def test_record_mode_records_and_continues(sim_build, tmp_path):
    run = torchrun(RUNTIME_BEFORE_INIT.replace('os.environ.get("MODE", "raise")', '"record"'), tmp_path)
    results = run.results()
    assert sorted(results) == [0, 1], run.proc.stderr[-3000:]
    for rank, r in results.items():
        assert r["init"] is None and r["ok"] is True and r["count"] == 2
        (ev,) = unsupported(run, rank)
        assert (ev["op"], ev["action"]) == ("init_process_group", "recorded")


SEVERAL_CORES = PRELUDE + """\
os.environ["NEURON_RT_VISIBLE_CORES"] = "0-1"  # the user gives each process two cores
result(rank=rank, init=error(lambda: dist.init_process_group(backend="neuron")))  # INIT
"""


def test_a_visible_core_range_fails_with_more_than_one_device(sim_build, tmp_path):
    run = torchrun(SEVERAL_CORES, tmp_path)
    results = run.results()
    assert sorted(results) == [0, 1], run.proc.stderr[-3000:]
    for rank, r in results.items():
        assert r["init"][0] == "AssertionError"
        assert "Attempted to have more than one device per process in distributed setup" in r["init"][1]
        assert "NEURON_RT_VISIBLE_CORES=0-1" in r["init"][1]
        (ev,) = unsupported(run, rank)
        assert ev["site"]["line"] == run.line_of("# INIT")


MORE_RANKS_THAN_CORES = PRELUDE + """\
os.environ["NEURON_RT_NUM_CORES"] = "1"  # a node with one NeuronCore, two processes
dist.init_process_group(backend="neuron")  # INIT
result(rank=rank, count=torch.neuron.device_count())
dist.barrier()
"""


def test_more_processes_than_cores_fails_the_extra_rank(sim_build, tmp_path):
    run = torchrun(MORE_RANKS_THAN_CORES, tmp_path)
    assert run.proc.returncode != 0
    assert "RuntimeError: [neuron-port simulator] local rank 1 needs NeuronCore 1" in run.proc.stderr
    (ev,) = unsupported(run, 1)
    assert (ev["op"], ev["error"], ev["action"]) == ("init_process_group", "RuntimeError", "raised")
    assert "the simulated node has 1 logical NeuronCores" in ev["message"]
    assert unsupported(run, 0) == []
