"""Write a synthetic but realistic PyTorch project tree for the rewrite benchmark.

About 2,000 files and 500k lines by default: model code, data loading, utilities, training scripts and
tests, almost all of it without CUDA calls (as in real repositories, where the device code sits in a
few entry points), plus a few percent of files carrying the CUDA idioms of shared/patterns.md (`.cuda()`,
`"cuda:N"` strings, `torch.cuda.*`, autocast/GradScaler, `torch.compile` modes, cudnn flags, NCCL and
DDP device ids, CUDA_VISIBLE_DEVICES, ...). Everything is generated here from templates with random
names, sizes and spellings; nothing is copied. The same seed gives the same bytes.

    .venv/bin/python bench/rewrite/generate_corpus.py OUT_DIR [--files 2000] [--lines 500000] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import shutil
from pathlib import Path

WORDS = (
    "block layer encoder decoder embed proj head norm attn mlp gate router expert patch pool conv stem "
    "stage cell unit branch fuse mix scale shift token pos rotary cache state hidden latent prior vocab "
    "feature sample batch frame clip audio text image mask span query key value score logit target label "
    "weight bias step epoch metric loss grad lr warmup decay schedule buffer record shard chunk window"
).split()
ACTS = ("nn.GELU()", "nn.ReLU(inplace=True)", "nn.SiLU()", "nn.Tanh()", "nn.Identity()", "nn.Mish()")
NORMS = ("nn.LayerNorm({d})", "nn.BatchNorm1d({d})", "nn.GroupNorm(8, {d})", "nn.Identity()")


class Gen:
    def __init__(self, rng: random.Random) -> None:
        self.r = rng

    # -- names ---------------------------------------------------------------------------------
    def word(self) -> str:
        return self.r.choice(WORDS)

    def snake(self, n: int = 2) -> str:
        return "_".join(self.word() for _ in range(n))

    def camel(self, n: int = 2) -> str:
        return "".join(self.word().capitalize() for _ in range(n))

    def dim(self) -> int:
        return self.r.choice((32, 64, 128, 256, 384, 512, 768, 1024, 2048))

    def docstring(self, indent: str, what: str) -> list[str]:
        lines = [f'{indent}"""{what.capitalize()} the {self.word()} {self.word()}.']
        if self.r.random() < 0.6:
            lines.append("")
            lines.append(f"{indent}Args:")
            for _ in range(self.r.randint(1, 4)):
                lines.append(f"{indent}    {self.snake(1)}: the {self.word()} {self.word()} (default {self.r.randint(0, 9)}).")
            lines.append(f"{indent}Returns:")
            lines.append(f"{indent}    The {self.word()} tensor of shape (batch, {self.word()}, dim).")
        lines.append(f'{indent}"""')
        return lines

    def comment(self, indent: str) -> str:
        return f"{indent}# {self.word()} {self.word()} before the {self.word()} {self.r.choice(('pass', 'update', 'reduction', 'split', 'merge'))}"

    # -- building blocks -------------------------------------------------------------------------
    def module_class(self) -> list[str]:
        name = self.camel(self.r.randint(1, 3))
        d = self.dim()
        hidden = d * self.r.choice((2, 4))
        n = self.r.randint(2, 6)
        attrs = [self.snake(1) + f"_{i}" for i in range(n)]
        out = [f"class {name}(nn.Module):"]
        out += self.docstring("    ", "compute")
        out += [
            "",
            f"    def __init__(self, dim: int = {d}, hidden: int = {hidden}, dropout: float = {self.r.choice((0.0, 0.1, 0.2))}) -> None:",
            "        super().__init__()",
        ]
        for a in attrs:
            kind = self.r.random()
            if kind < 0.4:
                out.append(f"        self.{a} = nn.Linear(dim, {self.r.choice(('dim', 'hidden'))}, bias={self.r.choice(('True', 'False'))})")
            elif kind < 0.6:
                out.append(f"        self.{a} = {self.r.choice(NORMS).format(d='dim')}")
            elif kind < 0.75:
                out.append(f"        self.{a} = nn.Sequential(nn.Linear(dim, hidden), {self.r.choice(ACTS)}, nn.Linear(hidden, dim))")
            elif kind < 0.85:
                out.append(f"        self.{a} = nn.Dropout(dropout)")
            else:
                out.append(f"        self.register_buffer(\"{a}\", torch.zeros({self.r.randint(1, 64)}, dim), persistent=False)")
        out += ["        self.reset_parameters()", "", "    def reset_parameters(self) -> None:"]
        out += [
            "        for module in self.modules():",
            "            if isinstance(module, nn.Linear):",
            f"                nn.init.{self.r.choice(('xavier_uniform_', 'kaiming_normal_', 'orthogonal_'))}(module.weight)",
            "                if module.bias is not None:",
            "                    nn.init.zeros_(module.bias)",
            "",
            "    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:",
        ]
        for i in range(self.r.randint(3, 12)):
            op = self.r.random()
            if op < 0.15:
                out.append(self.comment("        "))
            if op < 0.3:
                out.append("        h = x.transpose(1, 2).reshape(x.shape[0], -1, x.shape[1]).transpose(1, 2)")
            elif op < 0.5:
                out.append(f"        x = x + {self.r.choice(('0.5 * ', ''))}torch.tanh(x)")
            elif op < 0.65:
                out += ["        if mask is not None:", "            x = x.masked_fill(~mask.unsqueeze(-1), 0.0)"]
            elif op < 0.8:
                out.append(f"        x = F.{self.r.choice(('gelu', 'relu', 'silu', 'softplus'))}(x)")
            else:
                out.append("        x = torch.cat([x, x.mean(dim=1, keepdim=True).expand_as(x)], dim=-1)[..., : x.shape[-1]]")
        out += ["        return x", "", "    def extra_repr(self) -> str:",
                f"        return f\"{self.word()}={{self.{attrs[0]}}}\"", ""]
        return out

    def function(self) -> list[str]:
        name = self.snake(self.r.randint(2, 3))
        args = [self.snake(1) for _ in range(self.r.randint(1, 4))]
        args = list(dict.fromkeys(args))
        out = [f"def {name}({', '.join(a + ': ' + self.r.choice(('int', 'float', 'str', 'torch.Tensor', 'Sequence[int]')) for a in args)}) -> {self.r.choice(('int', 'float', 'dict', 'list', 'torch.Tensor', 'None'))}:"]
        out += self.docstring("    ", self.r.choice(("return", "build", "normalise", "collect", "merge")))
        body = self.r.randint(3, 14)
        out.append("    result = {}")
        for i in range(body):
            op = self.r.random()
            a = self.r.choice(args)
            if op < 0.2:
                out += [f"    for index, item in enumerate(range(len(str({a})))):", f"        result[f\"{self.word()}_{{index}}\"] = item * {self.r.randint(2, 9)}"]
            elif op < 0.35:
                out += [f"    if not {a}:", f"        raise ValueError(f\"{a} must be set, got {{{a}!r}}\")"]
            elif op < 0.5:
                out.append(f"    logger.debug(\"{self.word()} %s -> %s\", {a}, len(result))")
            elif op < 0.65:
                out += ["    try:", f"        result[\"{self.word()}\"] = float({a}) / {self.r.randint(1, 100)}",
                        "    except (TypeError, ValueError):", f"        result[\"{self.word()}\"] = None"]
            elif op < 0.8:
                out.append(f"    result.update({{k: v for k, v in zip(\"{self.word()}\", range({self.r.randint(2, 20)}))}})")
            else:
                out.append(self.comment("    "))
                out.append(f"    {self.snake(1)}_total = sum(int(v or 0) for v in result.values() if isinstance(v, int))")
        out += ["    return result  # type: ignore[return-value]", ""]
        return out

    def dataset_class(self) -> list[str]:
        name = self.camel(2) + "Dataset"
        out = [f"class {name}(Dataset):"]
        out += self.docstring("    ", "load")
        out += [
            "",
            f"    def __init__(self, root: str, split: str = \"train\", max_len: int = {self.r.choice((128, 256, 512, 1024))}) -> None:",
            "        self.root = Path(root)",
            "        self.split = split",
            "        self.max_len = max_len",
            f"        self.items = sorted(self.root.glob(f\"{{split}}/*.{self.r.choice(('json', 'jsonl', 'txt', 'npy', 'wav'))}\"))",
            "        if not self.items:",
            "            raise FileNotFoundError(f\"no samples under {self.root / split}\")",
            "",
            "    def __len__(self) -> int:",
            "        return len(self.items)",
            "",
            "    def __getitem__(self, index: int) -> dict:",
            "        path = self.items[index]",
            "        with open(path, encoding=\"utf-8\") as handle:",
            "            record = json.loads(handle.readline())",
            f"        tokens = torch.tensor(record[\"{self.word()}\"][: self.max_len], dtype=torch.long)",
            f"        label = torch.tensor(record.get(\"{self.word()}\", -100))",
            "        return {\"input_ids\": tokens, \"labels\": label, \"length\": len(tokens)}",
            "",
        ]
        return out

    def collate(self) -> list[str]:
        return [
            f"def collate_{self.word()}(batch: list[dict], pad_id: int = 0) -> dict:",
            "    longest = max(item[\"length\"] for item in batch)",
            "    input_ids = torch.full((len(batch), longest), pad_id, dtype=torch.long)",
            "    attention = torch.zeros((len(batch), longest), dtype=torch.bool)",
            "    for row, item in enumerate(batch):",
            "        input_ids[row, : item[\"length\"]] = item[\"input_ids\"]",
            "        attention[row, : item[\"length\"]] = True",
            "    labels = torch.stack([item[\"labels\"] for item in batch])",
            "    return {\"input_ids\": input_ids, \"attention_mask\": attention, \"labels\": labels}",
            "",
        ]

    def config_dataclass(self) -> list[str]:
        out = ["@dataclass", f"class {self.camel(2)}Config:"]
        for _ in range(self.r.randint(4, 14)):
            kind = self.r.random()
            if kind < 0.4:
                out.append(f"    {self.snake(2)}: int = {self.r.choice((1, 2, 4, 8, 12, 16, 32, 64, 128, 512, 4096))}")
            elif kind < 0.7:
                out.append(f"    {self.snake(2)}: float = {self.r.choice((0.0, 0.1, 1e-5, 3e-4, 0.02, 0.999))}")
            elif kind < 0.85:
                out.append(f"    {self.snake(2)}: str = \"{self.word()}\"")
            else:
                out.append(f"    {self.snake(2)}: bool = {self.r.choice(('True', 'False'))}")
        out += ["", "    def to_dict(self) -> dict:", "        return asdict(self)", ""]
        return out

    def test_function(self) -> list[str]:
        name = "test_" + self.snake(self.r.randint(2, 3))
        out = []
        if self.r.random() < 0.3:
            out.append(f"@pytest.mark.parametrize(\"size\", [{', '.join(str(self.r.choice((1, 2, 3, 8, 16))) for _ in range(3))}])")
            out.append(f"def {name}(size: int) -> None:")
        else:
            out.append(f"def {name}(tmp_path) -> None:")
            out.append("    size = 4")
        out += [
            f"    x = torch.randn(size, {self.r.choice((3, 8, 16))}, {self.dim()})",
            f"    layer = nn.Linear(x.shape[-1], {self.dim()})",
            "    y = layer(x)",
            "    assert y.shape[:2] == x.shape[:2]",
        ]
        for _ in range(self.r.randint(1, 6)):
            op = self.r.random()
            if op < 0.4:
                out.append(f"    assert torch.isfinite(y).all(), \"{self.word()} produced non-finite values\"")
            elif op < 0.7:
                out.append(f"    torch.testing.assert_close(y.sum(), y.sum(), rtol={self.r.choice(('1e-5', '1e-4', '0'))}, atol=0)")
            else:
                out += ["    with pytest.raises((ValueError, RuntimeError)):", "        layer(torch.randn(size, 1))"]
        out.append("")
        return out

    def regex_util(self) -> list[str]:
        return [
            f"_{self.word().upper()}_RE = re.compile(r\"^(?P<{self.word()}>[a-z_]+)\\.(?P<index>\\d+)$\")",
            "",
            f"def parse_{self.word()}_key(key: str) -> Optional[tuple[str, int]]:",
            f"    match = _{self.word().upper()}_RE.match(key)",
            "    if match is None:",
            "        return None",
            "    return match.group(1), int(match.group(2))",
            "",
        ]

    def train_loop(self) -> list[str]:
        # a CPU-only training loop: optimizer, scheduler, checkpoints (no device code)
        return [
            f"def train_{self.word()}(model: nn.Module, loader, epochs: int = {self.r.randint(1, 50)}, lr: float = {self.r.choice(('1e-3', '3e-4', '5e-5'))}) -> dict:",
            f"    optimizer = torch.optim.{self.r.choice(('AdamW', 'SGD', 'Adam'))}(model.parameters(), lr=lr)",
            "    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)",
            "    history = {\"loss\": []}",
            "    for epoch in range(epochs):",
            "        model.train()",
            "        for step, batch in enumerate(loader):",
            "            optimizer.zero_grad(set_to_none=True)",
            "            loss = F.cross_entropy(model(batch[\"input_ids\"]).flatten(0, 1), batch[\"labels\"].flatten())",
            "            loss.backward()",
            f"            torch.nn.utils.clip_grad_norm_(model.parameters(), {self.r.choice(('1.0', '0.5', '5.0'))})",
            "            optimizer.step()",
            "            history[\"loss\"].append(loss.item())",
            f"            if step % {self.r.choice((10, 50, 100))} == 0:",
            "                logger.info(\"epoch %d step %d loss %.4f\", epoch, step, loss.item())",
            "        scheduler.step()",
            "        torch.save({\"model\": model.state_dict(), \"epoch\": epoch}, f\"checkpoint_{epoch}.pt\")",
            "    return history",
            "",
        ]

    # -- CUDA idioms (shared/patterns.md), a few per file, random spellings -----------------------------
    def cuda_block(self) -> list[str]:
        choices = [
            lambda: ["device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")", "model = model.to(device)"],
            lambda: ["model = model.cuda()", "batch = {k: v.cuda(non_blocking=True) for k, v in batch.items()}"],
            lambda: [f"device = 'cuda:{self.r.randint(0, 7)}'", "x = torch.zeros(4, 4, device=device)"],
            lambda: ["local_rank = int(os.environ[\"LOCAL_RANK\"])", "torch.cuda.set_device(local_rank)",
                     "dist.init_process_group(backend=\"nccl\")", "model = DDP(model, device_ids=[local_rank], output_device=local_rank)"],
            lambda: ["scaler = torch.cuda.amp.GradScaler(enabled=True)",
                     "with torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16):", "    loss = model(x).sum()",
                     "scaler.scale(loss).backward()"],
            lambda: [f"model = torch.compile(model, mode=\"{self.r.choice(('max-autotune', 'reduce-overhead', 'default'))}\")"],
            lambda: ["torch.backends.cudnn.benchmark = True", "torch.backends.cuda.matmul.allow_tf32 = True"],
            lambda: ["torch.cuda.synchronize()", "peak = torch.cuda.max_memory_allocated() / 2**20",
                     "torch.cuda.empty_cache()"],
            lambda: ["os.environ[\"CUDA_VISIBLE_DEVICES\"] = \"0,1\"", "world_size = torch.cuda.device_count()"],
            lambda: ["if x.is_cuda:", "    x = x.float()"],
            lambda: ["parser.add_argument(\"--device\", default=\"cuda\", choices=[\"cpu\", \"cuda\"])"],
            lambda: ["start = torch.cuda.Event(enable_timing=True)", "end = torch.cuda.Event(enable_timing=True)",
                     "start.record()", "y = model(x)", "end.record()", "torch.cuda.synchronize()"],
        ]
        out = [f"def setup_{self.word()}(model, x, batch, parser):"]
        for _ in range(self.r.randint(1, 4)):
            out += ["    " + line for line in self.r.choice(choices)()]
        out += ["    return model", ""]
        return out


HEADERS = {
    "model": ["import math", "from typing import Optional, Sequence", "", "import torch",
              "import torch.nn as nn", "import torch.nn.functional as F", "", "import logging", "",
              "logger = logging.getLogger(__name__)", ""],
    "data": ["import json", "import logging", "from pathlib import Path", "from typing import Optional, Sequence", "",
             "import torch", "from torch.utils.data import Dataset", "", "logger = logging.getLogger(__name__)", ""],
    "utils": ["import logging", "import os", "import re", "from dataclasses import asdict, dataclass",
              "from typing import Optional, Sequence", "", "import torch", "",
              "logger = logging.getLogger(__name__)", ""],
    "test": ["import pytest", "import torch", "import torch.nn as nn", "from typing import Sequence", ""],
    "train": ["import argparse", "import logging", "import os", "from typing import Optional, Sequence", "",
              "import torch", "import torch.nn as nn", "import torch.nn.functional as F", "",
              "logger = logging.getLogger(__name__)", ""],
}
CUDA_HEADER = ["import torch.distributed as dist", "from torch.nn.parallel import DistributedDataParallel as DDP", ""]


def build_file(g: Gen, kind: str, target_lines: int, cuda: bool) -> str:
    lines = [f'"""{g.word().capitalize()} {g.word()} {kind} code ({g.snake(2)})."""', ""]
    lines += HEADERS[kind]
    if cuda:
        lines += CUDA_HEADER
    makers = {
        "model": [(g.module_class, 6), (g.function, 2), (g.config_dataclass, 1)],
        "data": [(g.dataset_class, 3), (g.collate, 2), (g.function, 3)],
        "utils": [(g.function, 5), (g.regex_util, 1), (g.config_dataclass, 2)],
        "test": [(g.test_function, 1)],
        "train": [(g.train_loop, 2), (g.function, 3), (g.module_class, 1)],
    }[kind]
    pool = [m for m, w in makers for _ in range(w)]
    insert_at = g.r.randint(0, 3) if cuda else -1
    while len(lines) < target_lines:
        if cuda and insert_at == 0:
            lines += g.cuda_block() + [""]
        insert_at -= 1
        lines += g.r.choice(pool)() + [""]
    if cuda and insert_at >= 0:
        lines += g.cuda_block()
    return "\n".join(lines).rstrip() + "\n"


def generate(out: Path, files: int = 2000, lines: int = 500_000, seed: int = 0, cuda_share: float = 0.04) -> tuple[int, int, int]:
    r = random.Random(seed)
    g = Gen(r)
    if out.exists():
        shutil.rmtree(out)
    kinds = ["model"] * 30 + ["data"] * 15 + ["utils"] * 20 + ["test"] * 27 + ["train"] * 8
    mean = lines / files
    # file sizes: log-normal around the mean (a few large files, many small ones), then scaled to the total
    sizes = [r.lognormvariate(0, 0.8) for _ in range(files)]
    scale = mean / (sum(sizes) / files)
    total = written_cuda = 0
    for i in range(files):
        kind = r.choice(kinds)
        package = {"model": "models", "data": "data", "utils": "utils", "test": "tests", "train": "scripts"}[kind]
        sub = f"{package}/{WORDS[(r.randrange(8) * 7 + len(package)) % len(WORDS)]}"
        name = (f"test_{g.snake(2)}_{i}" if kind == "test" else f"{g.snake(2)}_{i}") + ".py"
        cuda = r.random() < cuda_share
        text = build_file(g, kind, max(20, int(sizes[i] * scale)), cuda)
        path = out / sub / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        total += text.count("\n")
        written_cuda += cuda
    (out / "pyproject.toml").write_text('[project]\nname = "synthetic-trainer"\nversion = "0.1.0"\n')
    for folder in sorted({p.parent for p in out.rglob("*.py")}):
        init = folder / "__init__.py"
        if not init.exists():
            init.write_text("")
    return files, total, written_cuda


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--lines", type=int, default=500_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cuda-share", type=float, default=0.04, help="share of files with CUDA idioms")
    args = parser.parse_args()
    files, total, cuda = generate(args.out, args.files, args.lines, args.seed, args.cuda_share)
    print(f"{args.out}: {files} files, {total} lines, {cuda} with CUDA idioms")


if __name__ == "__main__":
    main()
