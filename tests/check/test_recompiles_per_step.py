"""Eager NEFF compiles that recur after warm-up (issue 35 items 4 and 5), through the real CLI on small
scripts written here: a GPT-ish trainer whose fused AdamW takes a Python-float lr from a LambdaLR (one
`_fused_adamw_` signature: TorchNeuron lifts the lr to a tensor input and keys its NEFF on the type,
docs/sources/scalar-arguments.md), the default foreach AdamW (its bias corrections likewise), the same
trainer with SGD (`_foreach_add_(params, grads, alpha=-lr)`: `alpha` is static in TorchNeuron's
registration, a new NEFF every step: NP902's scalar message at `optimizer.step()`, priced in the steady
step), a compiled model whose eager ops are the optimizer's (the next step names them), a per-image loop
whose box counts change inside one step after warm-up (NP902 at its lines), and a static finding judged at
its own line (a nearest upsample that fell back does not vouch for an unused bilinear one).
The SGD test fails on 858089d (no finding then); the AdamW ones fail on the previous commit (a finding)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow

GPT = '''\
import torch
import torch.nn as nn

device = torch.device("neuron")
torch.manual_seed(0)


class TinyGPT(nn.Module):
    def __init__(self, vocab=64, dim=32, ctx=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(ctx, dim)
        self.block = nn.TransformerEncoderLayer(dim, 4, 64, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        t = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.block(self.tok(idx) + self.pos(t)))


model = TinyGPT().to(device)
{model}
optimizer = {optimizer}
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10))
for step in range(8):
    x = torch.randint(0, 64, (4, 16), device=device)
    loss = nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    scheduler.step()
print("done")
'''
STEP_LINE = 29  # optimizer.step()

PER_IMAGE = '''\
import torch
import torch.nn as nn

device = torch.device("neuron")
torch.manual_seed(0)
backbone = nn.Conv2d(3, 8, 3, padding=1).to(device)
head = nn.Linear(8, 5).to(device)
optimizer = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.01)

for step in range(6):
    images = torch.randn(4, 3, 8, 8, device=device)
    feats = backbone(images).mean(dim=(2, 3))
    loss = head(feats).sum()
    # per-image post-processing: the boxes kept per image (2 while the detector warms up, then 3, 5, 7, 9)
    for i in range(images.shape[0]):
        n = 2 if step < 2 else 3 + 2 * i
        boxes = torch.rand(n, 4, device=device)
        scores = boxes.sum(dim=1)
        loss = loss + (scores * feats[i, 0]).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print("done")
'''

UPSAMPLE = '''\
import torch
import torch.nn.functional as F


def upsample_nearest(x):
    return F.interpolate(x, scale_factor=2)


def upsample_smooth(x):  # never called
    return F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)


x = torch.randn(1, 3, 8, 8, device="neuron")
print(upsample_nearest(x).sum().item())
'''


def check(tmp_path: Path, schema: dict, name: str, source: str) -> dict:
    project = tmp_path / name
    project.mkdir()
    (project / "s.py").write_text(source)
    out = tmp_path / f"{name}.json"
    result = run_cli("check", str(project), "-o", str(out), "--", "python", "s.py")
    assert out.exists(), result.stdout + result.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, schema)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    doc["panel"] = result.stdout
    return doc


def findings(doc: dict, code: str) -> list[dict]:
    return [f for f in doc["findings"] if f["code"] == code]


def trn2(doc: dict) -> dict:
    return next(r for r in doc["estimate"]["per_device"] if r["device"] == "trn2-chip")


def test_a_scheduled_float_lr_of_adamw_is_one_signature(tmp_path, report_schema):
    for name, optimizer in (("fused", "torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)"),
                            ("foreach", "torch.optim.AdamW(model.parameters(), lr=1e-3)")):
        doc = check(tmp_path, report_schema, name, GPT.format(model="", optimizer=optimizer))
        assert findings(doc, "NP902") == [] and doc["runtime"]["shape_variance"] == [], name
        assert trn2(doc)["compile"]["steady_compiles_per_step"] == 0, name
        assert "0 line(s) whose shapes or scalars keep changing" in doc["panel"], name


def test_sgd_under_a_scheduler_is_a_finding_priced_per_step(tmp_path, report_schema):
    doc = check(tmp_path, report_schema, "sgd",
                GPT.format(model="", optimizer="torch.optim.SGD(model.parameters(), lr=0.1)"))
    [finding] = findings(doc, "NP902")
    assert (finding["path"], finding["line"], finding["severity"]) == ("s.py", STEP_LINE, "warning")
    message = finding["message"]
    assert message.startswith("`aten::_foreach_add_.List` got a new value of `alpha` after warm-up, at steps 2, 3, 4, "
                              "5, 6, 7"), message
    assert "compiles this argument into the op" in message and "torch._foreach_mul(grads, -lr)" in message
    [entry] = doc["runtime"]["shape_variance"]
    assert entry["kind"] == "scalar" and entry["varying"][0]["scalar"] is True
    assert "1 line(s) whose shapes or scalars keep changing" in doc["panel"]
    # one new signature in each of the 6 steady steps: 1 compile per step, 3 s each (the assumption)
    assert trn2(doc)["compile"]["steady_compiles_per_step"] == pytest.approx(1.0)
    assert trn2(doc)["step_seconds"]["expected"] >= 3.0
    assert "then 1.0 more per steady step" in doc["panel"]


def test_the_next_step_of_a_compiled_model_names_the_eager_ops(tmp_path, report_schema):
    doc = check(tmp_path, report_schema, "compiled",
                GPT.format(model='model = torch.compile(model, backend="neuron")',
                           optimizer="torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-3), fused=True)"))
    panel = " ".join(doc["panel"].split())
    assert doc["estimate"]["per_step"]["compiled_ops"] > 0
    assert "torch.compile the model" not in panel
    assert "outside the compiled graphs (most from s.py:" in panel


def test_shapes_that_vary_inside_one_step_after_warm_up_are_np902(tmp_path, report_schema):
    doc = check(tmp_path, report_schema, "per_image", PER_IMAGE)
    lines = {f["line"] for f in findings(doc, "NP902")}
    assert {17, 18} <= lines  # torch.rand(n, 4), boxes.sum(dim=1)
    rand = next(f for f in findings(doc, "NP902") if f["line"] == 17)
    assert "at steps 2 (4 new values inside step 2): dim 0 of arg 0 (f32[*,4]): 2 (step 0), 3,5,7,9 (step 2)" in \
        rand["message"], rand["message"]
    # counts are bounded (the cache serves each once seen): first-run compiles, not a per-step price
    assert trn2(doc)["compile"]["steady_compiles_per_step"] == 0


def test_a_static_finding_is_judged_at_its_own_line(tmp_path, report_schema):
    doc = check(tmp_path, report_schema, "upsample", UPSAMPLE)
    assert any(f["code"] == "NP901" and f["line"] == 6 for f in doc["findings"])  # the nearest one fell back
    [bilinear] = [f for f in findings(doc, "NP806") if f["line"] == 10]
    assert "seen in this run at" not in bilinear["message"]
    assert bilinear["message"].endswith(
        "(not seen at this line in this run, this line ran no op on the device; seen at s.py:6)"), bilinear
