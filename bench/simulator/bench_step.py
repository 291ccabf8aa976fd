"""Simulator overhead vs plain CPU, measured in one process.

    NEURON_PORT_SIMULATE=1 python bench/simulator/bench_step.py [--repeats 20] [--json out.json]

Workloads (fwd + bwd + AdamW(foreach=True) step, one thread):
  mlp  4 x Linear(512) + ReLU, batch 64                     goal: simulator/CPU <= 1.10
  gpt  2-layer GPT, d=128, 4 heads, seq 64, batch 8, vocab 256   goal: <= 1.25
  add  x + y on 16-element tensors (per-op overhead)         goal: <= 3 us over CPU
Runs are interleaved (cpu, neuron, cpu, neuron, ...) and the minimum of N is reported, so load from
other processes affects both sides alike. Also measures the cost of importing torch with the
simulator on (cached build) vs plain `import torch`, in fresh subprocesses.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import neuron_backend


def mlp_model():
    layers = []
    for _ in range(4):
        layers += [nn.Linear(512, 512), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=256, d=128, h=4, layers=2, seq=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def make_step(kind: str, device: str):
    torch.manual_seed(0)
    if kind == "mlp":
        model = mlp_model().to(device)
        x = torch.randn(64, 512, device=device)
        y = torch.randn(64, 512, device=device)
        loss_fn = lambda: F.mse_loss(model(x), y)  # noqa: E731
    else:
        model = GPT().to(device)
        idx = torch.randint(0, 256, (8, 65), device=device)
        loss_fn = lambda: F.cross_entropy(model(idx[:, :-1]).reshape(-1, 256), idx[:, 1:].reshape(-1))  # noqa: E731
    # foreach=True on both sides: AdamW's default is foreach on neuron (PrivateUse1) but the single-tensor
    # Python loop on CPU, which would make the comparison unfair in the simulator's favour.
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

    def step():
        loss = loss_fn()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def time_steps(step, n_steps: int) -> float:
    t = time.perf_counter()
    for _ in range(n_steps):
        step()
    return (time.perf_counter() - t) / n_steps


def bench_workload(kind: str, repeats: int, n_steps: int) -> dict:
    steps = {dev: make_step(kind, dev) for dev in ("cpu", "neuron")}
    for s in steps.values():  # warm up (first signatures, allocator)
        for _ in range(3):
            s()
    best = {"cpu": float("inf"), "neuron": float("inf")}
    for _ in range(repeats):
        for dev in ("cpu", "neuron"):
            best[dev] = min(best[dev], time_steps(steps[dev], n_steps))
    return {"cpu_ms": best["cpu"] * 1e3, "sim_ms": best["neuron"] * 1e3, "ratio": best["neuron"] / best["cpu"]}


def bench_add(repeats: int, n: int = 20000) -> dict:
    res = {}
    xs = {dev: (torch.randn(16, device=dev), torch.randn(16, device=dev)) for dev in ("cpu", "neuron")}
    best = {"cpu": float("inf"), "neuron": float("inf")}
    for dev, (x, y) in xs.items():
        for _ in range(2000):
            x + y
    for _ in range(repeats):
        for dev, (x, y) in xs.items():
            t = time.perf_counter()
            for _ in range(n):
                x + y
            best[dev] = min(best[dev], (time.perf_counter() - t) / n)
    res["cpu_us"] = best["cpu"] * 1e6
    res["sim_us"] = best["neuron"] * 1e6
    res["overhead_us"] = res["sim_us"] - res["cpu_us"]
    return res


def bench_import(repeats: int = 5) -> dict:
    """Fresh-process `import torch` with NEURON_PORT_SIMULATE=1 (autoload + enable, cached build) vs without.

    "core" skips the torch.compile / NEFF cache / distributed registrations (NEURON_PORT_SIM_CORE_ONLY=1).
    """
    base = {k: v for k, v in os.environ.items() if k not in ("NEURON_PORT_SIMULATE", "NEURON_PORT_EVENTS_DIR")}
    variants = {
        "plain": base,
        "simulator": dict(base, NEURON_PORT_SIMULATE="1"),
        "simulator_core": dict(base, NEURON_PORT_SIMULATE="1", NEURON_PORT_SIM_CORE_ONLY="1"),
    }
    code = ("import time; t=time.perf_counter(); import torch, neuron_backend; assert neuron_backend.is_enabled(); "
            "torch.ones(1, device='neuron'); print(time.perf_counter()-t)")
    plain = "import time; t=time.perf_counter(); import torch; print(time.perf_counter()-t)"
    best = {k: float("inf") for k in variants}
    for _ in range(repeats):
        for name, env in variants.items():
            c = plain if name == "plain" else code
            out = subprocess.run([sys.executable, "-c", c], env=env, capture_output=True, text=True, check=True)
            best[name] = min(best[name], float(out.stdout.strip().splitlines()[-1]))
    return {"import_torch_s": best["plain"], "import_with_simulator_s": best["simulator"],
            "extra_s": best["simulator"] - best["plain"],
            "import_with_simulator_core_s": best["simulator_core"],
            "extra_core_s": best["simulator_core"] - best["plain"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--skip-import", action="store_true")
    ap.add_argument("--only", help="comma-separated workloads to run (mlp, gpt, add16); default: all")
    ap.add_argument("--records", action="store_true",
                    help="write events and crash-proof records into a temporary folder, as under `neuron-port check`")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.records:  # before enable(): the records open when the simulator is installed
        import tempfile

        os.environ["NEURON_PORT_EVENTS_DIR"] = tempfile.mkdtemp(prefix="bench-events-")
    assert neuron_backend.enable(), "could not enable the simulator"
    neuron_backend.device._C.set_accounting(True)
    results = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "loadavg": os.getloadavg()},
    }
    only = set(args.only.split(",")) if args.only else {"mlp", "gpt", "add16"}
    for kind in ("mlp", "gpt"):
        if kind in only:
            results[kind] = bench_workload(kind, args.repeats, args.steps)
    if "add16" in only:
        results["add16"] = bench_add(args.repeats)
    if not args.skip_import:
        results["import"] = bench_import()
    goals = {"mlp": ("mlp_ratio<=1.10", lambda r: r["ratio"] <= 1.10),
             "gpt": ("gpt_ratio<=1.25", lambda r: r["ratio"] <= 1.25),
             "add16": ("add_overhead<=3us", lambda r: r["overhead_us"] <= 3.0)}
    results["goals"] = {name: met(results[kind]) for kind, (name, met) in goals.items() if kind in results}
    if "import" in results:
        results["goals"]["import_extra<0.5s"] = results["import"]["extra_s"] < 0.5
        results["goals"]["import_extra_core<0.5s"] = results["import"]["extra_core_s"] < 0.5
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
