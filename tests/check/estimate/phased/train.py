"""A small GPT trained for a few optimizer steps, evaluated before training and every 3 steps (on batches of
the training shape, from a DataLoader), then sampled from: the estimate's per-step work must be the training
steps' alone (tests/check/estimate/test_estimate_phases.py).

    python train.py --steps 6 --batch 4 --seq 32
"""

from __future__ import annotations

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(self.ln1(x)).chunk(3, -1))
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, seq: int, d: int = 64, heads: int = 4, layers: int = 2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


@torch.no_grad()
def evaluate(model, loader, device) -> float:
    model.eval()
    losses = [F.cross_entropy(model(x.to(device)).flatten(0, 1), y.to(device).flatten()).item() for x, y in loader]
    model.train()
    return sum(losses) / len(losses)


@torch.no_grad()
def sample(model, prompt, new_tokens: int, seq: int):
    model.eval()
    idx = prompt
    for _ in range(new_tokens):
        logits = model(idx[:, -seq:])[:, -1]
        idx = torch.cat([idx, torch.multinomial(F.softmax(logits, -1), 1)], dim=1)
    return idx


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--eval-every", type=int, default=3)
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--new-tokens", type=int, default=8)
    p.add_argument("--teacher", action="store_true", help="a frozen teacher of the same shape, once a step")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (backend neuron)")
    a = p.parse_args()
    torch.manual_seed(0)
    device = torch.device("neuron")
    model = GPT(a.vocab, a.seq).to(device)
    teacher = GPT(a.vocab, a.seq).to(device).eval().requires_grad_(False) if a.teacher else None
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if a.compile:
        model = torch.compile(model, backend="neuron")
    held_out = torch.randint(0, a.vocab, (a.eval_batches * a.batch, a.seq + 1))
    loader = DataLoader(TensorDataset(held_out[:, :-1], held_out[:, 1:]), batch_size=a.batch)
    for step in range(a.steps):
        if a.eval_every and step % a.eval_every == 0:  # 0: never
            print(f"step {step} eval loss {evaluate(model, loader, device):.3f}", flush=True)
        data = torch.randint(0, a.vocab, (a.batch, a.seq + 1)).to(device)
        logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), data[:, 1:].flatten())
        if teacher is not None:  # distillation: one no_grad call of an eval-mode model inside each step
            with torch.no_grad():
                target = F.softmax(teacher(data[:, :-1]), -1)
            loss = loss + F.cross_entropy(logits.flatten(0, 1), target.flatten(0, 1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    print("sample", sample(model, torch.zeros(1, 1, dtype=torch.long, device=device), a.new_tokens, a.seq).tolist())


if __name__ == "__main__":
    main()
