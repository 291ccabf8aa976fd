"""One training step of a published configuration (docs/estimate.md, "Validation against published runs"),
for ``neuron-port check --shape-only --world-size N``: rank 0 of an N-rank job.

    python train.py --model gpt2 --layers 12 --d 768 --heads 12 --batch 64 --seq 1024 --dp allreduce --compile
    python train.py --model llama --layers 32 --d 4096 --heads 32 --kv-heads 8 --ffn 14336 --vocab 128256 \
        --batch 2 --seq 8192 --dp fsdp

``--dp allreduce``: every gradient all-reduced after the backward, as llm.c does (its own all-reduce, no
DDP); ``--dp fsdp``: FSDP2 ``fully_shard`` per block (torchtitan). ``--compile``: each block compiled
(torch.compile per block, as torchtitan; llm.c's hand-fused kernels are costed as a compiled graph).
``--ac selective``: torchtitan's op-level selective activation checkpointing per block (its
``[activation_checkpoint] mode = 'selective'``, ``selective_ac_option = 'op'``, the configuration of its
Llama 3.1 8B benchmark): the outputs of attention and of every other matmul of a block are kept, every other
op of the block is recomputed in the backward; ``--ac full``: the whole block recomputed. The models are
bench/shape_only/project/models.py (the one copy, shared with the shape-only benchmark), copied beside this
file by the test and the benchmark.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

sys.path.insert(0, str(Path(__file__).resolve().parent))  # models.py is copied beside it by the test
from models import GPT2, GPT2Config, Llama, LlamaConfig  # noqa: E402


def keep_attention_and_every_other_matmul():
    """A selective checkpoint context for one block's forward: attention's outputs (any SDPA entry point)
    and the 1st, 3rd, ... matmul of the block are saved, the rest recomputed (counted apart in the forward
    and in the recompute, so both pick the same matmuls)."""
    matmuls = {False: 0, True: 0}

    def policy(ctx, op, *args, **kwargs):
        if op is torch.ops.aten.mm.default:
            matmuls[ctx.is_recompute] += 1
            return CheckpointPolicy.MUST_SAVE if matmuls[ctx.is_recompute] % 2 else CheckpointPolicy.PREFER_RECOMPUTE
        if "scaled_dot_product" in str(op):
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


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
    p.add_argument("--micro-steps", type=int, default=1)
    p.add_argument("--dp", choices=("none", "allreduce", "fsdp"), default="none")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--ac", choices=("none", "selective", "full"), default="none")
    a = p.parse_args()
    device = torch.device("neuron")
    if a.dp != "none":
        dist.init_process_group(backend="neuron")
    with torch.device(device):
        if a.model == "gpt2":
            model = GPT2(GPT2Config(layers=a.layers, d=a.d, heads=a.heads, vocab=a.vocab, seq=a.seq))
        else:
            model = Llama(LlamaConfig(layers=a.layers, d=a.d, heads=a.heads, kv_heads=a.kv_heads, ffn=a.ffn,
                                      vocab=a.vocab, seq=a.seq))
    for block in model.blocks:  # as torchtitan: activation checkpointing inside the compiled block
        forward = block.forward
        if a.ac != "none":
            context = keep_attention_and_every_other_matmul if a.ac == "selective" else None
            forward = lambda *xs, f=forward, c=context: checkpoint(  # noqa: E731
                f, *xs, use_reentrant=False, **({"context_fn": c} if c else {}))
        if a.compile:
            forward = torch.compile(forward, backend="neuron")
        block.forward = forward
    if a.dp == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in model.blocks:
            fully_shard(block, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    for _ in range(a.micro_steps):
        idx = torch.randint(0, a.vocab, (a.batch, a.seq)).to(device)
        targets = torch.randint(0, a.vocab, (a.batch, a.seq)).to(device)
        with torch.autocast("neuron", dtype=torch.bfloat16):
            loss = model(idx, targets) / a.micro_steps
        loss.backward()
    if a.dp == "allreduce":
        for param in model.parameters():
            if param.grad is not None:
                dist.all_reduce(param.grad)
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(f"loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
