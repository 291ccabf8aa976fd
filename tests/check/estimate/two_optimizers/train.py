"""A small GPT trained with two optimizers, as the Muon record runs split a model: the matrices of the
blocks and the head on SGD with momentum (foreach), the embeddings and the norms on a fused AdamW, both
stepped every step (tests/check/estimate/test_estimate_counting.py).

    python train.py --steps 4 [--compile]
"""

from __future__ import annotations

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, BATCH, SEQ = 64, 4, 16


class GPT(nn.Module):
    def __init__(self, d: int = 32, layers: int = 2) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, d), nn.Embedding(SEQ, d)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
                                    for _ in range(layers))
        self.head = nn.Linear(d, VOCAB, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--compile", action="store_true", help="torch.compile the whole model")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = GPT().to("neuron")
    matrices = [p for n, p in model.named_parameters() if p.ndim == 2 and not n.startswith(("wte", "wpe"))]
    rest = [p for n, p in model.named_parameters() if not (p.ndim == 2 and not n.startswith(("wte", "wpe")))]
    adamw = torch.optim.AdamW(rest, lr=1e-3, fused=True)
    sgd = torch.optim.SGD(matrices, lr=0.02, momentum=0.9, foreach=True)
    run = torch.compile(model, backend="neuron") if args.compile else model
    idx = torch.randint(0, VOCAB, (BATCH, SEQ), device="neuron")
    for _ in range(args.steps):
        loss = F.cross_entropy(run(idx).view(-1, VOCAB), idx.view(-1))
        loss.backward()
        adamw.step()
        sgd.step()
        adamw.zero_grad()
        sgd.zero_grad()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
