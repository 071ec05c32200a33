"""Multi-head latent attention (MLA, DeepSeek-V2 §2.1; DeepSeek-V3, Kimi K2), with the module
names of transformers' ``DeepseekV3Attention``. Shapes: B batch, T new tokens, S keys, H heads,
C = d_model, R = kv_lora_rank (the latent), Dn + Dr = D (a q/k head: the part without RoPE and
the rotated part), Dv a value head.

    q   = q_b(norm(q_a(x)))  (or q_proj(x))          (B, H, T, Dn + Dr)
    c   = norm(kv_a(x)[:R])  the latent               (B, T, R)     ← cached
    k_r = rope(kv_a(x)[R:])  one RoPE key, all heads  (B, 1, T, Dr) ← cached
    k_h = [c·W_UK,h, k_r],  v_h = c·W_UV,h            (kv_b_proj's rows: W_UK, W_UV)

Without a cache (training, a plain forward) every head's K and V are rebuilt and attended with
SDPA, as transformers does. With a cache the latent and the RoPE key are what is kept, and the
new tokens attend in the absorbed form (§2.1.2): q_h·k_hᵀ = (q_h,nope·W_UK,h)·cᵀ + q_h,rope·k_rᵀ
and Σ p·v_h = (Σ p·c)·W_UV,hᵀ, so the heads attend over [c, k_r] as MQA's heads attend one KV
head, and no per-head K or V is ever made.

DeepSeek Sparse Attention (DeepSeek-V3.2, ``cfg.has_indexer``): the block's lightning indexer
(``indexer.py``) picks each query's index_topk keys, and the attention, in either form, is
masked to them; the cache keeps the indexer's key of each token beside the latent.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ..config import ModelConfig
from .attention import causal_attention, sharpen
from .indexer import Indexer, sparse_attention
from .kv_cache import KVCache
from .norms import RMSNorm
from .positions import apply_rope, apply_rope_interleaved, scores_mscale

# transformers builds q_a_layernorm and kv_a_layernorm with its RMSNorm's default epsilon, not
# rms_norm_eps (DeepseekV3Attention)
LATENT_NORM_EPS = 1e-6


class LatentAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__()
        self.cfg, self.layer_idx = cfg, layer_idx
        self.n_heads = cfg.n_heads  # (the tensor-parallel code overwrites per-rank head counts)
        self.window = None  # MLA is modelled without a sliding window (every key attended)
        C, H, D, Dv = cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.v_head_dim
        R, Dr, Rq = cfg.kv_lora_rank, cfg.qk_rope_head_dim, cfg.q_lora_rank
        if Rq:  # q through a rank-Rq bottleneck
            self.q_a_proj = nn.Linear(C, Rq, bias=False)
            self.q_a_layernorm = RMSNorm(Rq, LATENT_NORM_EPS)
            self.q_b_proj = nn.Linear(Rq, H * D, bias=False)
        else:
            self.q_proj = nn.Linear(C, H * D, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(C, R + Dr, bias=False)  # the latent and the RoPE key
        self.kv_a_layernorm = RMSNorm(R, LATENT_NORM_EPS)
        self.kv_b_proj = nn.Linear(R, H * (D - Dr + Dv), bias=False)  # every head's k_nope, v
        self.o_proj = nn.Linear(H * Dv, C, bias=False)
        self.indexer = Indexer(cfg) if cfg.has_indexer else None
        self.rotate = apply_rope_interleaved if cfg.rope_interleave else apply_rope
        # a q/k head's width, in both forms; × YaRN's mscale² (DeepSeek-V3's mscale_all_dim)
        self.scale = D**-0.5 * scores_mscale(cfg.rope_scaling)

    def q_resid(self, x: torch.Tensor) -> torch.Tensor:
        """q's normalised bottleneck (B, T, Rq), which q_b_proj (and DSA's indexer) read."""
        return self.q_a_layernorm(self.q_a_proj(x))

    def query(self, x: torch.Tensor) -> torch.Tensor:
        """q (B, H, T, D) of the new tokens x (B, T, C), not yet rotated."""
        B, T, _ = x.shape
        q = self.q_b_proj(self.q_resid(x)) if self.cfg.q_lora_rank else self.q_proj(x)
        return q.view(B, T, self.n_heads, self.cfg.head_dim).transpose(1, 2)

    def latent(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The normalised latent c (B, 1, T, R) and the RoPE key (B, 1, T, Dr), not yet rotated:
        what a cache keeps (one "head" each)."""
        B, T, _ = x.shape
        c, k_rope = self.kv_a_proj_with_mqa(x).split([self.cfg.kv_lora_rank, self.cfg.qk_rope_head_dim], -1)
        return self.kv_a_layernorm(c).view(B, 1, T, -1), k_rope.view(B, 1, T, -1)

    def up_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """kv_b_proj's rows as W_UK (H, Dn, R) and W_UV (H, Dv, R)."""
        cfg = self.cfg
        w = self.kv_b_proj.weight.view(self.n_heads, cfg.qk_nope_head_dim + cfg.v_head_dim, cfg.kv_lora_rank)
        return w.split([cfg.qk_nope_head_dim, cfg.v_head_dim], dim=1)

    def _parts(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None, start: int = 0):
        """q's two parts (B, H, T, Dn) and (B, H, T, Dr), the latent c and the RoPE key, rotated;
        q × its temperature at positions start.. (Mistral 4)."""
        cfg = self.cfg
        assert rope is not None, "MLA rotates its decoupled key: pos_encoding='rope'"
        q_nope, q_rope = self.query(x).split([cfg.qk_nope_head_dim, cfg.qk_rope_head_dim], -1)
        c, k_rope = self.latent(x)
        q_rope = self.rotate(q_rope, *rope)
        if cfg.temperature_layer_flags[self.layer_idx]:
            q_nope, q_rope = sharpen(q_nope, cfg, start), sharpen(q_rope, cfg, start)
        return q_nope, q_rope, c, self.rotate(k_rope, *rope)

    def project(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None, start: int = 0):
        """Every head's q, k (B, H, T, D) and v (B, H, T, Dv) of the new tokens, K and V rebuilt
        from the latent (the expanded form's inputs; the reference path reads them)."""
        return self._expand(*self._parts(x, rope, start))

    def forward(self, x, rope: tuple[torch.Tensor, torch.Tensor] | None, cache: KVCache | None):
        B, T, _ = x.shape
        start = cache.length if cache is not None else 0
        q_nope, q_rope, c, k_rope = self._parts(x, rope, start)
        keep = None  # DSA: the keys the indexer chose (B, 1, T, S)
        if self.indexer is not None:
            assert rope is not None
            keys = self.indexer.key(x, rope)  # (B, T, Di)
            if cache is not None:
                keys = cache.update_index_keys(self.layer_idx, keys)  # (B, S, Di)
            keep = self.indexer.select(x, self.q_resid(x), rope, keys, start)
        if cache is None:
            q, k, v = self._expand(q_nope, q_rope, c, k_rope)
            out = (
                causal_attention(q, k, v, 1, scale=self.scale)
                if keep is None
                else sparse_attention(q, k, v, keep, self.scale)
            )
        else:
            c, k_rope = cache.update(self.layer_idx, c, k_rope)  # (B, 1, S, R), (B, 1, S, Dr)
            out = self._absorbed(q_nope, q_rope, c, k_rope, keep)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, self.n_heads * self.cfg.v_head_dim))

    def _expand(self, q_nope, q_rope, c, k_rope) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every head's K and V rebuilt from the latent: q, k (B, H, T, D), v (B, H, T, Dv)."""
        B, _, T, _ = c.shape
        H, Dn, Dv = self.n_heads, self.cfg.qk_nope_head_dim, self.cfg.v_head_dim
        kv = self.kv_b_proj(c.squeeze(1)).view(B, T, H, Dn + Dv).transpose(1, 2)
        k_nope, v = kv.split([Dn, Dv], -1)  # (B, H, T, Dn), (B, H, T, Dv)
        q = torch.cat((q_nope, q_rope), -1)
        k = torch.cat((k_nope, k_rope.expand(B, H, T, -1)), -1)
        return q, k, v

    def _absorbed(self, q_nope, q_rope, c, k_rope, keep=None) -> torch.Tensor:
        """The new queries over the cached latent, W_UK in the query and W_UV after: (B, H, T, Dv);
        ``keep``: DSA's chosen keys."""
        w_uk, w_uv = self.up_weights()
        q = torch.cat((q_nope @ w_uk, q_rope), -1)  # (B, H, T, R + Dr)
        k = torch.cat((c, k_rope), -1)  # (B, 1, S, R + Dr): one key "head" for every query head
        if keep is None:
            o = causal_attention(q, k, c, self.n_heads, scale=self.scale)  # (B, H, T, R)
        else:
            o = sparse_attention(q, k, c, keep, self.scale)  # (B, H, T, R)
        return o @ w_uv.transpose(1, 2)  # (B, H, T, Dv)
