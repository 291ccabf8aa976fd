"""A Muon-style optimizer step, the many-small-graphs workload of the cost model's benchmark
(bench/estimate/muon.py; bench/README.md, "estimate"): the 2-D weights of a GPT-2 small's blocks (12 layers of
768 x 2304, 768 x 768, 768 x 3072 and 3072 x 768), each updated by momentum and then orthogonalised by five
Newton-Schulz iterations of the quintic of the Muon write-up (coefficients 3.4445, -4.7750, 2.0315), the
iterations one compiled function called once per weight: 48 compiled calls a step, 15 small matmuls each.
Written for this benchmark; nothing downloaded.

    python muon_step.py --device cpu|neuron --steps N [--dtype bf16|fp32] [--width 768] [--times FILE]

``--times FILE`` writes each step's wall time and this thread's CPU time (one intra-op thread: the step's
compute runs on it), as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch

LAYERS, D = 12, 768


def shapes(d: int) -> list[tuple[int, int]]:
    """A block's 2-D weights (out x in): attention in and out, MLP in and out."""
    return [(3 * d, d), (d, d), (4 * d, d), (d, 4 * d)]
A, B, C = 3.4445, -4.7750, 2.0315  # the quintic's coefficients


def newton_schulz(g: torch.Tensor, steps: int = 5) -> torch.Tensor:
    """An approximately orthogonal matrix of ``g``'s shape: five iterations of X <- aX + (bA + cA^2)X with
    A = X X^T, on the wide orientation (rows <= columns), from X = g / ||g||."""
    x = g
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.mT
    x = x / (x.norm() + 1e-7)
    for _ in range(steps):
        a = x @ x.mT
        b = B * a + C * (a @ a)
        x = A * x + b @ x
    return x.mT if tall else x


class Muon(torch.optim.Optimizer):
    """Momentum, then the update orthogonalised by ``orthogonalise`` (a compiled ``newton_schulz``), one call
    per weight; the update scaled by sqrt(max(1, rows / columns))."""

    def __init__(self, params, orthogonalise, lr: float = 0.02, momentum: float = 0.95) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum})
        self.orthogonalise = orthogonalise

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for w in group["params"]:
                state = self.state[w]
                if "buffer" not in state:
                    state["buffer"] = torch.zeros_like(w)
                buf = state["buffer"]
                buf.lerp_(w.grad, 1 - group["momentum"])
                update = self.orthogonalise(w.grad.lerp(buf, group["momentum"]))
                w.add_(update, alpha=-group["lr"] * max(1.0, w.size(0) / w.size(1)) ** 0.5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--backend", default=None, help="torch.compile backend (default: neuron on neuron, else "
                                                          "inductor)")
    parser.add_argument("--width", type=int, default=D, help="the model width (768: GPT-2 small; a small one "
                                                               "leaves the per-call costs alone)")
    parser.add_argument("--times")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    backend = args.backend or ("neuron" if device.type == "neuron" else "inductor")
    weights = [torch.nn.Parameter(torch.randn(*shape, device=device, dtype=dtype) / math.sqrt(shape[1]))
               for _ in range(LAYERS) for shape in shapes(args.width)]
    for w in weights:  # a gradient as a backward would leave it (the step's input; no model runs here)
        w.grad = torch.randn_like(w) * 1e-3
    optimizer = Muon(weights, torch.compile(newton_schulz, backend=backend))
    times, cpu_times = [], []
    for _ in range(args.steps):
        start, cpu_start = time.perf_counter(), time.thread_time()
        optimizer.step()
        if device.type != "cpu":
            weights[-1].sum().item()  # wait for the step (a real device runs asynchronously)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.thread_time() - cpu_start)
    if device.type == "cpu":
        assert all(bool(torch.isfinite(w).all()) for w in weights), "the step diverged"
    if args.times:
        with open(args.times, "w") as f:
            json.dump({"steps": args.steps, "dtype": args.dtype, "backend": backend, "threads": torch.get_num_threads(),
                       "step_seconds": times, "step_cpu_seconds": cpu_times}, f)


if __name__ == "__main__":
    main()
