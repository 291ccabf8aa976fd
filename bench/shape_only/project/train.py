"""One training step (or N gradient-accumulation micro-steps) of a GPT-2- or Llama-style decoder on the
``neuron`` device: AdamW, bf16 autocast, ``loss.item()`` printed. Sizes come from the command line.

    python train.py --model gpt2 --layers 12 --d 768 --heads 12 --vocab 50257 --seq 1024 --batch 64
    python train.py --model llama --layers 32 --d 4096 --heads 32 --kv-heads 8 --ffn 14336 \
        --vocab 128256 --seq 8192 --batch 2 --build device

``--build cpu`` builds the model on the CPU and moves it with ``.to(device)``; ``--build device`` builds
it under ``with torch.device(device):``. Each phase's wall time is printed as ``phase NAME SECONDS``
(bench/shape_only/run.py reads them).
"""

from __future__ import annotations

import argparse
import time

_T0 = time.perf_counter()

import torch  # noqa: E402

from models import GPT2, GPT2Config, Llama, LlamaConfig  # noqa: E402

_last = [_T0]


def phase(name: str) -> None:
    now = time.perf_counter()
    print(f"phase {name} {now - _last[0]:.3f}", flush=True)
    _last[0] = now


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=("gpt2", "llama"), default="gpt2")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--d", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=14336)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--micro-steps", type=int, default=1, help="gradient accumulation micro-steps per step")
    p.add_argument("--steps", type=int, default=1, help="optimizer steps")
    p.add_argument("--build", choices=("cpu", "device"), default="cpu")
    p.add_argument("--gqa", choices=("sdpa", "repeat"), default="sdpa")
    p.add_argument("--device", default="neuron")
    p.add_argument("--no-amp", action="store_true")
    p.add_argument("--fsdp", action="store_true", help="init_process_group(backend='neuron'), fully_shard per block")
    a = p.parse_args()
    phase("import")

    torch.manual_seed(0)
    device = torch.device(a.device)
    if a.fsdp:
        import torch.distributed as dist

        dist.init_process_group(backend="neuron")  # before any tensor is on the device
        print(f"rank {dist.get_rank()} of {dist.get_world_size()}", flush=True)
    if a.model == "gpt2":
        cfg = GPT2Config(layers=a.layers, d=a.d, heads=a.heads, vocab=a.vocab, seq=a.seq)
        make = lambda: GPT2(cfg)  # noqa: E731
    else:
        cfg = LlamaConfig(layers=a.layers, d=a.d, heads=a.heads, kv_heads=a.kv_heads, ffn=a.ffn,
                          vocab=a.vocab, seq=a.seq, gqa=a.gqa)
        make = lambda: Llama(cfg)  # noqa: E731
    if a.build == "cpu":
        model = make()
        phase("build")
        model = model.to(device)
        phase("to_device")
    else:
        with torch.device(device):
            model = make()
        phase("build")
    if a.fsdp:
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        phase("shard")
    n_params = sum(p.numel() for p in model.parameters())
    print(f"parameters {n_params}", flush=True)

    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    for step in range(a.steps):
        total = 0.0
        for micro in range(a.micro_steps):
            idx = torch.randint(0, a.vocab, (a.batch, a.seq)).to(device)
            targets = torch.randint(0, a.vocab, (a.batch, a.seq)).to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=not a.no_amp):
                loss = model(idx, targets) / a.micro_steps
            phase("forward")
            loss.backward()
            phase("backward")
            total += loss.item()
        opt.step()
        opt.zero_grad(set_to_none=True)
        phase("optimizer")
        print(f"step {step} loss {total:.4f}", flush=True)
    mem = getattr(torch, device.type, None)
    if mem is not None and hasattr(mem, "max_memory_allocated"):
        print(f"max_memory_allocated {mem.max_memory_allocated()}", flush=True)


if __name__ == "__main__":
    main()
