"""Write one very large CUDA training module for the rewrite's speed and memory benchmark (issue 22).

Two shapes, both generated here from templates with seeded random names (nothing copied):

  module    a long training module (default 60,000 lines, about 2.0 MB: just under the default 2 MB
            size limit) made of many model blocks, data helpers and training steps, each with the CUDA
            idioms of shared/patterns.md: ``.cuda()`` and ``.to("cuda:N")`` moves, device strings and
            ``torch.device``, ``torch.cuda.*`` calls (synchronize, memory statistics, streams, events),
            autocast and GradScaler, cudnn/TF32 flags, ``torch.compile`` modes, NCCL set-up, and plenty
            of code without any (docstrings, comments, arithmetic, logging).
  one-line  a small script whose one statement holds N ``.cuda()`` calls on one line (default 20,000):
            ``batch = [x_0.cuda(), x_1.cuda(), ...]``.
  flat      a script of ``--lines`` top-level statements (no def or class: a notebook exported as one
            script, a generated experiment), the same statements as ``functions`` (issue 33).
  functions the lines of ``flat`` (same seed) cut into functions of 20 statements each.

    .venv/bin/python bench/rewrite/generate_large_file.py OUT.py [--lines 60000] [--seed 0]
    .venv/bin/python bench/rewrite/generate_large_file.py OUT.py --one-line 20000
    .venv/bin/python bench/rewrite/generate_large_file.py OUT.py --lines 30000 --shape flat|functions

The same arguments give the same bytes. The module ends as soon as it has ``--lines`` lines, at a
statement boundary (a complete function or class), so the file always parses.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

WORDS = (
    "block layer encoder decoder embed proj head norm attn mlp gate router expert patch pool conv stem "
    "stage cell unit branch fuse mix scale shift token pos rotary cache state hidden latent prior vocab "
    "feature sample batch frame clip audio text image mask span query key value score logit target label"
).split()

HEADER = '''"""A long single-file trainer: models, data helpers and training steps in one module.

Everything runs on the GPU; the blocks below were added one experiment at a time.
"""

import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.cuda.amp import GradScaler, autocast
from torch.nn.parallel import DistributedDataParallel as DDP

torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = True
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", 0))

'''


class Writer:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.n = 0

    def word(self) -> str:
        return self.r.choice(WORDS)

    def snake(self) -> str:
        self.n += 1
        return f"{self.word()}_{self.word()}_{self.n}"

    def camel(self) -> str:
        self.n += 1
        return f"{self.word().capitalize()}{self.word().capitalize()}{self.n}"

    def dim(self) -> int:
        return self.r.choice((64, 128, 256, 512, 768, 1024))

    def model_block(self) -> list[str]:
        name, d, h = self.camel(), self.dim(), self.dim()
        act = self.r.choice(("nn.GELU()", "nn.SiLU()", "nn.ReLU(inplace=True)"))
        return [
            f"class {name}(nn.Module):",
            f'    """The {self.word()} {self.word()} block ({d} -> {h} -> {d})."""',
            "",
            f"    def __init__(self, dim={d}, hidden={h}, dropout={self.r.choice((0.0, 0.1, 0.2))}):",
            "        super().__init__()",
            "        self.norm = nn.LayerNorm(dim)",
            "        self.up = nn.Linear(dim, hidden)",
            f"        self.act = {act}",
            "        self.down = nn.Linear(hidden, dim)",
            "        self.drop = nn.Dropout(dropout)",
            "        self.register_buffer(\"scale\", torch.ones(dim))",
            "",
            "    def forward(self, x, mask=None):",
            f"        # {self.word()} {self.word()} before the residual",
            "        y = self.down(self.drop(self.act(self.up(self.norm(x)))))",
            "        if mask is not None:",
            "            y = y.masked_fill(~mask[..., None], 0.0)",
            "        return x + y * self.scale",
            "",
            "",
        ]

    def data_helper(self) -> list[str]:
        name, key = self.snake(), self.word()
        dev = self.r.choice(('"cuda"', '"cuda:0"', f'"cuda:{self.r.randint(0, 7)}"', "DEVICE"))
        return [
            f"def {name}(batch, non_blocking=True):",
            f'    """Move the {key} batch to the GPU and pad it to a multiple of 8."""',
            f"    inputs = batch[\"{key}\"].cuda(non_blocking=non_blocking)",
            f"    labels = batch[\"label\"].to({dev})",
            "    pad = (8 - inputs.shape[-1] % 8) % 8",
            "    if pad:",
            "        inputs = F.pad(inputs, (0, pad))",
            f"    lengths = torch.tensor([len(x) for x in batch[\"{key}\"]], device=\"cuda\")",
            "    return inputs, labels, lengths",
            "",
            "",
        ]

    def train_step(self) -> list[str]:
        name, model = self.snake(), self.camel()
        dtype = self.r.choice(("torch.float16", "torch.bfloat16"))
        return [
            f"def {name}(model, batch, optimizer, scaler=None, step=0):",
            f'    """One {self.word()} step under autocast; returns the loss as a float."""',
            "    model.train()",
            "    x = batch[0].cuda()",
            "    y = batch[1].cuda()",
            "    optimizer.zero_grad(set_to_none=True)",
            f"    with autocast(dtype={dtype}):",
            "        logits = model(x)",
            "        loss = F.cross_entropy(logits.float(), y)",
            "    if scaler is not None:",
            "        scaler.scale(loss).backward()",
            "        scaler.step(optimizer)",
            "        scaler.update()",
            "    else:",
            "        loss.backward()",
            "        optimizer.step()",
            "    if step % 100 == 0:",
            "        torch.cuda.synchronize()",
            "        used = torch.cuda.max_memory_allocated() / 2**30",
            f"        print(f\"{model} step {{step}}: loss {{loss.item():.4f}}, {{used:.2f}} GiB\")",
            "    return loss.item()",
            "",
            "",
        ]

    def timing(self) -> list[str]:
        name = self.snake()
        return [
            f"def {name}(fn, *args, warmup=3, iters=10):",
            '    """Time ``fn`` with CUDA events, in milliseconds per call."""',
            "    for _ in range(warmup):",
            "        fn(*args)",
            "    start = torch.cuda.Event(enable_timing=True)",
            "    end = torch.cuda.Event(enable_timing=True)",
            "    start.record()",
            "    for _ in range(iters):",
            "        fn(*args)",
            "    end.record()",
            "    torch.cuda.synchronize()",
            "    return start.elapsed_time(end) / iters",
            "",
            "",
        ]

    def setup(self) -> list[str]:
        name, model = self.snake(), self.camel()
        mode = self.r.choice(("max-autotune", "reduce-overhead", "default"))
        return [
            f"def {name}(model, world_size):",
            f'    """Put the {self.word()} model on this rank\'s GPU, wrap it and compile it."""',
            "    if world_size > 1 and not dist.is_initialized():",
            "        dist.init_process_group(backend=\"nccl\")",
            "    torch.cuda.set_device(LOCAL_RANK)",
            "    model = model.to(f\"cuda:{LOCAL_RANK}\")",
            "    if world_size > 1:",
            "        model = DDP(model, device_ids=[LOCAL_RANK])",
            f"    model = torch.compile(model, mode=\"{mode}\")",
            "    scaler = GradScaler()",
            f"    print(\"{model} ready on\", torch.cuda.get_device_name(LOCAL_RANK))",
            "    return model, scaler",
            "",
            "",
        ]

    def plain(self) -> list[str]:
        """Code without any CUDA idiom (most of a real module)."""
        name, a, b = self.snake(), self.word(), self.word()
        return [
            f"def {name}(values, eps=1e-{self.r.randint(5, 9)}):",
            f'    """The running {a} of the {b} values, clipped to [0, 1]."""',
            "    total = 0.0",
            "    count = 0",
            "    for value in values:",
            "        if value is None or math.isnan(value):",
            "            continue",
            "        total += value",
            "        count += 1",
            f"    # {a} {b}: an empty list gives zero",
            "    mean = total / max(count, 1)",
            "    return min(max(mean, 0.0), 1.0) + eps * 0",
            "",
            "",
        ]

    def module(self, lines: int) -> str:
        out = HEADER.splitlines()
        makers = (self.model_block, self.data_helper, self.train_step, self.timing, self.setup,
                  self.plain, self.plain, self.plain)
        while True:
            chunk = self.r.choice(makers)()
            if len(out) + len(chunk) > lines:
                break
            out.extend(chunk)
        out.extend("" for _ in range(lines - len(out)))  # exactly ``lines`` lines
        return "\n".join(out) + "\n"


    def statement(self) -> str:
        """One top-level line of a flat script: CUDA moves and calls among plain arithmetic and logging."""
        a, b, n = self.snake(), self.word(), self.n
        return self.r.choice((
            f"{a} = torch.randn({self.dim()}, {self.dim()}).cuda()",
            f"{a} = {b}_{n - 1} * {self.r.randint(2, 9)} + 1",
            f"{a} = F.relu({b}_{n - 2}).to(\"cuda:{self.r.randint(0, 7)}\")",
            f"print(\"{b}\", {n}, float({b}_{n - 1}.mean()))",
            f"{a} = math.sqrt({self.r.randint(1, 999)}) / {self.r.randint(1, 9)}",
            "torch.cuda.synchronize()",
        ))

    def flat(self, lines: int) -> list[str]:
        return [self.statement() for _ in range(lines)]


FLAT_HEADER = "import math\n\nimport torch\nimport torch.nn.functional as F\n\n"


def flat(lines: int, seed: int) -> str:
    return FLAT_HEADER + "".join(f"{line}\n" for line in Writer(seed).flat(lines))


def functions(lines: int, seed: int, per_function: int = 20) -> str:
    body = Writer(seed).flat(lines)
    parts = [FLAT_HEADER]
    for start in range(0, len(body), per_function):
        parts.append(f"\ndef part_{start // per_function}():\n")
        parts.extend(f"    {line}\n" for line in body[start:start + per_function])
    return "".join(parts)


def one_line(calls: int) -> str:
    inputs = ", ".join(f"x_{i}" for i in range(8))
    moved = ", ".join(f"x_{i % 8}.cuda()" for i in range(calls))
    return (
        '"""Every input tensor moved to the GPU in one statement (a generated list)."""\n\n'
        "import torch\n\n\n"
        f"def move_all({inputs}):\n"
        f"    batch = [{moved}]\n"
        "    return batch\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--lines", type=int, default=60_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one-line", type=int, metavar="N", help="one line of N .cuda() calls instead")
    parser.add_argument("--shape", choices=("module", "flat", "functions"), default="module")
    args = parser.parse_args()
    if args.one_line:
        text = one_line(args.one_line)
    elif args.shape == "module":
        text = Writer(args.seed).module(args.lines)
    else:
        text = (flat if args.shape == "flat" else functions)(args.lines, args.seed)
    args.out.write_text(text, encoding="utf-8")
    print(f"{args.out}: {text.count(chr(10))} lines, {len(text.encode())} bytes")


if __name__ == "__main__":
    main()
