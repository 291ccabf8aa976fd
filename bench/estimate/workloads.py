"""The cost model's validation workloads (docs/estimate.md, "Validation"): small float32 training loops,
nothing downloaded. Run on `neuron` under `neuron-port check` they give the recorded per-step work; run on
`cpu` they give the measured step time the model must bound from below and come near.

    python workloads.py --model mlp|gpt|conv --device cpu|neuron --steps N [--times FILE]

``--times FILE`` writes the wall time and this thread's CPU time of each step (forward, backward, optimizer
step), as JSON. With one intra-op thread the step's compute runs on this thread, so its CPU time is what the
model predicts whatever else the machine runs; the wall time also counts the time other processes had the core.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = {  # --size small keeps the CI test short; default is the bench size
    "mlp": {"bench": dict(batch=256, width=2048, depth=3), "small": dict(batch=128, width=1024, depth=3)},
    "gpt": {"bench": dict(batch=8, seq=128, dim=256, layers=4), "small": dict(batch=4, seq=64, dim=128, layers=2)},
    "conv": {"bench": dict(batch=32, width=64), "small": dict(batch=16, width=32)},
}


class MLP(nn.Module):
    def __init__(self, batch: int, width: int, depth: int) -> None:
        super().__init__()
        self.batch, self.width = batch, width
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.head(x)

    def batch_of(self, device):
        return torch.randn(self.batch, self.width, device=device), torch.randint(0, 10, (self.batch,), device=device)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, batch: int, seq: int, dim: int, layers: int, vocab: int = 512) -> None:
        super().__init__()
        self.batch, self.seq, self.vocab = batch, seq, vocab
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)).view(-1, self.vocab)

    def batch_of(self, device):
        idx = torch.randint(0, self.vocab, (self.batch, self.seq), device=device)
        return idx, torch.randint(0, self.vocab, (self.batch * self.seq,), device=device)


class ConvNet(nn.Module):
    def __init__(self, batch: int, width: int) -> None:
        super().__init__()
        self.batch = batch
        w = width
        self.features = nn.Sequential(
            nn.Conv2d(3, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(),
            nn.Conv2d(w, 2 * w, 3, stride=2, padding=1), nn.BatchNorm2d(2 * w), nn.ReLU(),
            nn.Conv2d(2 * w, 2 * w, 3, padding=2, dilation=2, groups=2), nn.BatchNorm2d(2 * w), nn.ReLU(),
            nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1), nn.BatchNorm2d(4 * w), nn.ReLU(),
        )
        self.head = nn.Linear(4 * w, 10)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))

    def batch_of(self, device):
        return torch.randn(self.batch, 3, 32, 32, device=device), torch.randint(0, 10, (self.batch,), device=device)


MODELS = {"mlp": MLP, "gpt": GPT, "conv": ConvNet}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--size", choices=("bench", "small"), default="bench")
    parser.add_argument("--times")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = MODELS[args.model](**SIZES[args.model][args.size]).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    x, y = model.batch_of(device)  # one batch, reused: the step's work is the same every step
    times, cpu_times = [], []
    for _ in range(args.steps):
        start, cpu_start = time.perf_counter(), time.thread_time()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        if device.type != "cpu":
            loss.item()  # wait for the step (a real device runs asynchronously)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.thread_time() - cpu_start)  # this thread's CPU time: other processes do not add to it
    assert math.isfinite(float(loss)), "the loss diverged"
    if args.times:
        with open(args.times, "w") as f:
            json.dump({"model": args.model, "size": args.size, "threads": torch.get_num_threads(),
                       "step_seconds": times, "step_cpu_seconds": cpu_times}, f)


if __name__ == "__main__":
    main()
