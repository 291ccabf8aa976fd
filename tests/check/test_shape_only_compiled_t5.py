"""A compiled T5-shaped training step in bf16 autocast, run for real and shape-only through the CLI (issue 36,
item 4's acceptance): the recorded device peaks agree within 1.3x (they are equal: both count a compiled
graph as the compiled program uses memory, its inputs and outputs, not each intermediate), and so do the
compiles."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow

T5_STEP = """
import torch
from transformers import T5Config, T5ForConditionalGeneration

config = T5Config(vocab_size=256, d_model=64, d_kv=16, d_ff=256, num_layers=2, num_decoder_layers=2, num_heads=4,
                  decoder_start_token_id=0, pad_token_id=0)  # t5-base's architecture, small
torch.manual_seed(0)
model = T5ForConditionalGeneration(config).to("neuron")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
step = torch.compile(model, backend="neuron")
for _ in range(2):
    ids = torch.randint(0, 256, (4, 32)).to("neuron")
    labels = torch.randint(0, 256, (4, 32)).to("neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        loss = step(input_ids=ids, labels=labels).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


def run(cli, tmp_path, *options: str) -> dict:
    tmp_path.mkdir()
    (tmp_path / "t5_step.py").write_text(T5_STEP)
    result = cli("check", str(tmp_path), *options, "--output-format", "json", "--", "python", "t5_step.py",
                 cwd=tmp_path)
    assert result.stdout, result.stderr[-3000:]
    doc = json.loads(result.stdout)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    return doc


def test_compiled_t5_step_peak_real_and_shape_only(tmp_path, cli, sim_build):
    pytest.importorskip("transformers")
    real = run(cli, tmp_path / "real")
    fake = run(cli, tmp_path / "fake", "--shape-only")
    peak_real = real["estimate"]["work"]["peak_bytes"]
    peak_fake = fake["estimate"]["work"]["peak_bytes"]
    assert peak_real > 0 and 1 / 1.3 <= peak_fake / peak_real <= 1.3, (peak_real, peak_fake)
    compiles = [len(doc["runtime"]["compiles"]) for doc in (real, fake)]
    assert compiles[0] == compiles[1] > 0
