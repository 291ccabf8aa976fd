"""Device semantics: behaves like a CUDA device (mixing, printing, torch.accelerator, RNG, memory, streams)."""

import pytest

from ..conftest import PRELUDE

pytestmark = pytest.mark.slow

SEMANTICS = PRELUDE + """
out = {}
x = torch.ones(3, device="neuron")
try:
    x + torch.ones(3)
    out["mix"] = "no error"
except RuntimeError as e:
    out["mix"] = str(e)
try:
    torch.mm(torch.ones(2, 2, device="neuron"), torch.ones(2, 2))
    out["mix_mm"] = "no error"
except RuntimeError as e:
    out["mix_mm"] = str(e)
out["scalar_cpu_ok"] = (x * torch.tensor(2.0)).sum().item()
out["repr"] = repr(torch.arange(3, device="neuron"))
out["is_neuron"] = x.is_neuron and type(x) is torch.Tensor and x.data_ptr() != 0
try:
    x.numpy(); out["numpy"] = "no error"
except TypeError as e:
    out["numpy"] = str(e)
v = x[1:]; v.add_(1)
out["view_alias"] = x.tolist()
o = torch.empty(0, device="neuron"); torch.add(torch.ones(4, device="neuron"), 1, out=o)
out["out_resize"] = o.tolist()
out["accel"] = [str(torch.accelerator.current_accelerator()), torch.accelerator.device_count(),
                torch.accelerator.is_available()]
torch.accelerator.synchronize()
torch.accelerator.set_device_index(1); out["accel_idx"] = torch.accelerator.current_device_index()
out["current_device"] = torch.neuron.current_device(); torch.accelerator.set_device_index(0)
with torch.neuron.device(2):
    out["ctx_device"] = str(torch.empty(1, device="neuron").device)
out["after_ctx"] = torch.neuron.current_device()
try:
    torch.neuron.set_device(7); out["bad_set"] = "no error"
except ValueError as e:
    out["bad_set"] = str(e)
g = torch.Generator(device="neuron"); g.manual_seed(1)
out["gen_device"] = str(g.device)
a = torch.randn(4, generator=g, device="neuron"); g.manual_seed(1); b = torch.randn(4, generator=g, device="neuron")
out["gen_repro"] = torch.equal(a, b)
torch.manual_seed(5); a = torch.rand(4, device="neuron"); torch.manual_seed(5); b = torch.rand(4, device="neuron")
out["seed_repro"] = torch.equal(a, b)
torch.neuron.manual_seed_all(3); st = torch.neuron.get_rng_state(); a = torch.rand(3, device="neuron")
torch.neuron.set_rng_state(st); b = torch.rand(3, device="neuron"); out["rng_state"] = torch.equal(a, b)
out["initial_seed"] = torch.neuron.initial_seed()
e1 = torch.neuron.Event(enable_timing=True); e2 = torch.neuron.Event(enable_timing=True)
e1.record(); torch.ones(100, device="neuron").sum(); e2.record(); torch.neuron.synchronize()
out["elapsed"] = e1.elapsed_time(e2)
s = torch.neuron.Stream()
with torch.neuron.stream(s):
    out["stream_inside"] = torch.neuron.current_stream().stream_id == s.stream_id
out["stream_after"] = torch.neuron.current_stream().stream_id
s.synchronize(); out["stream_query"] = s.query()
torch.neuron.reset_peak_memory_stats()
base = torch.neuron.memory_allocated()
big = torch.empty(1 << 20, device="neuron")
out["mem_delta"] = torch.neuron.memory_allocated() - base
out["mem_peak_ge"] = torch.neuron.max_memory_allocated() >= torch.neuron.memory_allocated()
out["reserved_ge"] = torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()
del big
out["mem_freed"] = torch.neuron.memory_allocated() - base
out["summary_has_title"] = "memory summary" in torch.neuron.memory_summary()
torch.neuron.empty_cache()
p = torch.neuron.get_device_properties(0)
out["props"] = [p.name, p.total_memory]
out["name"] = torch.neuron.get_device_name(1)
out["bf16"] = torch.neuron.is_bf16_supported()
out["amp"] = [str(d) for d in torch.neuron.get_amp_supported_dtype()]
out["available"] = torch.neuron.is_available()
out["cpu_back"] = torch.ones(2, device="neuron").cpu().device.type
out["tensor_ctor"] = torch.tensor([[1, 2], [3, 4]], device="neuron").sum().item()
out["item"] = torch.tensor(2.5, device="neuron").item()
result(out)
"""


def test_device_semantics(run_sim):
    r = run_sim(SEMANTICS)
    out = r.result
    assert "Expected all tensors to be on the same device" in out["mix"]
    assert "neuron:0" in out["mix"] and "cpu" in out["mix"]
    assert "Expected all tensors to be on the same device" in out["mix_mm"]
    assert out["scalar_cpu_ok"] == 6.0
    assert out["repr"] == "tensor([0, 1, 2], device='neuron:0')"
    assert out["is_neuron"] is True
    assert "can't convert neuron:0 device type tensor to numpy" in out["numpy"]
    assert out["view_alias"] == [1.0, 2.0, 2.0]
    assert out["out_resize"] == [2.0, 2.0, 2.0, 2.0]
    assert out["accel"] == ["neuron", 4, True]
    assert out["accel_idx"] == 1 and out["current_device"] == 1
    assert out["ctx_device"] == "neuron:2" and out["after_ctx"] == 0
    assert out["bad_set"] == "Invalid device id: 7. Valid range is 0 to 3"
    assert out["gen_device"] == "neuron:0"
    assert out["gen_repro"] and out["seed_repro"] and out["rng_state"]
    assert out["elapsed"] >= 0
    assert out["stream_inside"] is True and out["stream_after"] == 0 and out["stream_query"] is True
    assert out["mem_delta"] == 4 << 20
    assert out["mem_peak_ge"] and out["reserved_ge"]
    assert out["mem_freed"] == 0
    assert out["summary_has_title"]
    assert out["props"] == ["neuron:0", 24 * (1 << 30)]
    assert out["name"] == "neuron:1"
    assert out["bf16"] is True
    assert out["amp"] == ["torch.float32", "torch.float16", "torch.bfloat16"]
    assert out["available"] is True and out["cpu_back"] == "cpu"
    assert out["tensor_ctor"] == 10 and out["item"] == 2.5
