"""Unsupported features raise TorchNeuron-style errors and are recorded with the user's line."""

import pytest

from .conftest import PRELUDE

pytestmark = pytest.mark.slow

UNSUPPORTED = PRELUDE + """
import torch.nn as nn, torch.nn.functional as F
import torch.autograd.forward_ad as fwAD
x = torch.randn(4, 4, device="neuron")
cases = {
    "complex": lambda: torch.randn(3, dtype=torch.complex64, device="neuron"),                       # L-complex
    "complex_cast": lambda: x.to(torch.complex64),                                                   # L-complex_cast
    "fft": lambda: torch.fft.rfft(x),                                                                # L-fft
    "channels_last": lambda: torch.randn(2, 3, 4, 4, device="neuron").to(memory_format=torch.channels_last),  # L-channels_last
    "contiguous_cl": lambda: torch.randn(2, 3, 4, 4, device="neuron").contiguous(memory_format=torch.channels_last),  # L-contiguous_cl
    "to_sparse": lambda: x.to_sparse(),                                                              # L-to_sparse
    "sparse_ctor": lambda: torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.tensor([1., 2.]), (3,), device="neuron"),  # L-sparse_ctor
    "nested": lambda: torch.nested.nested_tensor([torch.randn(2), torch.randn(3)], device="neuron"),  # L-nested
    "forward_ad": lambda: fwAD.make_dual(x, torch.ones_like(x)),                                     # L-forward_ad
    "gather_sparse_grad": lambda: torch.gather(x, 1, torch.zeros(4, 1, dtype=torch.long, device="neuron"), sparse_grad=True),  # L-gather_sparse_grad
    "sparse_embedding": lambda: F.embedding(torch.tensor([1], device="neuron"), torch.randn(3, 2, device="neuron"), sparse=True),  # L-sparse_embedding
}
mha = nn.MultiheadAttention(8, 2, batch_first=True).to("neuron").eval()
q = torch.randn(2, 5, 8, device="neuron")
bool_mask = torch.triu(torch.ones(5, 5, dtype=torch.bool, device="neuron"), 1)
def mha_mask():
    with torch.no_grad():
        return mha(q, q, q, attn_mask=bool_mask)                                                     # L-mha_mask
def mha_heads():
    with torch.no_grad():
        return mha(q, q, q, need_weights=True, average_attn_weights=False)                          # L-mha_heads
cases["mha_mask"] = mha_mask
cases["mha_heads"] = mha_heads
out = {}
for name, fn in cases.items():
    try:
        fn()
        out[name] = ["ok", ""]
    except Exception as e:
        out[name] = [type(e).__name__, str(e).splitlines()[0]]
with torch.no_grad():
    mha(q, q, q, need_weights=False)   # the supported fast path still works
result(out)
"""

EXPECTED = {
    "complex": ("RuntimeError", "complex dtypes are not supported natively on Neuron", "complex"),
    "complex_cast": ("RuntimeError", "complex dtypes are not supported natively on Neuron", "complex"),
    "fft": ("RuntimeError", "complex dtypes are not supported natively on Neuron", "complex"),
    "channels_last": ("RuntimeError", "Neuron tensors only support contiguous or preserve memory format", "memory_format"),
    "contiguous_cl": ("RuntimeError", "Neuron tensors only support contiguous or preserve memory format", "memory_format"),
    "to_sparse": ("NotImplementedError", "Sparse tensors are not supported on Neuron", "sparse"),
    "sparse_ctor": ("NotImplementedError", "Sparse tensors are not supported on Neuron", "sparse"),
    "nested": ("NotImplementedError", "NestedTensor is not supported on Neuron", "nested_tensor"),
    "forward_ad": ("NotImplementedError", "Forward-mode AD (dual tensors) is not supported on Neuron", "forward_ad"),
    "gather_sparse_grad": ("NotImplementedError", "sparse_grad=True is not supported on Neuron", "gather_sparse_grad"),
    "sparse_embedding": ("NotImplementedError", "Sparse is currently not supported for embedding.", "sparse_embedding"),
    "mha_mask": ("NotImplementedError", "Arbitrary mask tensors not yet supported in Neuron implementation", "mha_arbitrary_mask"),
    "mha_heads": ("NotImplementedError", "Returning per-head attention weights not yet supported", "mha_per_head_weights"),
}


def test_each_unsupported_feature_raises_and_is_recorded(run_sim):
    r = run_sim(UNSUPPORTED, env={"TORCH_NEURONX_COMPLEX_DECOMPOSE": "0"})  # complex refused, as before 2.33
    out = r.result
    events = r.kind("unsupported")
    for name, (etype, msg, feature) in EXPECTED.items():
        got_type, got_msg = out[name]
        assert got_type == etype, (name, out[name])
        assert got_msg.startswith("[neuron-port simulator]") and msg in got_msg, (name, got_msg)
        line = r.line_of(f"# L-{name}")
        hits = [e for e in events if e["feature"] == feature and e["site"] and e["site"]["line"] == line]
        assert hits, (name, line, [(e["feature"], e["site"] and e["site"]["line"]) for e in events])
        assert hits[0]["action"] == "raised" and hits[0]["error"] == etype


def test_record_only_mode(run_sim):
    r = run_sim(PRELUDE + """
x = torch.randn(2, 3, 4, 4, device="neuron")
y = x.to(memory_format=torch.channels_last)     # L-cl
z = torch.ones(2, dtype=torch.complex64, device="neuron")  # L-cx
result({"ok": True, "device": str(y.device)})
""", env={"NEURON_PORT_UNSUPPORTED": "record", "TORCH_NEURONX_COMPLEX_DECOMPOSE": "0"})
    assert r.result == {"ok": True, "device": "neuron:0"}
    ev = r.kind("unsupported")
    assert {e["feature"] for e in ev} == {"memory_format", "complex"}
    assert all(e["action"] == "recorded" for e in ev)
    assert {e["site"]["line"] for e in ev} == {r.line_of("# L-cl"), r.line_of("# L-cx")}
