"""Per-op accounting: fallbacks with user sites, eager compile signatures, 64-bit demotion, record() API."""

import pytest

from conftest import simulator_env

from .conftest import PRELUDE

pytestmark = pytest.mark.slow

ACCOUNTING = PRELUDE + """
def helper(t):
    return torch.linalg.qr(t)                      # MARK-qr
a = torch.randn(4, 4, device="neuron")
for _ in range(3):
    helper(a)
for n in (8, 8, 8, 16):
    torch.randn(n, 3, device="neuron").sin()       # MARK-sin
import torch.nn.functional as F
F.interpolate(torch.randn(1, 1, 4, 4, device="neuron"), scale_factor=2, mode="bilinear")  # MARK-upsample
d = a.double()                                     # MARK-double
e = d * 3                                          # MARK-mul64
f = a * 0.5                                        # MARK-pyscalar
idx = torch.arange(4, device="neuron")             # MARK-int64
b = torch.ones(3, device="neuron")
for lr in (0.1, 0.2, 0.3):
    b * lr                                         # MARK-lifted
    torch._foreach_mul_([b], lr)                   # MARK-foreach
    b.add_(b, alpha=-lr)                           # MARK-static
neuron_backend.events.record("compile", function="fwd", graph=1, reason="first call")   # MARK-record
w = torch.randn(5, 5, device="neuron", requires_grad=True)
loss = torch.tanh(w @ w).sum()
loss.backward()                                    # MARK-backward
st = neuron_backend.stats()
result({"summary": st["summary"], "n_fallbacks": len(st["fallbacks"]),
        "fallback_ops": torch.neuron.get_fallback_ops()})
"""


@pytest.fixture(scope="module")
def acc(sim_build, tmp_path_factory):
    import subprocess, sys, textwrap
    from .conftest import SimRun
    tmp = tmp_path_factory.mktemp("acc")
    script = tmp / "train.py"
    script.write_text(textwrap.dedent(ACCOUNTING))
    env = simulator_env()
    (tmp / "events").mkdir()
    env.update(NEURON_PORT_SIMULATE="1", NEURON_PORT_EVENTS_DIR=str(tmp / "events"))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return SimRun(proc, tmp / "events", script)


def test_process_header_and_summary(acc):
    ev = acc.events()
    assert ev[0]["kind"] == "process" and ev[0]["status"] == "exited"
    assert ev[0]["torchneuron_release"]["torch_neuronx"] == "2.14.3.0"
    assert ev[-1]["kind"] == "summary" and ev[-1]["complete"] is True
    assert acc.result["summary"]["fallback_ops"] == acc.result["n_fallbacks"] >= 2


def test_fallback_recorded_with_user_site(acc):
    fb = {e["op"]: e for e in acc.kind("fallback")}
    qr = [e for op, e in fb.items() if "linalg_qr" in op]
    assert qr, fb.keys()
    assert qr[0]["calls"] == 3
    site = qr[0]["sites"][0]["site"]
    assert site["file"] == str(acc.script) and site["line"] == acc.line_of("MARK-qr")
    assert site["function"] == "helper" and "linalg.qr" in site["code"]
    up = [e for op, e in fb.items() if "upsample_bilinear2d" in op]
    assert up and up[0]["sites"][0]["site"]["line"] == acc.line_of("MARK-upsample")
    assert any("linalg_qr" in op for op in acc.result["fallback_ops"])


def test_eager_compile_signatures(acc):
    sin = [e for e in acc.kind("eager_compile") if e["op"].startswith("aten::sin")]
    shapes = sorted(e["signature"][0] for e in sin)
    assert shapes == ["f32[16,3]", "f32[8,3]"], sin
    by_shape = {e["signature"][0]: e for e in sin}
    assert by_shape["f32[8,3]"]["calls"] == 3 and by_shape["f32[8,3]"]["cache_hits"] == 2
    assert by_shape["f32[16,3]"]["site"]["line"] == acc.line_of("MARK-sin")
    op = [e for e in acc.kind("op") if e["op"].startswith("aten::sin")][0]
    assert op["policy"] == "native" and op["unique_signatures"] == 2


def test_float64_demotion_recorded_with_line(acc):
    f64 = [e for e in acc.kind("demotion") if e["dtype"] == "float64"]
    lines = {e["site"]["line"] for e in f64}
    assert acc.line_of("MARK-double") in lines
    assert acc.line_of("MARK-mul64") in lines
    # a Python float scalar is not a float64 tensor
    assert acc.line_of("MARK-pyscalar") not in lines
    i64 = [e for e in acc.kind("demotion") if e["dtype"] == "int64"]
    assert i64 and all(e["aggregated"] for e in i64)
    assert len({e["op"] for e in i64}) == len(i64)  # one record per op


def test_scalar_arguments_keyed_as_torchneuron_keys_them(acc):
    """TorchNeuron lifts a Python number to a 0-d tensor input and keys the NEFF on its type
    (docs/sources/scalar-arguments.md): a new lr is a cache hit; an argument its registration declares
    static (`alpha` of add_) is compiled in, so each value is a new signature. The text shows the number."""
    def at(marker):
        return [e for e in acc.kind("eager_compile") if e["site"] and e["site"]["line"] == acc.line_of(marker)]

    [pyscalar] = at("MARK-pyscalar")
    assert pyscalar["signature"] == ["f32[4,4]", "0.5"]  # the value, not f64[]
    [lifted] = at("MARK-lifted")
    assert lifted["signature"] == ["f32[3]", "0.10000000000000001"] and lifted["calls"] == 3
    [foreach] = at("MARK-foreach")
    assert foreach["op"] == "aten::_foreach_mul_.Scalar" and foreach["calls"] == 3
    static = at("MARK-static")
    assert sorted(e["signature"][2] for e in static) == [
        "-0.10000000000000001", "-0.20000000000000001", "-0.29999999999999999"]


def test_record_api_event(acc):
    rec = acc.kind("compile")
    assert len(rec) == 1
    assert rec[0]["function"] == "fwd" and rec[0]["site"]["line"] == acc.line_of("MARK-record")


def test_backward_ops_attributed_to_backward_call(acc):
    tb = [e for e in acc.kind("eager_compile") if e["op"].startswith("aten::tanh_backward")]
    assert tb, [e["op"] for e in acc.kind("eager_compile")]
    site = tb[0]["site"]
    assert site["line"] == acc.line_of("MARK-backward") and "backward" in site["code"]


def test_float64_emulation_rounds_to_float32(run_sim):
    code = PRELUDE + """
x = torch.tensor([1.0], dtype=torch.float64, device="neuron")
y = x + 1e-12
result({"dtype": str(y.dtype), "diff": (y - 1.0).item()})
"""
    keep = run_sim(code).result
    emu = run_sim(code, env={"NEURON_PORT_FLOAT64": "emulate"}).result
    assert keep["dtype"] == emu["dtype"] == "torch.float64"
    assert keep["diff"] > 0          # float64 precision kept by default
    assert emu["diff"] == 0.0        # 1 + 1e-12 rounds to 1 in float32
