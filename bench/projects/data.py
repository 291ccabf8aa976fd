"""Synthetic data and tiny configurations for the projects of the scoreboard, written into a project's copy
before it runs (no download at run time). Each writer takes the copy's root and is deterministic (fixed
seeds), so the original run and the rewritten run read the same bytes."""

from __future__ import annotations

import json
import pickle
import random
import struct
from pathlib import Path

import numpy as np

WORDS = ("the quick brown fox jumps over a lazy dog while seven tiny robots train on synthetic text "
         "and every step prints a loss that the bench compares across runs").split()


def _text(n_lines: int, seed: int) -> str:
    rng = random.Random(seed)
    return "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 14))) for _ in range(n_lines)) + "\n"


def tokens_bin(path: Path, count: int, vocab: int, seed: int, header: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = np.random.default_rng(seed).integers(0, vocab, size=count, dtype=np.uint16)
    path.write_bytes(data.tobytes())


def nanogpt(root: Path) -> None:
    d = root / "data" / "bench"
    tokens_bin(d / "train.bin", 20000, 65, 0)
    tokens_bin(d / "val.bin", 4000, 65, 1)
    (d / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 65}))


def llama2c(root: Path) -> None:
    d = root / "data" / "tok64"
    for i in range(3):
        tokens_bin(d / f"data{i:02d}.bin", 20000, 64, i)


def chargpt(root: Path) -> None:
    text = _text(300, 0).replace("fox", "O God, O God!")
    (root / "input.txt").write_text(text)


def wordlm(root: Path) -> None:
    d = root / "data" / "bench"
    d.mkdir(parents=True, exist_ok=True)
    for name, n, seed in (("train.txt", 120, 0), ("valid.txt", 30, 1), ("test.txt", 30, 2)):
        (d / name).write_text(_text(n, seed))


def image_folder(root: Path, rel: str, classes: int = 2, per_class: int = 4, size: int = 40) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in range(classes):
        d = root / rel / f"class{c}"
        d.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            Image.fromarray(rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)).save(d / f"img{i}.png")


def dino(root: Path) -> None:
    image_folder(root, "bench_data/train", classes=2, per_class=4, size=64)
    # main_dino.py lists torch.hub.list("facebookresearch/xcit:main") when it builds its argument parser:
    # a cached hub checkout with no entry points (TORCH_HOME={root}/bench_torch_home) answers it offline
    hub = root / "bench_torch_home" / "hub" / "facebookresearch_xcit_main"
    hub.mkdir(parents=True, exist_ok=True)
    (hub / "hubconf.py").write_text("dependencies = []\n")


def diffusers_unconditional(root: Path) -> None:
    base = root
    image_folder(base, "bench_data/images", classes=1, per_class=8, size=16)
    cfg = base / "bench_unet"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "config.json").write_text(json.dumps({
        "_class_name": "UNet2DModel", "sample_size": 16, "in_channels": 3, "out_channels": 3,
        "layers_per_block": 1, "block_out_channels": [16, 32],
        "down_block_types": ["DownBlock2D", "AttnDownBlock2D"],
        "up_block_types": ["AttnUpBlock2D", "UpBlock2D"], "norm_num_groups": 8,
        "attention_head_dim": 8,
    }, indent=1))


def nothing(root: Path) -> None:
    pass


WRITERS = {f.__name__: f for f in (nanogpt, llama2c, chargpt, wordlm, dino, diffusers_unconditional, nothing)}


def cyclegan(root: Path) -> None:
    for split in ("train", "test"):
        for side in ("A", "B"):
            image_folder(root, f"data/bench/{split}/{side}", classes=1, per_class=3, size=36)
            folder = root / f"data/bench/{split}/{side}"
            for png in (folder / "class0").iterdir():
                png.rename(folder / png.name)
            (folder / "class0").rmdir()


def tiny_causal_lm(folder: Path) -> None:
    """A tiny Llama-architecture model and a word-level tokenizer, saved like a hub checkpoint."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    vocab = {w: i for i, w in enumerate(specials + sorted(set(WORDS)))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(config).save_pretrained(folder)


def trl_sft(root: Path) -> None:
    tiny_causal_lm(root / "bench_model")
    d = root / "bench_sft"
    d.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    with open(d / "train.jsonl", "w") as f:
        for _ in range(32):
            f.write(json.dumps({"text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16)))}) + "\n")


WRITERS.update({f.__name__: f for f in (cyclegan, trl_sft)})


def timm_train(root: Path) -> None:
    image_folder(root, "bench_data/train", classes=2, per_class=4, size=40)
    image_folder(root, "bench_data/validation", classes=2, per_class=2, size=40)


WRITERS["timm_train"] = timm_train
