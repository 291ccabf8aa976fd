"""Twin check: how often shape-only's layout twins (neuron_backend/shape_only/metas.py) predict a CPU kernel's
result strides wrongly. A plain CPU training step (forward and backward, no simulator) runs under a dispatch mode
that asks ``metas.cpu_orders`` for every call it would ask in a shape-only run and compares the predicted dense
strides with the real result's, every dimension's (a size-1 dimension's stride too: ``cat`` reads it).

    bench/zoo/.venv/bin/python bench/zoo/twin_check.py --timm csatv2,poolformerv2_s12     # vision venv, torch 2.14
    .venv/bin/python bench/zoo/twin_check.py --hf bert,t5,gpt2,llama                      # project venv

Prints per model the running count of predictions and of wrong ones, then the most common wrong ones.
"""

from __future__ import annotations

import argparse
import collections

import torch
import torch._prims_common as prims_common
from torch.utils._python_dispatch import TorchDispatchMode

from neuron_backend.shape_only import metas

_HF = {"bert": ("BertConfig", "BertForMaskedLM"), "t5": ("T5Config", "T5ForConditionalGeneration"),
       "gpt2": ("GPT2Config", "GPT2LMHeadModel"), "llama": ("LlamaConfig", "LlamaForCausalLM")}


def dense_strides(shape, order) -> list:
    """Strides of a dense tensor of ``shape`` whose dimensions lie in ``order``, outermost first."""
    strides, step = [0] * len(shape), 1
    for d in reversed(order):
        strides[d] = step
        step *= max(shape[d], 1)
    return strides


class Check(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.predicted = 0
        self.wrong: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        for o, order in zip(outs, metas.cpu_orders(func, args, kwargs, outs) or ()):
            if (isinstance(o, torch.Tensor) and order is not None and o.dim() >= 2
                    and prims_common.is_non_overlapping_and_dense_or_false(o)):
                self.predicted += 1
                if dense_strides(o.shape, order) != list(o.stride()):
                    self.wrong[(str(func), tuple(o.shape), o.stride())] += 1
        return out


def _timm_step(name: str):
    import timm

    model = timm.create_model(name, pretrained=False, num_classes=10)
    x = torch.randn(2, *model.pretrained_cfg.get("input_size", (3, 224, 224)))
    return lambda: model(x).sum().backward()


def _hf_step(name: str):
    import transformers

    config_class, model_class = _HF[name]
    config = getattr(transformers, config_class)(
        vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        d_model=64, d_ff=128, num_layers=2, num_heads=4, n_embd=64, n_layer=2, n_head=4)
    model = getattr(transformers, model_class)(config)
    ids = torch.randint(0, 128, (2, 16))
    extra = {"decoder_input_ids": ids} if name == "t5" else {}
    return lambda: model(input_ids=ids, labels=ids, **extra).loss.backward()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timm", default="", help="comma-separated timm model names")
    ap.add_argument("--hf", default="", help=f"comma-separated, of {sorted(_HF)}: tiny configs")
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    check = Check()
    steps = [(n, _timm_step) for n in a.timm.split(",") if n] + [(n, _hf_step) for n in a.hf.split(",") if n]
    for name, make in steps:
        step = make(name)
        with check:
            step()
        print(f"{name}: {check.predicted} predicted so far, {sum(check.wrong.values())} wrong", flush=True)
    for key, calls in check.wrong.most_common(20):
        print(calls, *key)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
