"""The two model families of the published runs the estimate is validated against (docs/estimate.md,
"Validation against published runs"), written for this test from the papers' descriptions:

* ``GPT2`` (llm.c's GPT-2): token and learned position embeddings, pre-LayerNorm blocks of causal
  self-attention and a 4d GELU (tanh) MLP, a final LayerNorm, the output layer tied to the token table.
* ``Llama`` (Llama 3.1 8B, torchtitan): RMSNorm, rotary positions, grouped-query attention (SDPA's
  ``enable_gqa``), a SwiGLU feed-forward, an untied output layer.

Only the shapes matter here (the test runs them shape-only); initialisation is torch's default.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPT2Config:
    layers: int = 12
    d: int = 768
    heads: int = 12
    vocab: int = 50257
    seq: int = 1024


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.c_attn(x).chunk(3, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, d))


class GPT2Block(nn.Module):
    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(cfg.d), nn.LayerNorm(cfg.d)
        self.attn = CausalSelfAttention(cfg.d, cfg.heads)
        self.mlp = nn.Sequential(nn.Linear(cfg.d, 4 * cfg.d), nn.GELU(approximate="tanh"), nn.Linear(4 * cfg.d, cfg.d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(cfg.vocab, cfg.d), nn.Embedding(cfg.seq, cfg.d)
        self.blocks = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.d)
        self.head = nn.Linear(cfg.d, cfg.vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


@dataclass
class LlamaConfig:
    layers: int = 32
    d: int = 4096
    heads: int = 32
    kv_heads: int = 8
    ffn: int = 14336
    vocab: int = 128256
    seq: int = 8192
    theta: float = 500000.0


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

    def forward(self, x):
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rotate(x, cos, sin):
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-second, first), dim=-1) * sin


class LlamaBlock(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.heads, self.kv_heads, self.hd = cfg.heads, cfg.kv_heads, cfg.d // cfg.heads
        self.attention_norm, self.ffn_norm = RMSNorm(cfg.d), RMSNorm(cfg.d)
        self.wq = nn.Linear(cfg.d, cfg.d, bias=False)
        self.wkv = nn.Linear(cfg.d, 2 * cfg.kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(cfg.d, cfg.d, bias=False)
        self.w_gate, self.w_up = nn.Linear(cfg.d, cfg.ffn, bias=False), nn.Linear(cfg.d, cfg.ffn, bias=False)
        self.w_down = nn.Linear(cfg.ffn, cfg.d, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k, v = (z.view(b, t, self.kv_heads, self.hd).transpose(1, 2) for z in self.wkv(h).chunk(2, dim=-1))
        cos, sin = cos[:t].to(q.dtype), sin[:t].to(q.dtype)
        y = F.scaled_dot_product_attention(rotate(q, cos, sin), rotate(k, cos, sin), v, is_causal=True,
                                           enable_gqa=True)
        x = x + self.wo(y.transpose(1, 2).reshape(b, t, -1))
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.d)
        self.blocks = nn.ModuleList(LlamaBlock(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.d)
        self.output = nn.Linear(cfg.d, cfg.vocab, bias=False)
        hd = cfg.d // cfg.heads
        inv = 1.0 / cfg.theta ** (torch.arange(0, hd, 2, dtype=torch.float32, device=self.tok.weight.device) / hd)
        angles = torch.outer(torch.arange(cfg.seq, dtype=torch.float32, device=inv.device), inv).repeat(1, 2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, idx, targets):
        x = self.tok(idx)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
