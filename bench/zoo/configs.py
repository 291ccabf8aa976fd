"""Tiny random configs for every architecture of a transformers auto-mapping, built locally.

Nothing is downloaded: a config starts from ``AutoConfig.for_model(model_type)`` (the class defaults,
i.e. the full-size model) and every size-like attribute that can be recognised by name is shrunk to
one consistent tiny shape (``TINY``): hidden 64, 4 heads of 16, 2 key/value heads, 2 layers, FFN
128, vocab 512, 256 positions, 4 experts (2 per token), image 32x32 with 4x4 patches, lists of
per-stage sizes halved down to 16.. and per-stage depths of 1. Sub-configs (``text_config``,
``vision_config``, ``encoder``/``decoder``, ...) are shrunk the same way, recursively.

The shrunk values are passed to the config class's constructor (not set afterwards), so attributes a
config derives from others (Swin's ``hidden_size`` from ``embed_dim`` and ``depths``, DeepSeek's
``qk_head_dim``) are recomputed consistently. Attributes known to be derived are not overridden.

``build_config(model_type)`` returns ``(config, overrides)`` or raises ``ConfigError`` with the reason;
``ATTEMPTS`` are tried in order by the worker when a config fails to build a model (e.g. a model that
needs hidden % 128 == 0 gets the second, wider shape).
"""

from __future__ import annotations

from dataclasses import dataclass


class ConfigError(Exception):
    """A tiny config could not be built for this architecture (reason in the message)."""


@dataclass(frozen=True)
class Tiny:
    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    layers: int = 2
    ffn: int = 128
    vocab: int = 512
    positions: int = 256
    experts: int = 4
    experts_per_tok: int = 2
    lora_rank: int = 32
    rope_head_dim: int = 8
    state: int = 16
    image: int = 32
    patch: int = 4
    stage_width: int = 16
    window: int = 2
    # also set role attributes the class defaults leave at None (head_dim, kv heads, experts, top-k):
    # the hub configs always fill them, and some modeling code cannot derive them
    fill_none: bool = False


TINY = Tiny()
# A second, wider shape for architectures whose code needs larger multiples (e.g. hidden % 128,
# head_dim 32/64, or 4 layers for a hybrid layer pattern).
WIDER = Tiny(hidden=128, heads=4, kv_heads=2, head_dim=32, layers=4, ffn=256, vocab=1024, positions=512,
             experts=8, experts_per_tok=2, lora_rank=64, rope_head_dim=16, image=64, patch=8,
             stage_width=32, window=2, fill_none=True)
ATTEMPTS = (("tiny", TINY), ("tiny-filled", Tiny(fill_none=True)), ("wider", WIDER))

# Attribute names by role. Matching is on the exact name (case-sensitive, as in the config classes).
HIDDEN = {"hidden_size", "d_model", "n_embd", "dim", "hidden_dim", "model_dim", "d_embed", "emb_dim",
          "word_embed_proj_dim", "embedding_size", "attention_hidden_size", "hidden_size_global",
          "true_hidden_size", "intra_bottleneck_size", "embedding_dim", "input_embedding_size",
          "output_embedding_size", "lru_width", "d_latents", "projection_dim", "pooler_hidden_size",
          "cross_attention_hidden_size", "encoder_hidden_size", "decoder_hidden_size", "hidden_size_per_layer_input",
          "audio_hidden_size", "backbone_hidden_size", "out_hidden_size", "pooler_output_size", "d_model_base"}
HEADS = {"num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
         "decoder_attention_heads", "attention_heads", "num_self_attention_heads", "num_cross_attention_heads",
         "swa_num_attention_heads", "linear_num_value_heads", "linear_num_heads", "num_encoder_attention_heads",
         "num_decoder_attention_heads", "index_n_heads", "mamba_n_heads", "mamba_num_heads", "n_mamba_heads"}
KV_HEADS = {"num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num", "num_query_groups",
            "swa_num_key_value_heads", "linear_num_key_heads"}
HEAD_DIM = {"head_dim", "d_kv", "d_head", "dim_head", "attention_head_size", "kv_channels", "swa_head_dim",
            "linear_key_head_dim", "linear_value_head_dim", "index_head_dim",
            "v_head_dim", "mamba_d_head", "mamba_head_dim", "mamba_headdim", "linear_head_dim"}
ROPE_HEAD_DIM = {"qk_rope_head_dim", "qk_nope_head_dim", "rotary_dim"}
LAYERS = {"num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers", "decoder_layers",
          "num_decoder_layers", "num_encoder_layers", "depth", "num_global_layers", "n_recurrent_layers"}
FFN = {"intermediate_size", "ffn_dim", "n_inner", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim",
       "moe_intermediate_size", "shared_expert_intermediate_size", "shared_experts_intermediate_size",
       "moe_shared_expert_intermediate_size", "shared_intermediate_size", "dense_intermediate_size",
       "intermediate_size_mlp", "ffn_hidden_size", "feed_forward_size", "dim_ff", "dff", "mlp_dim",
       "expert_ffn_hidden_size", "dim_feedforward", "d_inner", "router_hidden_size"}
EXPERTS = {"num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"}
EXPERTS_PER_TOK = {"num_experts_per_tok", "num_experts_per_token", "moe_topk", "moe_k", "top_k"}
ONE = {"n_group", "num_expert_group", "topk_group", "n_shared_experts", "first_k_dense_replace", "n_groups",
       "num_nextn_predict_layers"}
POSITIONS = {"max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "max_source_positions",
             "max_target_positions", "context_length", "max_encoder_position_embeddings",
             "max_decoder_position_embeddings", "max_sequence_length", "max_length", "model_max_length",
             "original_max_position_embeddings", "max_2d_position_embeddings", "num_position_embeddings"}
LORA = {"kv_lora_rank", "q_lora_rank", "o_lora_rank"}
STATE = {"state_size", "ssm_state_size", "mamba_d_state"}
IMAGE = {"image_size", "crop_size"}
PATCH = {"patch_size"}
STAGE_WIDTHS = {"hidden_sizes", "embed_dims", "neck_hidden_sizes", "stem_channels", "stage_in_channels",
                "stage_mid_channels", "stage_out_channels", "num_channels_list"}
STAGE_DEPTHS = {"depths", "stage_num_blocks", "block_repeats", "num_block_repeats", "stage_numb_of_layers"}
STAGE_HEADS = {"num_heads", "num_attention_heads"}  # when a list (per stage)
WINDOW = {"window_size"}
# Layer-index lists: keep the indices below the new layer count (at least one).
LAYER_INDEX_LISTS = {"moe_layers", "full_attn_idxs", "global_attn_indexes", "cross_attention_layers",
                     "hybrid_layer_ids", "attn_layer_indices", "mlp_only_layers", "intermediate_layers_indices",
                     "out_indices"}
# Per-layer lists (length = number of layers): cut to the new layer count, keeping every kind present.
PER_LAYER_LISTS = {"layer_types", "no_rope_layers", "block_types", "layers_block_type", "attn_type_list",
                   "num_attention_heads_per_layer", "hybrid_override_pattern", "layers_type"}
# Attributes some configs derive from others: never overridden (the constructor recomputes them).
DERIVED = {"qk_head_dim"}


# The few architectures whose defaults need more than the name rules (value per Tiny shape). Each entry
# says why; everything else is generic.
TYPE_OVERRIDES = {
    # training needs axial_pos_shape to multiply to the sequence length, chunks dividing it
    "reformer": lambda t: {"axial_pos_shape": [2, 4], "axial_pos_embds_dim": [t.hidden // 2, t.hidden // 2],
                           "local_attn_chunk_length": 4, "lsh_attn_chunk_length": 4, "max_position_embeddings": 8,
                           "num_buckets": 2, "attn_layers": ["local", "lsh"]},
    # the MLM decoder emits max_position_embeddings positions: it must equal the input length
    "perceiver": lambda t: {"max_position_embeddings": 8},
    # the default leaves layer_types to the hub config
    "lfm2_moe": lambda t: {"layer_types": (["conv", "full_attention"] * t.layers)[: t.layers]},
    # the stem always downsamples by 16 (four stride-2 convs): keep patch 16, a 64-pixel image
    "levit": lambda t: {"image_size": 64, "patch_size": 16},
    # the head's BatchNorm is built with hidden_dim while the last conv rounds its own width
    "efficientnet": lambda t: {"hidden_dim": 1280},
    # X-MOD needs a default language adapter
    "xmod": lambda t: {"default_language": "en_XX"},
}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _keep_kinds(seq: list, n: int) -> list:
    """The first n items of a per-layer list, but with every distinct kind of the original kept."""
    out = list(seq[:n])
    missing = [k for k in dict.fromkeys(seq) if k not in out]
    for i, kind in enumerate(missing):
        pos = n - 1 - i
        if pos < 0:
            break
        out[pos] = kind
    return out


def _shrink_stage_widths(v: list, t: Tiny) -> list:
    return [t.stage_width * (2 ** i) for i in range(len(v))]


def shrink_dict(d: dict, t: Tiny) -> dict:
    """Overrides for one config's attribute dict (nested config dicts are handled by the caller)."""
    o: dict = {}
    hier = any(isinstance(d.get(k), list) for k in STAGE_DEPTHS | {"hidden_sizes"})
    related = sum(1 for k in STAGE_WIDTHS if isinstance(d.get(k), list)) > 1
    orig_heads = next((d[k] for k in ("num_attention_heads", "n_head", "n_heads", "num_heads") if _is_int(d.get(k))), None)
    orig_layers = next((d[k] for k in ("num_hidden_layers", "n_layer", "num_layers", "n_layers") if _is_int(d.get(k))), None)
    for k, v in d.items():
        if k in DERIVED or isinstance(v, dict):
            continue
        if _is_int(v):
            if k == "embed_dim" and hier and v > t.stage_width:
                o[k] = t.stage_width  # Swin-style: the first stage's width, doubled per stage
            elif k in HIDDEN | {"embed_dim"} and v > t.hidden and not (hier and k in {"hidden_size", "num_features"}):
                o[k] = t.hidden
            elif k in HEADS and v > t.heads:
                o[k] = t.heads
            elif k in KV_HEADS:
                if orig_heads is not None and v == orig_heads:
                    o[k] = t.heads
                elif v > t.kv_heads:
                    o[k] = t.kv_heads
            elif k in HEAD_DIM and v > t.head_dim:
                o[k] = t.head_dim
            elif k in ROPE_HEAD_DIM and v > t.rope_head_dim:
                # MLA (DeepSeek-style): head_dim is the rotary part, so both parts get the head size
                o[k] = t.rope_head_dim if k == "rotary_dim" else t.head_dim
            elif k in LAYERS and v > t.layers and not (hier and k == "num_layers"):
                o[k] = t.layers
            elif k in FFN and v > t.ffn:
                o[k] = t.ffn
            elif k in EXPERTS and v > t.experts:
                o[k] = t.experts
            elif k in EXPERTS_PER_TOK and v > t.experts_per_tok:
                o[k] = t.experts_per_tok
            elif k in ONE and v > 1:
                o[k] = 1
            elif k in POSITIONS and v > t.positions:
                o[k] = t.positions
            elif k in LORA and v > t.lora_rank:
                o[k] = t.lora_rank
            elif k in STATE and v > t.state:
                o[k] = t.state
            elif k in IMAGE and v > t.image:
                o[k] = t.image
            elif k in PATCH and v > t.patch:
                o[k] = t.patch
            elif k in WINDOW and v > t.window:
                o[k] = t.window
            elif (k == "vocab_size" or k.endswith("_vocab_size") or k == "vocab_size_per_layer_input") and v > t.vocab:
                o[k] = t.vocab
            elif k in {"attn_layer_period", "expert_layer_period"} and v > t.layers:
                o[k] = t.layers
            elif k in {"attn_layer_offset", "expert_layer_offset"} and v >= t.layers:
                o[k] = t.layers - 1
            elif k in {"max_window_layers", "num_kv_shared_layers", "moe_layer_end_index"} and v > t.layers:
                o[k] = t.layers if k != "num_kv_shared_layers" else 0
            elif k in {"global_attn_every_n_layers", "no_rope_layer_interval", "sliding_window_pattern",
                       "_sliding_window_pattern", "layer_group_size", "moe_layer_freq"} and v > t.layers:
                o[k] = t.layers
            elif k in {"num_groups"} and v > 4:
                o[k] = 4
            elif k in {"time_step_rank", "mamba_dt_rank"} and v > 8:
                o[k] = 8
            elif k in {"num_mel_bins"} and v > 16:
                o[k] = 16
        elif isinstance(v, list) and v and all(_is_int(x) for x in v):
            if k in STAGE_WIDTHS and related:
                # several channel lists that refer to each other (stage_in[i+1] == stage_out[i]):
                # one monotone map for all keeps those equalities
                # (multiples of 8, so a width still divides by the head count)
                o[k] = [x if x <= 16 else max(16, (x // 8 + 7) // 8 * 8) for x in v]
            elif k in STAGE_WIDTHS:
                o[k] = _shrink_stage_widths(v, t)
            elif k in STAGE_DEPTHS:
                o[k] = [1] * len(v)
            elif k in STAGE_HEADS:
                o[k] = [min(x, 2 ** i) for i, x in enumerate(v)]
            elif k in LAYER_INDEX_LISTS and orig_layers:
                kept = [x for x in v if x < t.layers]
                o[k] = kept or [t.layers - 1]
            elif k in PER_LAYER_LISTS and orig_layers and len(v) == orig_layers:
                o[k] = _keep_kinds(v, t.layers)
            elif k in IMAGE and len(v) == 2:
                o[k] = [min(x, t.image) for x in v]
            elif k in PATCH and len(v) == 2:
                o[k] = [min(x, t.patch) for x in v]
        elif isinstance(v, list) and v and k in PER_LAYER_LISTS and orig_layers and len(v) == orig_layers:
            o[k] = _keep_kinds(v, t.layers)
        elif isinstance(v, str) and k in PER_LAYER_LISTS and orig_layers and len(v) == orig_layers:
            o[k] = "".join(_keep_kinds(list(v), t.layers))
    if t.fill_none:
        _fill_none(d, o, t)
    _consistency(d, o, t)
    _fix_token_ids(d, o, t)
    # DeepSeek-style MLA: qk_head_dim follows its parts when the class stores it
    if "qk_head_dim" in d and ("qk_rope_head_dim" in o or "qk_nope_head_dim" in o):
        o["qk_head_dim"] = o.get("qk_rope_head_dim", d.get("qk_rope_head_dim") or 0) + o.get(
            "qk_nope_head_dim", d.get("qk_nope_head_dim") or 0)
    return o


def _fill_none(d: dict, o: dict, t: Tiny) -> None:
    roles = [(HEAD_DIM & {"head_dim"}, t.head_dim), (KV_HEADS, t.heads), (EXPERTS, t.experts),
             (EXPERTS_PER_TOK - {"top_k"}, t.experts_per_tok), ({"vocab_size"}, t.vocab)]
    for keys, value in roles:
        for k in keys:
            if k in d and d[k] is None and k not in o:
                o[k] = value


def _get(d: dict, o: dict, k: str):
    return o.get(k, d.get(k))


def _consistency(d: dict, o: dict, t: Tiny) -> None:
    """Relations between attributes that a per-name rule cannot see."""
    hidden = _get(d, o, "hidden_size")
    # Mamba(2) heads: expand * hidden == heads * head_dim
    for heads, hdim, expand in (("mamba_n_heads", "mamba_d_head", "mamba_expand"), ("num_heads", "head_dim", "expand"),
                                ("mamba_num_heads", "mamba_head_dim", "mamba_expand"),
                                ("n_mamba_heads", "mamba_headdim", "mamba_expand")):
        e, hd = _get(d, o, expand), _get(d, o, hdim)
        if _is_int(hidden) and isinstance(e, (int, float)) and _is_int(hd) and _is_int(d.get(heads)) and hd:
            o[heads] = max(1, int(e * hidden) // hd)
    # hybrids whose layer groups must add up to the layer count
    parts = [k for k in ("n_input_layers", "n_recurrent_layers", "n_output_layers") if _is_int(d.get(k))]
    if len(parts) == 3 and "num_hidden_layers" in d:
        for k in parts:
            o[k] = 1
        o["num_hidden_layers"] = 3
    # GPT-Neo style attention pattern [[kinds, repeat]]
    at = d.get("attention_types")
    if isinstance(at, list) and at and isinstance(at[0], list) and len(at[0]) == 2 and isinstance(at[0][0], list):
        kinds = at[0][0]
        o["attention_types"] = [[kinds, max(1, t.layers // len(kinds))]]
    # EfficientNet-style compound scaling back to the base width / depth
    for k in ("width_coefficient", "depth_coefficient"):
        if isinstance(d.get(k), (int, float)) and d[k] > 1:
            o[k] = 1.0


def _fix_token_ids(d: dict, o: dict, t: Tiny) -> None:
    """Special token ids must be inside the shrunk vocabulary: ids >= vocab move to the top of it."""
    vocab = o.get("vocab_size", d.get("vocab_size"))
    if not _is_int(vocab):
        return
    top = vocab - 1
    seen: dict[int, int] = {}

    def remap(x):
        nonlocal top
        if not _is_int(x) or x < vocab:
            return x
        if x not in seen:
            seen[x] = top
            top -= 1
        return seen[x]

    for k, v in d.items():
        if not (k.endswith("_token_id") or k.endswith("_token_index") or k.endswith("_token_ids")
                or k in {"decoder_start_token_id", "mask_index", "unk_index"}):
            continue
        if _is_int(v) and v >= vocab:
            o[k] = remap(v)
        elif isinstance(v, list) and any(_is_int(x) and x >= vocab for x in v):
            o[k] = [remap(x) for x in v]


def _sub_config_names(config) -> list[str]:
    names = list(getattr(config, "sub_configs", {}) or {})
    for k in ("encoder", "decoder", "text_config", "vision_config"):
        if k not in names and hasattr(config, k) and hasattr(getattr(config, k), "to_dict"):
            names.append(k)
    return [n for n in names if getattr(config, n, None) is not None and hasattr(getattr(config, n), "to_dict")]


def shrunk_config(base, t: Tiny, extra: dict | None = None):
    """(config, overrides): ``base`` (a config with the class defaults) with every recognised size
    attribute shrunk, sub-configs included."""
    overrides: dict = {}
    kwargs = shrink_dict(base.to_dict(), t)
    if extra:
        kwargs.update(extra)
    overrides.update(kwargs)
    for name in _sub_config_names(base):
        sub = getattr(base, name)
        sub_cfg, sub_over = shrunk_config(sub, t)
        kwargs[name] = sub_cfg.to_dict()
        if sub_over:
            overrides[name] = sub_over
    cls = type(base)
    try:
        cfg = cls(**kwargs)
    except Exception as e:  # the class refuses the combination
        raise ConfigError(f"{cls.__name__}({_short(overrides)}): {type(e).__name__}: {_first_line(e)}") from e
    return cfg, overrides


def build_config(model_type: str, t: Tiny = TINY):
    """The tiny config of ``model_type`` and the overrides applied (for the report)."""
    from transformers import AutoConfig

    try:
        base = AutoConfig.for_model(model_type)
    except Exception as e:
        raise ConfigError(f"AutoConfig.for_model({model_type!r}) failed: {type(e).__name__}: {_first_line(e)}") from e
    extra = TYPE_OVERRIDES.get(model_type)
    cfg, overrides = shrunk_config(base, t, extra=extra(t) if extra else None)
    # seq2seq defaults often leave the decoder start token to the hub config: use pad (or 0)
    if getattr(cfg, "is_encoder_decoder", False) and getattr(cfg, "decoder_start_token_id", None) is None:
        pad = getattr(cfg, "pad_token_id", None)
        cfg.decoder_start_token_id = pad if isinstance(pad, int) else 0
        overrides["decoder_start_token_id"] = cfg.decoder_start_token_id
    if getattr(cfg, "is_encoder_decoder", False) and getattr(cfg, "pad_token_id", "absent") is None:
        cfg.pad_token_id = 0
        overrides["pad_token_id"] = 0
    # float32 weights
    for c in [cfg] + [getattr(cfg, n) for n in _sub_config_names(cfg)]:
        for k in ("dtype", "torch_dtype"):
            if getattr(c, k, None) not in (None, "float32"):
                try:
                    setattr(c, k, "float32")
                except Exception:
                    pass
    return cfg, overrides


def _first_line(e: BaseException) -> str:
    s = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    # validation errors put the reason on the second line
    return (" ".join(s[:2]) if s and s[0].endswith(":") else (s[0] if s else ""))[:400]


def _short(d: dict) -> str:
    s = ", ".join(f"{k}={v!r}" for k, v in list(d.items())[:6])
    return s + (", ..." if len(d) > 6 else "")
