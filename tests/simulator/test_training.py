"""A real training loop on the simulated device (issue 3 acceptance: training loop)."""

import pytest

from .conftest import PRELUDE

pytestmark = pytest.mark.slow

TRAINING = PRELUDE + """
import io, copy
import torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
out = {}
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 4))
w0 = model[0].weight
model.to("neuron")
out["param_identity"] = model[0].weight is w0
out["param_device"] = str(model[0].weight.device)
losses = {}
for name, kw in [("default", {}), ("foreach_false", {"foreach": False}), ("fused", {"fused": True})]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, **kw)
    first = None
    for i in range(8):
        x = torch.randn(16, 16, device="neuron"); y = (x[:, 0] > 0).long()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        first = first if first is not None else loss.item()
    losses[name] = [first, loss.item()]
out["losses"] = losses
out["grad_device"] = str(model[0].weight.grad.device)
with torch.autocast("neuron", dtype=torch.bfloat16):
    y = model(torch.randn(4, 16, device="neuron"))
    out["autocast_dtype"] = str(y.dtype)
    out["autocast_fp32_op"] = str(torch.softmax(y, -1).dtype)
scaler = torch.amp.GradScaler("neuron")
opt = torch.optim.AdamW(model.parameters())
with torch.autocast("neuron", dtype=torch.float16):
    loss = model(torch.randn(4, 16, device="neuron")).float().pow(2).mean()
scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
out["scaler_scale"] = scaler.get_scale()
buf = io.BytesIO(); torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
buf.seek(0); ck = torch.load(buf, map_location="cpu"); out["load_cpu"] = str(ck["model"]["0.weight"].device)
buf.seek(0); ck = torch.load(buf); out["load_default"] = str(ck["model"]["0.weight"].device)
buf.seek(0); ck = torch.load(buf, map_location="neuron")
m2 = copy.deepcopy(model).cpu(); m2.load_state_dict(ck["model"]); m2.to("neuron")
out["reload_equal"] = all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(model.parameters(), m2.parameters()))
ds = torch.utils.data.TensorDataset(torch.randn(32, 16), torch.randint(0, 4, (32,)))
dl = torch.utils.data.DataLoader(ds, batch_size=8, pin_memory=True)
xb, yb = next(iter(dl))
out["pinned"] = xb.is_pinned()
out["moved"] = str(xb.to("neuron", non_blocking=True).device)
out["module_neuron"] = str(nn.Linear(2, 2).neuron().weight.device)
result(out)
"""


def test_training_loop(run_sim):
    r = run_sim(TRAINING)
    out = r.result
    assert r.proc.returncode == 0, r.proc.stderr
    assert out["param_identity"] is True
    assert out["param_device"] == "neuron:0" and out["grad_device"] == "neuron:0"
    for name, (first, last) in out["losses"].items():
        assert last == last and last < 10, name  # finite
    assert out["losses"]["default"][1] < out["losses"]["default"][0]
    assert out["autocast_dtype"] == "torch.bfloat16"
    assert out["autocast_fp32_op"] == "torch.float32"
    assert out["scaler_scale"] > 0
    assert out["load_cpu"] == "cpu" and out["load_default"] == "neuron:0"
    assert out["reload_equal"] is True
    assert out["pinned"] is True and out["moved"] == "neuron:0"
    assert out["module_neuron"] == "neuron:0"
    # the run is accounted: optimizer ops were seen natively
    ops = {e["op"]: e for e in r.kind("op")}
    assert any(op.startswith("aten::_fused_adamw_") for op in ops)
    assert any(op.startswith("aten::_foreach_") for op in ops)
    assert r.kind("summary")[0]["complete"] is True
