"""One standard training step of a Hugging Face model built from its ``config.json``: the script that
``neuron-port check --model ID_OR_PATH`` writes into a project folder of its own (as ``train.py``, beside the
model's ``config.json`` and ``model_run.json``, the run's choices) and runs through the normal ``check``
path, shape-only.

    python train.py          # reads model_run.json and config.json beside it

The model is built from its config under ``with torch.device("neuron"):`` (every weight a fake: an 8B model
needs no host memory), by the transformers Auto class of its task; with a world size, the process group is
initialised (rank 0 of a fake world) and each of the model's ``_no_split_modules`` blocks (what accelerate's
FSDP wrapping picks; not one holding a parameter tied to a module outside it), then the model, is sharded
with FSDP2's ``fully_shard``. One step:
inputs of the task's shapes, forward with the model's own loss (cross-entropy on the labels; the step
computes it on the model's logits when the model returns none) under
``torch.autocast`` at the precision, backward, ``AdamW.step()``, ``zero_grad``. ``--compile``: each block
(else the model) compiled with ``backend="neuron"``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

AUTO_CLASSES = {"causal-lm": "AutoModelForCausalLM", "seq2seq": "AutoModelForSeq2SeqLM",
                "masked-lm": "AutoModelForMaskedLM", "image-classification": "AutoModelForImageClassification"}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}


def build(folder: Path, run: dict):
    import transformers

    config = transformers.AutoConfig.from_pretrained(folder)
    if hasattr(config, "use_cache"):
        config.use_cache = False  # training: no KV cache (as the HF Trainer and fine-tuning scripts set it)
    auto = getattr(transformers, AUTO_CLASSES[run["task"]])
    with torch.device("neuron"):
        model = auto.from_config(config)
    # a parameter made with a legacy constructor (XLNet's `nn.Parameter(torch.FloatTensor(...))`) ignores the
    # device context and is on the host: moved as a user's `model.to("neuron")` moves it
    return config, model.to("neuron")


def blocks(model) -> list:
    """The model's repeated blocks: modules of the classes it names as not to be split (``_no_split_modules``)."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    return [m for m in model.modules() if type(m).__name__ in names]


def shardable(model) -> list:
    """The blocks FSDP2 can shard on their own: a block holding a parameter that a module outside it holds
    too (a tied embedding: BERT's word embeddings and its MLM decoder) stays in the model's group, as
    FSDP2 requires of shared parameters."""
    holders: dict[int, set] = {}
    for module in model.modules():
        for p in module._parameters.values():
            if p is not None:
                holders.setdefault(id(p), set()).add(id(module))
    picked = []
    for block in blocks(model):
        inside = {id(m) for m in block.modules()}
        if all(holders[id(p)] <= inside for p in block.parameters()):
            picked.append(block)
    return picked


def vocab(config) -> int:
    size = getattr(config, "vocab_size", None)
    if size is None and hasattr(config, "get_text_config"):
        size = getattr(config.get_text_config(), "vocab_size", None)
    if not size:
        sys.exit(f"{config.model_type}: the config names no vocab_size, so token ids cannot be made")
    return int(size)


def inputs(config, run: dict) -> dict:
    batch, seq, device = run["batch"], run["seq"], torch.device("neuron")
    if run["task"] == "image-classification":
        size = getattr(config, "image_size", 224)
        size = size if isinstance(size, (list, tuple)) else (size, size)
        channels = getattr(config, "num_channels", 3)
        return {"pixel_values": torch.randn(batch, channels, *size).to(device),
                "labels": torch.randint(0, config.num_labels, (batch,)).to(device)}
    ids = torch.randint(0, vocab(config), (batch, seq)).to(device)
    if run["task"] == "seq2seq":  # the decoder's inputs given: no shift of the labels (which needs a start token)
        return {"input_ids": ids, "decoder_input_ids": torch.randint(0, vocab(config), (batch, seq)).to(device),
                "labels": ids.clone()}
    return {"input_ids": ids, "labels": ids.clone()}


def task_loss(model, out, labels):
    """The task's cross-entropy when the model returns no loss of its own (PP-LCNet's classifier returns its
    logits as ``last_hidden_state`` and takes no labels): on the output of the labels' shape plus one
    dimension of classes (``logits`` first), as a training script would compute it."""
    found = [getattr(out, "logits", None)]
    found += list(out.values()) if hasattr(out, "values") else list(out) if isinstance(out, (tuple, list)) else [out]
    for t in found:
        if (isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() == labels.dim() + 1
                and tuple(t.shape[:-1]) == tuple(labels.shape)):
            print(f"model_run note: {type(model).__name__} returns no loss: the step's loss is the cross-entropy of "
                  f"its {tuple(t.shape)} output on the labels", flush=True)
            return torch.nn.functional.cross_entropy(t.flatten(0, -2).float(), labels.flatten())
    sys.exit(f"model_run: {type(model).__name__} returns no loss and no output of the labels' shape "
             f"{tuple(labels.shape)} plus classes ({type(out).__name__}): the task's loss cannot be made")


def main() -> None:
    folder = Path(__file__).resolve().parent
    run = json.loads((folder / "model_run.json").read_text())
    if run.get("world_size"):
        import torch.distributed as dist

        dist.init_process_group(backend="neuron")
    started = time.perf_counter()
    config, model = build(folder, run)
    built = time.perf_counter()
    model.train()
    if run.get("compile"):
        for block in blocks(model) or [model]:
            block.compile(backend="neuron")
    if run.get("world_size"):
        from torch.distributed.fsdp import fully_shard

        for block in shardable(model):
            fully_shard(block)
        fully_shard(model)
    sharded = time.perf_counter()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    batch = inputs(config, run)
    dtype = DTYPES[run["precision"]]
    with torch.autocast("neuron", dtype=dtype or torch.float32, enabled=dtype is not None):
        out = model(**batch)
        loss = getattr(out, "loss", None)
        if loss is None:
            loss = task_loss(model, out, batch["labels"])
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    parameters = sum(p.numel() for p in model.parameters())  # a sharded parameter (DTensor): its global size
    print(f"model_run: {config.model_type}, {parameters} parameters; seconds: build {built - started:.1f}, "
          f"shard {sharded - built:.1f}, step {time.perf_counter() - sharded:.1f}", flush=True)


if __name__ == "__main__":
    main()
