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


def pygcn_cora(root: Path) -> None:
    """A synthetic citation graph in Cora's format (data/cora/cora.content: id, binary features, label;
    cora.cites: pairs of ids). pygcn's load_data fixes its splits at nodes 0-139, 200-499 and 500-1499, so
    the graph has 1,500 nodes; 64 features and 3 classes keep it small."""
    rng = np.random.default_rng(0)
    d = root / "data" / "cora"
    d.mkdir(parents=True, exist_ok=True)
    n, feats, classes = 1500, 64, ("Theory", "Neural_Networks", "Rule_Learning")
    ids = rng.permutation(np.arange(1000, 1000 + 4 * n))[:n]
    labels = rng.integers(0, len(classes), size=n)
    with open(d / "cora.content", "w") as f:
        for i in range(n):
            bits = (rng.random(feats) < 0.1 + 0.2 * (np.arange(feats) % 3 == labels[i])).astype(int)
            f.write("\t".join([str(ids[i]), *map(str, bits), classes[labels[i]]]) + "\n")
    with open(d / "cora.cites", "w") as f:
        for _ in range(3 * n):
            a, b = rng.integers(0, n, size=2)
            f.write(f"{ids[a]}\t{ids[b]}\n")


def informer_csv(root: Path) -> None:
    """An hourly multivariate series in the ETT layout (date, features..., OT) for Informer's `custom` data."""
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 300
    t = np.arange(n)
    frame = {"date": pd.date_range("2020-01-01", periods=n, freq="h").strftime("%Y-%m-%d %H:%M:%S")}
    for k in range(3):
        frame[f"f{k}"] = np.sin(2 * np.pi * t / (24 / (k + 1))) + 0.1 * rng.standard_normal(n)
    frame["OT"] = np.cos(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(n)
    d = root / "bench_data"
    d.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(frame).to_csv(d / "bench.csv", index=False)


HANZI = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"


def thucnews(root: Path) -> None:
    """THUCNews-format splits (text<TAB>label, 10 classes as class.txt lists) of synthetic Chinese text: the
    snapshot lacks train.txt and the project's Config reads all three; its vocab.pkl (in the repository) maps
    the characters. Each split holds whole batches of 128 (its iterator divides by the batch count)."""
    rng = random.Random(0)
    d = root / "THUCNews" / "data"
    d.mkdir(parents=True, exist_ok=True)
    for name, n in (("train.txt", 256), ("dev.txt", 128), ("test.txt", 128)):
        with open(d / name, "w", encoding="utf-8") as f:
            for _ in range(n):
                label = rng.randrange(10)
                # each class draws more often from its own slice of the characters, so there is something to learn
                own = HANZI[label * 30:(label + 1) * 30]
                text = "".join(rng.choice(own if rng.random() < 0.5 else HANZI) for _ in range(rng.randint(12, 40)))
                f.write(f"{text}\t{label}\n")
    (root / "THUCNews" / "saved_dict").mkdir(parents=True, exist_ok=True)


WRITERS.update({f.__name__: f for f in (pygcn_cora, informer_csv, thucnews)})
