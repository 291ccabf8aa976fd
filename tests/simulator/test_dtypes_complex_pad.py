"""Native ops where the simulator used to fail while Trainium would not: integer histc (MoE expert
counts), F.pad on a permuted tensor, and complex rotary embeddings (TORCH_NEURONX_COMPLEX_DECOMPOSE)."""

import pytest

from .conftest import PRELUDE

pytestmark = pytest.mark.slow

MOE = PRELUDE + """
import torch.nn.functional as F
torch.manual_seed(0)
num_experts, top_k = 8, 2
hidden = torch.randn(16, 32, device="neuron")
router = torch.nn.Linear(32, num_experts).to("neuron")
routing_weights = F.softmax(router(hidden), dim=1, dtype=torch.float)
routing_weights, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
expert_ids = selected_experts.int()                                                          # L-ids
for _ in range(3):
    # what Hugging Face MoE layers do when the device is not the CPU: histc on int32 expert ids
    tokens_per_expert = torch.histc(expert_ids, bins=num_experts, min=0, max=num_experts - 1)  # L-histc
ref = torch.bincount(expert_ids.cpu().flatten().long(), minlength=num_experts)
bf = torch.histc(torch.arange(6, device="neuron").to(torch.int64) % 3, bins=3, min=0, max=2)     # L-histc64
result({"dtype": str(tokens_per_expert.dtype), "device": str(tokens_per_expert.device),
        "counts": tokens_per_expert.cpu().tolist(), "ref": ref.tolist(), "i64": bf.cpu().tolist(),
        "i64_dtype": str(bf.dtype)})
"""


def test_histc_on_int32_expert_ids(run_sim):
    r = run_sim(MOE)
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    out = r.result
    assert out["dtype"] == "torch.int32" and out["device"] == "neuron:0"
    assert out["counts"] == out["ref"] and sum(out["counts"]) == 32
    assert out["i64"] == [2, 2, 2] and out["i64_dtype"] == "torch.int64"
    # counted as the native op with its int32 signature: one eager compile, two cache hits
    ops = {e["op"]: e for e in r.kind("op")}
    assert ops["aten::histc"]["policy"] == "native" and ops["aten::histc"]["calls"] == 4
    compiles = [e for e in r.kind("eager_compile") if e["op"] == "aten::histc"]
    i32 = [e for e in compiles if e["signature"][0] == "i32[16,2]"]
    assert len(i32) == 1 and i32[0]["calls"] == 3 and i32[0]["cache_hits"] == 2
    assert i32[0]["site"]["line"] == r.line_of("# L-histc")
    assert not [e for e in r.kind("fallback") if "histc" in e["op"]]
    assert not r.kind("unsupported")
    # the computation through int64 / float64 runs on CPU aliases: no device op, no float64 demotion
    assert not [c for c in r.kind("eager_compile") if any(str(a).startswith("f64") for a in c["signature"])]
    assert not [d for d in r.kind("demotion") if d["dtype"] == "float64"]
    # the script's own copies only (2 parameters to the device, one .int(), three .cpu()); histc's 4
    # calls add none
    assert ops["aten::_to_copy"]["calls"] == 6


PAD = PRELUDE + """
import torch.nn.functional as F
torch.manual_seed(0)
nhwc = torch.randn(2, 5, 6, 3)
x = nhwc.to("neuron").permute(0, 3, 1, 2)           # an NCHW view of NHWC memory: channels_last strides
y = F.pad(x, (1, 1, 2, 0))                           # L-pad
z = F.pad(x, (1, 1, 2, 0), value=0.5)                # L-pad2
ref = F.pad(nhwc.permute(0, 3, 1, 2), (1, 1, 2, 0))
result({"shape": list(y.shape), "device": str(y.device), "equal": bool(torch.equal(y.cpu(), ref)),
        "z": float(z.sum().item())})
"""


@pytest.mark.parametrize("mode", ["raise", "record"])
def test_pad_on_a_permuted_tensor_runs_and_is_reported(run_sim, mode):
    r = run_sim(PAD, env={"NEURON_PORT_UNSUPPORTED": mode})
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    assert r.result["shape"] == [2, 3, 7, 8] and r.result["equal"] and r.result["device"] == "neuron:0"
    ev = [e for e in r.kind("unsupported") if e["feature"] == "memory_format"]
    assert {e["site"]["line"] for e in ev} == {r.line_of("# L-pad"), r.line_of("# L-pad2")}, ev
    for e in ev:
        assert e["op"] == "aten::constant_pad_nd" and e["action"] == "unconfirmed" and e["count"] == 1
        assert e["error"] == "RuntimeError" and "unconfirmed" in e["message"]
        assert e["message"].startswith("[neuron-port simulator] constant_pad_nd:")
    ops = {e["op"]: e for e in r.kind("op")}
    assert ops["aten::constant_pad_nd"]["policy"] == "native" and ops["aten::constant_pad_nd"]["calls"] == 2


ROPE = PRELUDE + """
import torch.nn as nn
torch.manual_seed(0)

def precompute_freqs_cis(dim, end, theta=10000.0, device="neuron"):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=device)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)                                  # L-polar

def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))             # L-vac
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)                             # L-mul
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)

def run(device):
    torch.manual_seed(0)
    wq = nn.Linear(32, 32).to(device)
    x = torch.randn(2, 6, 32).to(device)
    freqs = precompute_freqs_cis(8, 6, device=device)
    q = wq(x).view(2, 6, 4, 8)
    q_rot, k_rot = apply_rotary_emb(q, q, freqs)
    loss = (q_rot * k_rot).sum()
    loss.backward()                                                                     # L-backward
    return q_rot.detach().cpu(), wq.weight.grad.cpu()

q_n, g_n = run("neuron")
q_c, g_c = run("cpu")
fft = torch.fft.rfft(torch.randn(8, device="neuron"))                                   # L-fft
result({"q": bool(torch.allclose(q_n, q_c, atol=1e-5)), "grad": bool(torch.allclose(g_n, g_c, atol=1e-4)),
        "fft": [str(fft.dtype), str(fft.device)], "fallback_ops": torch.neuron.get_fallback_ops()
        if hasattr(torch.neuron, "get_fallback_ops") else None})
"""


def test_llama_rope_with_complex_numbers_is_decomposed(run_sim):
    r = run_sim(ROPE)
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    assert r.result["q"] and r.result["grad"], r.result
    assert r.result["fft"] == ["torch.complex64", "neuron:0"]
    ev = [e for e in r.kind("unsupported") if e["feature"] == "complex"]
    assert ev, r.kind("unsupported")
    by_line = {}
    for e in ev:
        if e["site"]:
            by_line.setdefault(e["site"]["line"], []).append(e)
    for marker, op in (("# L-polar", "aten::polar"), ("# L-vac", "aten::view_as_complex"),
                       ("# L-mul", "aten::mul.Tensor")):
        hits = [e for e in by_line.get(r.line_of(marker), []) if e["op"].startswith(op)]
        assert hits and all(e["action"] == "decomposed" for e in hits), (marker, by_line.get(r.line_of(marker)))
        assert "TORCH_NEURONX_COMPLEX_DECOMPOSE" in hits[0]["message"] and hits[0]["error"] == "RuntimeError"
    assert all(e["action"] in ("decomposed", "cpu_fallback") for e in ev)
    # the decomposed complex signatures are native ops (eager compiles), not CPU fallbacks
    fallback_ops = {e["op"] for e in r.kind("fallback")}
    assert not {"aten::polar", "aten::view_as_complex", "aten::view_as_real", "aten::mul.Tensor"} & fallback_ops
    ops = [e for e in r.kind("op") if e["op"] in ("aten::view_as_complex", "aten::view_as_real")]
    assert ops and all(e["policy"] == "native_no_neff" for e in ops), ops
    # an FFT has no decomposition: it runs on the CPU, reported as a fallback and with its reason
    fft = [e for e in ev if e["site"] and e["site"]["line"] == r.line_of("# L-fft")]
    assert fft and fft[0]["action"] == "cpu_fallback" and fft[0]["op"] == "aten::_fft_r2c", fft
    assert "aten::_fft_r2c" in fallback_ops


def test_complex_op_without_decomposition_is_counted_as_a_cpu_fallback(run_sim):
    r = run_sim(PRELUDE + """
z = torch.view_as_complex(torch.randn(4, 2, device="neuron"))
for _ in range(2):
    c = torch.cumsum(z, 0)                                   # L-cumsum
s = torch.cumsum(torch.randn(4, device="neuron"), 0)         # L-real
result({"ok": bool(torch.allclose(c.cpu(), torch.cumsum(z.cpu(), 0))), "dtype": str(c.dtype)})
""")
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    assert r.result == {"ok": True, "dtype": "torch.complex64"}
    cumsum_ops = [e for e in r.kind("op") if e["op"].startswith("aten::cumsum")]
    assert {(e["policy"], e["calls"]) for e in cumsum_ops} == {("native", 1), ("fallback", 2)}, cumsum_ops
    fb = [e for e in r.kind("fallback") if e["op"].startswith("aten::cumsum")]
    assert fb and fb[0]["calls"] == 2 and fb[0]["sites"][0]["site"]["line"] == r.line_of("# L-cumsum")
    ev = [e for e in r.kind("unsupported") if e["op"].startswith("aten::cumsum")]
    assert len(ev) == 1 and ev[0]["action"] == "cpu_fallback" and ev[0]["count"] == 1
    # the float32 cumsum stays a native eager compile
    assert [e for e in r.kind("eager_compile") if e["op"].startswith("aten::cumsum")
            and e["site"]["line"] == r.line_of("# L-real")]


@pytest.mark.parametrize("value", ["0", "false"])
def test_complex_refused_when_decomposition_is_off(run_sim, value):
    r = run_sim(PRELUDE + """
out = {}
for name, fn in {
    "polar": lambda: torch.polar(torch.ones(4, device="neuron"), torch.zeros(4, device="neuron")),   # L-polar
    "vac": lambda: torch.view_as_complex(torch.randn(4, 2, device="neuron")),                        # L-vac
    "randn": lambda: torch.randn(3, dtype=torch.complex64, device="neuron"),                         # L-randn
}.items():
    try:
        fn()
        out[name] = "ok"
    except RuntimeError as e:
        out[name] = str(e).splitlines()[0]
result(out)
""", env={"TORCH_NEURONX_COMPLEX_DECOMPOSE": value})
    for name, msg in r.result.items():
        assert msg.startswith("[neuron-port simulator]") and "complex dtypes are not supported natively on Neuron" in msg, (name, msg)
    ev = [e for e in r.kind("unsupported") if e["feature"] == "complex"]
    assert ev and all(e["action"] == "raised" for e in ev)
    assert {e["site"]["line"] for e in ev} == {r.line_of(f"# L-{n}") for n in ("polar", "vac", "randn")}


def test_upcast_keeps_in_place_and_out_semantics(run_sim):
    """bool abs has no CPU kernel: in-place and out= results land in the original neuron tensors."""
    r = run_sim(PRELUDE + """
b = torch.tensor([True, False, True], device="neuron")
a = torch.abs(b)
ptr = b.data_ptr()
b.abs_()
out = torch.empty(0, dtype=torch.bool, device="neuron")
torch.abs(torch.tensor([False, True], device="neuron"), out=out)
h = torch.histc(torch.tensor([1, 2, 2, 5], dtype=torch.int32, device="neuron"), bins=4, min=0, max=7)
result({"a": a.cpu().tolist(), "a_dtype": str(a.dtype), "b": b.cpu().tolist(), "same": b.data_ptr() == ptr,
        "out": out.cpu().tolist(), "out_device": str(out.device), "h": h.cpu().tolist()})
""")
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    assert r.result == {"a": [True, False, True], "a_dtype": "torch.bool", "b": [True, False, True], "same": True,
                        "out": [False, True], "out_device": "neuron:0", "h": [1, 2, 1, 0]}
