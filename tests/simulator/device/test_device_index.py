"""Device indices of the C++ core: every binding that takes one, and the torch.neuron functions that
reach them, reject out-of-range indices (too large or negative) with a clear error instead of
reading or writing past a per-device table; valid indices keep working."""

import pytest

from conftest import simulator_env

from ..conftest import PRELUDE

pytestmark = pytest.mark.slow

# Two visible devices: index 2 is out of range although it is inside the C++ tables (128 entries),
# 256 narrows to device 0 as an int8 and 200 to -56.
ENV = {"NEURON_RT_VISIBLE_CORES": "0-1"}
BAD = [2, 3, 127, 128, 200, 256, 1 << 40, -1, -2, -56, -129]
BINDINGS = ["set_device", "memory_stats", "reset_peak_memory_stats", "empty_cache", "default_generator"]

CHECK = PRELUDE + """
C = neuron_backend.device._C
BAD = %r
BINDINGS = %r

def outcome(fn, *args):
    try:
        r = fn(*args)
    except Exception as e:  # noqa: BLE001
        return {"error": type(e).__name__, "message": str(e).splitlines()[0]}
    return {"ok": str(r)[:60]}

out = {"count": C.device_count(), "bindings": {}, "public": {}, "valid": {}}
C.set_device(1)
for name in BINDINGS:
    out["bindings"][name] = {str(i): outcome(getattr(C, name), i) for i in BAD}
out["current_after_bad_set_device"] = C.current_device()
C.set_device(0)

tn = torch.neuron
public = {
    "reset_peak_memory_stats": tn.reset_peak_memory_stats, "memory_stats": tn.memory_stats,
    "memory_allocated": tn.memory_allocated, "max_memory_allocated": tn.max_memory_allocated,
    "memory_reserved": tn.memory_reserved, "max_memory_reserved": tn.max_memory_reserved,
    "reset_max_memory_allocated": tn.reset_max_memory_allocated, "mem_get_info": tn.mem_get_info,
    "memory_summary": tn.memory_summary, "set_device": tn.set_device,
}
for name, fn in public.items():
    out["public"][name] = {str(i): outcome(fn, i) for i in (2, 200, -1)}
    out["public"][name]["neuron:2"] = outcome(fn, "neuron:2")

# valid indices, and the current-device forms (None, "neuron", torch.device("neuron")) of device.py
x = torch.ones(1024, device="neuron:1")
for i in range(C.device_count()):
    C.set_device(i)
    out["valid"][str(i)] = {
        "current": C.current_device(),
        "stats_keys": sorted(C.memory_stats(i))[:2],
        "reset_peak": outcome(C.reset_peak_memory_stats, i),
        "empty_cache": outcome(C.empty_cache, i),
        "generator_device": str(C.default_generator(i).device),
    }
C.set_device(0)
tn.set_device(1)
out["public_valid"] = {
    "current": tn.current_device(),
    "allocated_1": tn.memory_allocated(1),
    "allocated_current": [tn.memory_allocated(), tn.memory_allocated("neuron"),
                          tn.memory_allocated(torch.device("neuron")), tn.memory_allocated("neuron:1")],
    "reset_peak": outcome(tn.reset_peak_memory_stats, None),
    "empty_cache": outcome(tn.empty_cache),
    "summary": "memory summary" in tn.memory_summary(1),
    "generators": [str(g.device) for g in tn.default_generators],
}
result(out)
"""


@pytest.fixture(scope="module")
def checked(sim_build, tmp_path_factory):
    import subprocess
    import sys
    import textwrap

    from ..conftest import SimRun

    tmp = tmp_path_factory.mktemp("devidx")
    script = tmp / "check.py"
    script.write_text(textwrap.dedent(CHECK % (BAD, BINDINGS)))
    env = simulator_env(NEURON_PORT_SIMULATE="1", **ENV)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=240)
    if proc.returncode != 0:  # e.g. a write past a per-device table crashed the process
        pytest.fail(f"the device-index script died (exit code {proc.returncode}):\n{proc.stderr[-3000:]}")
    return SimRun(proc, tmp / "events", script).result


def _expect_range_error(o: dict, what: str, index) -> None:
    assert o.get("error") == "RuntimeError", o
    assert o["message"].startswith(f"{what}: Invalid device id: {index}. Valid range is 0 to 1 (device_count() is 2)"), o


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("index", BAD)
def test_binding_rejects_out_of_range_index(checked, binding, index):
    assert checked["count"] == 2
    _expect_range_error(checked["bindings"][binding][str(index)], binding, index)


def test_rejected_set_device_keeps_current_device(checked):
    # set_device(256) used to narrow to int8 0 and switch to device 0 silently
    assert checked["current_after_bad_set_device"] == 1


@pytest.mark.parametrize("fn", ["reset_peak_memory_stats", "memory_stats", "memory_allocated", "max_memory_allocated",
                                "memory_reserved", "max_memory_reserved", "reset_max_memory_allocated",
                                "mem_get_info", "memory_summary"])
@pytest.mark.parametrize("index", ["2", "200", "-1", "neuron:2"])
def test_public_memory_functions_reject_out_of_range_index(checked, fn, index):
    o = checked["public"][fn][index]
    binding = "reset_peak_memory_stats" if fn.startswith("reset_") else "memory_stats"
    _expect_range_error(o, binding, index.replace("neuron:", ""))


@pytest.mark.parametrize("index", ["2", "200", "-1", "neuron:2"])
def test_public_set_device_rejects_out_of_range_index(checked, index):
    # device.py checks the index itself before the binding and raises ValueError like
    # torch_neuronx; tests/simulator/device/test_device.py and test_activation.py rely on it
    o = checked["public"]["set_device"][index]
    i = index.replace("neuron:", "")
    assert o == {"error": "ValueError", "message": f"Invalid device id: {i}. Valid range is 0 to 1"}


def test_valid_indices_still_work(checked):
    for i in ("0", "1"):
        v = checked["valid"][i]
        assert v["current"] == int(i)
        assert v["stats_keys"] == ["allocated_bytes.all.allocated", "allocated_bytes.all.current"]
        assert v["reset_peak"] == {"ok": "None"} and v["empty_cache"] == {"ok": "None"}
        assert v["generator_device"] == f"neuron:{i}"
    p = checked["public_valid"]
    assert p["current"] == 1
    assert p["allocated_1"] >= 4096
    assert p["allocated_current"] == [p["allocated_1"]] * 4
    assert p["reset_peak"] == {"ok": "None"} and p["empty_cache"] == {"ok": "None"}
    assert p["summary"] is True
    assert p["generators"] == ["neuron:0", "neuron:1"]


def test_no_visible_device_keeps_device_zero_readable(run_sim):
    # NEURON_RT_NUM_CORES=0: tensors still land on neuron:0 and device.py reads its statistics and
    # generator; every other index is rejected.
    r = run_sim(PRELUDE + """
C = neuron_backend.device._C
def err(fn, *a):
    try:
        fn(*a)
    except RuntimeError as e:
        return str(e).splitlines()[0]
x = torch.ones(4, device="neuron")
result({"count": C.device_count(), "generators": len(torch.neuron.default_generators),
        "allocated": torch.neuron.memory_allocated(), "stats0": sorted(C.memory_stats(0))[0],
        "stats1": err(C.memory_stats, 1), "gen1": err(C.default_generator, 1),
        "set0": err(C.set_device, 0)})
""", env={"NEURON_RT_NUM_CORES": "0"})
    assert r.result == {
        "count": 0, "generators": 1, "allocated": 16, "stats0": "allocated_bytes.all.allocated",
        "stats1": "memory_stats: Invalid device id: 1. Valid range is 0 to 0 (device_count() is 0)",
        "gen1": "default_generator: Invalid device id: 1. Valid range is 0 to 0 (device_count() is 0)",
        "set0": "set_device: Invalid device id: 0. Valid range is 0 to -1 (device_count() is 0)",
    }


def test_stream_with_negative_device_index_is_rejected(run_sim):
    # exchangeStream used to write the per-thread stream table at index -1 (heap corruption)
    r = run_sim(PRELUDE + """
s = torch.Stream(stream_id=0, device_index=-1, device_type=20)
try:
    torch.accelerator.set_stream(s)
    out = "no error"
except RuntimeError as e:
    out = str(e).splitlines()[0]
ok = torch.Stream(stream_id=3, device_index=1, device_type=20)
torch.accelerator.set_stream(ok)
result({"bad": out, "ok": torch.accelerator.current_stream(1).stream_id})
""")
    assert r.proc.returncode == 0, r.proc.stderr[-2000:]
    assert r.result == {"bad": "neuron streams: device index -1 is outside the per-device stream table (0 to 127)",
                        "ok": 3}
