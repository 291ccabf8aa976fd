"""Two per-step costs of a shape-only run (issue 36 review), each child a fresh process
(NEURON_PORT_SIMULATE=1 NEURON_PORT_SHAPE_ONLY=1, one intra-op thread):

* ``dropout``: one forward + backward of a dropout-heavy decoder at a real size (4 layers, 8 x 512 x 4096
  activations, d 4096, FFN 16384: per layer an attention with ``dropout_p`` 0.1 and three ``nn.Dropout``s,
  one of them on the 8 x 512 x 16384 FFN hidden; 201M mask elements a step). A real run's CPU
  ``native_dropout`` draws one host number per mask element; before host_stream.py the shape-only run made
  those draws at each call, now it owes them until the host stream is read. Timed: 3 steps after a warm-up,
  wall and CPU seconds each, then one ``torch.get_rng_state()`` (what a read pays for all the steps' draws).
  ``--base TREE`` runs the same child on another checkout (``git worktree add``) on PYTHONPATH: before/after.
* ``layout``: one training step (forward, backward, AdamW; bf16 autocast) of the bench's own GPT-2 124M
  (project/models.py, batch 8 x 1024, built on the device), with metas.py's ``cpu_layout`` (the CPU-kernel
  twins that decide result layouts) as it is (``on``: its calls and the CPU seconds spent inside it counted)
  and replaced by the identity (``off``). Timed: 3 steps after a warm-up step (whose twins are all cache
  misses; its time is printed too).

    git worktree add /tmp/h1-base 354ccc9; git worktree add /tmp/h1-new 078a73c   # before / after
    .venv/bin/python bench/shape_only/host_stream.py --tree /tmp/h1-new --base /tmp/h1-base --only dropout --repeats 2
    .venv/bin/python bench/shape_only/host_stream.py --tree /tmp/h1-new --only layout --repeats 2

Prints one JSON object (also written with --json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def _dropout_child() -> dict:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    B, S, D, H, FFN = 8, 512, 4096, 32, 16384

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.fc, self.out = nn.Linear(D, FFN), nn.Linear(FFN, D)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            q, k, v = (z.view(B, S, H, D // H).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(D, dim=2))
            a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)
            x = x + self.drop(self.proj(a.transpose(1, 2).reshape(B, S, D)))
            h = self.drop(F.gelu(self.fc(self.ln2(x))))
            return x + self.drop(self.out(h))

    torch.manual_seed(0)
    with torch.device("neuron"):
        model = nn.Sequential(*(Layer() for _ in range(4)))
        x = torch.zeros(B, S, D)

    def step():
        model(x).sum().backward()

    step()
    walls, cpus = [], []
    for _ in range(3):
        w, c = time.perf_counter(), time.process_time()
        step()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    w, c = time.perf_counter(), time.process_time()
    torch.get_rng_state()
    return {"step_wall_s": walls, "step_cpu_s": cpus, "read_wall_s": time.perf_counter() - w,
            "read_cpu_s": time.process_time() - c}


def _layout_child(layout: str) -> dict:
    import torch

    sys.path.insert(0, str(HERE / "project"))
    from models import GPT2, GPT2Config

    from neuron_backend.shape_only import metas

    spent = {"calls": 0, "s": 0.0}
    original = metas.cpu_layout
    if layout == "off":
        metas.cpu_layout = lambda func, args, kwargs, out: out
    else:
        def timed(func, args, kwargs, out):
            t = time.process_time()
            try:
                return original(func, args, kwargs, out)
            finally:
                spent["calls"] += 1
                spent["s"] += time.process_time() - t
        metas.cpu_layout = timed

    torch.manual_seed(0)
    with torch.device("neuron"):
        model = GPT2(GPT2Config(layers=12, d=768, heads=12, vocab=50257, seq=1024))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    def step():
        idx = torch.randint(0, 50257, (8, 1024)).to("neuron")
        with torch.autocast("neuron", dtype=torch.bfloat16):
            loss = model(idx, idx)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    w = time.perf_counter()
    step()
    first = {"wall_s": time.perf_counter() - w, "layout_calls": spent["calls"], "layout_s": spent["s"]}
    spent.update(calls=0, s=0.0)
    walls, cpus = [], []
    for _ in range(3):
        w, c = time.perf_counter(), time.process_time()
        step()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return {"first_step": first, "step_wall_s": walls, "step_cpu_s": cpus, "layout_calls_per_step": spent["calls"] / 3,
            "layout_s_per_step": spent["s"] / 3}


def _child(args: list[str], tree: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_", "TORCH_NEURONX_"))}
    env.update(NEURON_PORT_SIMULATE="1", NEURON_PORT_SHAPE_ONLY="1", OMP_NUM_THREADS="1", PYTHONPATH=str(tree))
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", *args], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _load() -> float:
    return os.getloadavg()[0]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    p.add_argument("--base", type=Path, help="a checkout of the code before (git worktree add), for the dropout case")
    p.add_argument("--tree", type=Path, default=ROOT, help="the checkout measured (default: this one)")
    p.add_argument("--only", choices=("dropout", "layout"), action="append")
    p.add_argument("--repeats", type=int, default=1, help="child processes per variant (alternating)")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    if a.child:
        result = _dropout_child() if a.child[0] == "dropout" else _layout_child(a.child[1])
        print(json.dumps(result))
        return
    out: dict = {"load_before": _load(), "runs": {}}
    variants = []
    if not a.only or "dropout" in a.only:
        variants += [("dropout/after", ["dropout"], a.tree.resolve())]
        if a.base:
            variants += [("dropout/before", ["dropout"], a.base.resolve())]
    if not a.only or "layout" in a.only:
        variants += [("layout/on", ["layout", "on"], a.tree.resolve()),
                     ("layout/off", ["layout", "off"], a.tree.resolve())]
    for _ in range(a.repeats):
        for name, args, tree in variants:
            out["runs"].setdefault(name, []).append(_child(args, tree))
    out["load_after"] = _load()
    summary = {}
    for name, runs in out["runs"].items():
        walls = [w for r in runs for w in r["step_wall_s"]]
        summary[name] = {"step_wall_s_min": min(walls), "step_wall_s_median": statistics.median(walls),
                         "step_cpu_s_median": statistics.median(c for r in runs for c in r["step_cpu_s"])}
        if name.startswith("dropout"):
            summary[name]["read_wall_s_median"] = statistics.median(r["read_wall_s"] for r in runs)
        else:
            summary[name]["first_step_wall_s_median"] = statistics.median(r["first_step"]["wall_s"] for r in runs)
            if name == "layout/on":
                summary[name]["layout_s_per_step_median"] = statistics.median(r["layout_s_per_step"] for r in runs)
                summary[name]["layout_calls_per_step"] = runs[0]["layout_calls_per_step"]
                summary[name]["first_step_layout_s_median"] = statistics.median(
                    r["first_step"]["layout_s"] for r in runs)
    out["summary"] = summary
    text = json.dumps(out, indent=1)
    if a.json:
        a.json.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
