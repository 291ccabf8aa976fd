"""The vision sweep's diffusers source: UNets, autoencoders and a diffusion transformer with tiny configs,
random weights (nothing is downloaded: no ``from_pretrained``), one denoising or reconstruction step.

Added for issue 39: a diffusers UNet's blocks hand GroupNorm -> SiLU -> Conv2d chains channels_last
views (after a spatial attention block's ``transpose(-1, -2).reshape(B, C, H, W)``), which the compiled
path got wrong. Every config is small (block widths 32 and 64, GroupNorm of 8 groups, one layer per
block, 16 x 16 samples or 8 x 8 latents) and keeps the architecture's parts: attention blocks in the
UNets, the encoder, the Gaussian posterior or the vector quantiser and the decoder of the autoencoders,
adaLN-Zero blocks of DiT.

Loss per model: the denoiser's output against a fixed target (MSE: the noise in a diffusion step),
the autoencoder's reconstruction against its input (MSE; the VQ model's commitment loss added), with
the deterministic paths (``sample_posterior=False``): the device draws random numbers from its own
generator, so a sampled posterior could not equal the CPU run.

    bench/zoo/.venv/bin/python bench/zoo/vision_sweep.py --sources diffusers --compile diffusers --out DIR
    .venv/bin/python bench/zoo/vision_sweep.py --sources diffusers --compile diffusers --out DIR   # torch 2.13
"""

from __future__ import annotations

import torch

BATCH = 2
BLOCKS = {"block_out_channels": (32, 64), "layers_per_block": 1, "norm_num_groups": 8}
AE = dict(BLOCKS, in_channels=3, out_channels=3, latent_channels=4, sample_size=16,
          down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
          up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"))

# name -> (diffusers class, constructor arguments, input: "image" 3 x 16 x 16 or "latent" 4 x 8 x 8)
MODELS: dict[str, tuple[str, dict, str]] = {
    "UNet2DModel": ("UNet2DModel", dict(
        BLOCKS, sample_size=16, in_channels=3, out_channels=3, attention_head_dim=8,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D")), "image"),
    "UNet2DConditionModel": ("UNet2DConditionModel", dict(
        BLOCKS, sample_size=8, in_channels=4, out_channels=4, cross_attention_dim=32, attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D")), "latent"),
    "AutoencoderKL": ("AutoencoderKL", dict(AE), "image"),
    "VQModel": ("VQModel", dict(AE, num_vq_embeddings=16, vq_embed_dim=4), "image"),
    "DiTTransformer2DModel": ("DiTTransformer2DModel", dict(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4, num_layers=2,
        sample_size=8, patch_size=2, num_embeds_ada_norm=10), "latent"),
}


def builders() -> list[dict]:
    return [{"source": "diffusers", "task": "diffusion", "name": name, "family": f"diffusers.{name}"}
            for name in MODELS]


def build(spec: dict, meta: bool = False) -> torch.nn.Module:
    import diffusers

    cls_name, kwargs, _ = MODELS[spec["name"]]
    cls = getattr(diffusers, cls_name)
    if meta:
        with torch.device("meta"):
            return cls(**kwargs)
    torch.manual_seed(0)
    return cls(**kwargs).float()


def make_inputs(spec: dict, seed: int = 1) -> dict:
    g = torch.Generator().manual_seed(seed)
    _, kwargs, kind = MODELS[spec["name"]]
    shape = (BATCH, 3, 16, 16) if kind == "image" else (BATCH, 4, 8, 8)
    inputs = {"x": torch.randn(*shape, generator=g), "target": torch.randn(*shape, generator=g),
              "t": torch.tensor([3, 7])}
    if "cross_attention_dim" in kwargs:
        inputs["cond"] = torch.randn(BATCH, 5, kwargs["cross_attention_dim"], generator=g)
    if "num_embeds_ada_norm" in kwargs:
        inputs["labels"] = torch.tensor([1, 4])
    return inputs


def forward(spec: dict, model, inputs: dict, train: bool):
    """One step's forward; returns (loss, the output tensors to compare)."""
    F = torch.nn.functional
    name, x = spec["name"], inputs["x"]
    if name == "UNet2DModel":
        out = model(x, inputs["t"]).sample
    elif name == "UNet2DConditionModel":
        out = model(x, inputs["t"], encoder_hidden_states=inputs["cond"]).sample
    elif name == "DiTTransformer2DModel":
        out = model(x, timestep=inputs["t"], class_labels=inputs["labels"]).sample
    elif name == "AutoencoderKL":
        out = model(x, sample_posterior=False).sample
        return F.mse_loss(out, x), [out]
    else:  # VQModel: reconstruction and the quantiser's commitment loss
        res = model(x)
        out, commit = res.sample, res.commit_loss
        loss = F.mse_loss(out, x) + (commit.mean() if isinstance(commit, torch.Tensor) else 0.0)
        return loss, [out]
    return F.mse_loss(out, inputs["target"]), [out]
