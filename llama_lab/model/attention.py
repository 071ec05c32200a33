"""Causal self-attention with MHA, GQA or MQA (``n_kv_heads``), an optional sliding window
or fixed chunks (Llama 4), QK-norm (before RoPE, or Llama 4's after it), Llama 4's attention
temperature on unrotated blocks, a score scale of its own (Gemma's query_pre_attn_scalar),
attention sinks (gpt-oss) and soft-capped scores (Gemma 2), through SDPA, plain matmuls where a
sink joins the softmax or the scores are capped (SDPA takes neither), or a reference matmul path
that also returns the weights. Shapes: B batch, T new tokens, S keys attended (cached + new), H
query heads, G KV heads, D head dim, C = d_model.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import ModelConfig
from ..config.sparse import SparsePattern
from .fused import FusedLinear, keep_part_keys
from .kv_cache import KVCache
from .norms import RMSNorm
from .positions import apply_rope, apply_rope_interleaved


def attention_mask(
    T: int,
    S: int,
    window: int | None,
    device,
    chunk_start: int | None = None,
    sparse: SparsePattern | None = None,
    key_positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """(T, S) bool: which keys each of the T new queries sees — the one mask every attention
    path, the cache and the pair counts follow. The queries are the last T of the S keys, whose
    positions are ``key_positions`` (S,) (default 0..S-1; a sparse block's cache returns its held
    keys out of order); a query sees the keys at or before it and, with a window W, only the last
    W of them (transformers' kv > q - W); with ``chunk_start`` (the absolute position of the first
    key) the window is a chunk size instead: a query sees only the keys of its own chunk of W
    positions (Llama 4's chunked attention). A ``sparse`` pattern (``config.sparse``) dilates the
    window, (i − j) % d == 0 and i − j < W·d, and adds the global tokens (j < G or i < G) and
    BigBird's random earlier blocks."""
    k_pos = torch.arange(S, device=device) if key_positions is None else key_positions
    q_pos, k_pos = k_pos[S - T :, None], k_pos[None, :]
    if chunk_start is not None and key_positions is None:
        q_pos, k_pos = q_pos + chunk_start, k_pos + chunk_start
    mask = k_pos <= q_pos
    if window is not None and chunk_start is not None:
        mask &= k_pos // window == q_pos // window
    elif window is not None and sparse is None:
        mask &= k_pos > q_pos - window
    elif window is not None and sparse is not None:
        distance, G = q_pos - k_pos, sparse.global_tokens
        seen = (distance < window * sparse.dilation) & (distance % sparse.dilation == 0)
        seen |= (k_pos < G) | (q_pos < G)
        if sparse.random_blocks:
            seen |= random_block_mask(sparse, q_pos[:, 0], k_pos[0])
        mask &= seen
    return mask


def random_block_mask(sparse: SparsePattern, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """(T, S) bool: the keys (positions ``k_pos``) lying in the random earlier blocks drawn for
    each query's block (positions ``q_pos``; ``SparsePattern.random_key_blocks``)."""
    b = sparse.block_size
    q_blocks, row_of = torch.unique(q_pos // b, return_inverse=True)
    n_blocks = int(k_pos.max()) // b + 1
    drawn = torch.zeros(len(q_blocks), n_blocks, dtype=torch.bool)  # (query blocks, key blocks)
    for row, block in enumerate(q_blocks.tolist()):
        drawn[row, sparse.random_key_blocks(block)] = True
    return drawn.to(q_pos.device)[row_of][:, k_pos // b]


def one_span(S: int, window: int | None, chunk_start: int | None) -> bool:
    """Whether S keys from ``chunk_start`` (None: a sliding window) all fall in one window or
    chunk, so that the window masks nothing beyond causality."""
    if window is None:
        return True
    if chunk_start is None:
        return window >= S
    return chunk_start // window == (chunk_start + S - 1) // window


def causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    n_rep: int,
    window: int | None = None,
    scale: float | None = None,
    chunk_start: int | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """q: (B, H, T, D); k: (B, G, S, D), v: (B, G, S, Dv) with S ≥ T, the last T keys being the
    new tokens; ``scale`` of the scores, default 1/√D (MLA's absorbed form attends over the
    latent with its heads' own 1/√D); ``window`` and ``chunk_start`` as ``attention_mask``, or
    ``mask`` (T, S) itself (a sparse pattern's: ``attention_mask``)."""
    if v.shape[-1] != q.shape[-1]:  # (MLA) the fused kernels take one head width: zeros pad
        # the narrower (dot products and weighted sums unchanged), the output is cut back
        width, common = v.shape[-1], max(v.shape[-1], q.shape[-1])
        scale = q.shape[-1] ** -0.5 if scale is None else scale
        q, k, v = (F.pad(t, (0, common - t.shape[-1])) for t in (q, k, v))
        return causal_attention(q, k, v, n_rep, window, scale, chunk_start, mask)[..., :width]
    T, S = q.shape[2], k.shape[2]
    if one_span(S, window, chunk_start):
        window = None  # every key is inside the window (or the chunk)
    if mask is not None:  # given (a sparse pattern's)
        is_causal = False
    elif window is None and T == S:
        mask, is_causal = None, True
    elif window is None and T == 1:
        mask, is_causal = None, False  # one new token sees everything cached
    else:  # after a cache, or a window: explicit
        mask, is_causal = attention_mask(T, S, window, q.device, chunk_start), False
    # SDPA broadcasts the KV heads itself (torch ≥ 2.5): no repeated K/V tensor is made or saved.
    # MHA calls it without the flag (on the CPU an explicit enable_gqa=False takes another path)
    if n_rep == 1:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=True
    )


def bidirectional_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, n_rep: int, scale: float | None = None
) -> torch.Tensor:
    """Every query sees every key (BERT's encoder): SDPA with no mask. Shapes as
    ``causal_attention`` with S = T."""
    if n_rep == 1:
        return F.scaled_dot_product_attention(q, k, v, scale=scale)
    return F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)


def matmul_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    n_rep: int,
    window: int | None = None,
    scale: float | None = None,
    sinks: torch.Tensor | None = None,
    softcap: float = 0.0,
    chunk_start: int | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal attention as plain matmuls, for what SDPA cannot take: ``softcap`` (Gemma 2) turns
    the scaled scores into cap · tanh(scores / cap); each head's sink logit (``sinks``, (H,):
    gpt-oss) joins the softmax and is dropped after it, so the weights sum to less than 1 (a head
    may attend to nothing). Shapes as ``causal_attention``; the R = n_rep query heads sharing a
    KV head are stacked along the rows, (B, G, R·T, ·), so K and V are never repeated; ``mask``
    (T, S): an explicit one, as ``causal_attention``."""
    B, H, T, D = q.shape
    G, S = k.shape[1], k.shape[2]
    scale = D**-0.5 if scale is None else scale
    scores = q.reshape(B, G, n_rep * T, D) @ k.transpose(-2, -1) * scale  # (B, G, R·T, S)
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    if mask is None:
        mask = attention_mask(T, S, window, q.device, chunk_start)
    scores = scores.view(B, G, n_rep, T, S).masked_fill(~mask, float("-inf"))
    if sinks is None:
        weights = scores.softmax(dim=-1)
    else:
        sink = sinks.view(1, G, n_rep, 1, 1).expand(B, G, n_rep, T, 1).to(scores.dtype)
        weights = torch.cat((scores, sink), dim=-1).softmax(dim=-1)[..., :S]  # the sink dropped
    return (weights.reshape(B, G, n_rep * T, S) @ v).view(B, H, T, v.shape[-1])


def reference_attention(
    q,
    k,
    v,
    n_rep: int,
    window: int | None = None,
    sinks: torch.Tensor | None = None,
    scale: float | None = None,
    softcap: float = 0.0,
    chunk_start: int | None = None,
    sparse: SparsePattern | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain-matmul causal attention that also returns the weights (B, H, T, S): for teaching
    and for tests of the fused path. ``sinks`` (H,): each head's sink logit joins the softmax
    and is dropped after it (the weights then sum to less than 1); ``scale`` of the scores
    (default 1/√D); ``softcap``: scores → cap · tanh(scores / cap); ``window``, ``chunk_start``
    and ``sparse`` as ``attention_mask``."""
    if n_rep > 1:
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    (B, H, T, D), S = q.shape, k.shape[2]
    scores = q @ k.transpose(-2, -1) * (D**-0.5 if scale is None else scale)  # (B, H, T, S)
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    scores = scores.masked_fill(~attention_mask(T, S, window, q.device, chunk_start, sparse), float("-inf"))
    if sinks is not None:
        scores = torch.cat((scores, sinks.view(1, H, 1, 1).expand(B, H, T, 1).to(scores.dtype)), dim=-1)
    weights = scores.softmax(dim=-1)[..., :S]
    return weights @ v, weights


def unit_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x (B, heads, T, D) / rms(x) over D, in float32 and cast back, with no γ (Llama 4's
    ``Llama4TextL2Norm`` on q and k); computed in the (B, T, heads, D) layout the rotation
    keeps, so that SDPA's output has it too and o_proj reads that without a copy."""
    rows = x.transpose(1, 2)
    return F.rms_norm(rows.float(), (x.shape[-1],), eps=eps).to(x.dtype).transpose(1, 2)


def attention_temperature(cfg: ModelConfig, start: int, T: int, device) -> torch.Tensor:
    """(T, 1) float32 factors of the queries at positions start..start+T-1 of a temperature
    block (Llama 4's NoPE blocks, every Mistral 4 block; Nakanishi 2025, arXiv 2501.19399):
    1 + scale · ln(1 + ⌊(p + offset) / floor⌋), 1 until p + offset reaches attn_floor_scale,
    then growing as the log of the position."""
    p = torch.arange(start, start + T, device=device, dtype=torch.float32)
    steps = torch.floor((p + cfg.attn_temperature_offset) / cfg.attn_floor_scale)
    return (torch.log1p(steps) * cfg.attn_temperature_scale + 1.0)[:, None]


def sharpen(q: torch.Tensor, cfg: ModelConfig, start: int) -> torch.Tensor:
    """q (B, H, T, D) of the tokens at positions start.. times their temperature, the product
    in float32 and cast back (as Llama 4 computes it)."""
    return (q * attention_temperature(cfg, start, q.shape[2], q.device)).to(q.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__()
        self.cfg, self.layer_idx = cfg, layer_idx
        self.window = cfg.window_of(layer_idx)
        self.chunked = cfg.chunked_attention and self.window is not None  # Llama 4's chunks
        self.sparse = cfg.sparse_pattern if self.window is not None else None  # Longformer, BigBird
        # the heads this module computes: the config's, or one rank's share under tensor
        # parallelism (llama_lab.train.tensor_parallel overwrites them)
        self.n_heads, self.n_kv_heads = cfg.n_heads, cfg.n_kv_heads
        C, D = cfg.d_model, cfg.head_dim
        # q, k and v in one GEMM; checkpoints keep q_proj, k_proj, v_proj (fewer KV heads: GQA/MQA)
        # Qwen3-Next / Qwen3.5: q_proj also emits each head's output gate, [q_h, gate_h] per head
        q_rows = cfg.n_heads * D * (2 if cfg.attn_output_gate else 1)
        self.qkv_proj = FusedLinear(
            C,
            (("q_proj", q_rows), ("k_proj", cfg.n_kv_heads * D), ("v_proj", cfg.n_kv_heads * D)),
            bias=cfg.qkv_bias,
        )
        if not cfg.fused_keys:  # Phi-3's checkpoints keep qkv_proj itself
            keep_part_keys(self, "qkv_proj")
        self.o_proj = nn.Linear(cfg.n_heads * D, C, bias=cfg.o_bias)
        if cfg.qk_norm and cfg.qk_norm_scope != "rope_l2":  # Qwen3: per head; OLMo 2: projection
            q_width, k_width = cfg.qk_norm_widths
            self.q_norm = RMSNorm(q_width, cfg.norm_eps, cfg.norm_plus_one)
            self.k_norm = RMSNorm(k_width, cfg.norm_eps, cfg.norm_plus_one)
        if cfg.attention_sinks:  # gpt-oss: one learned logit per query head
            self.sinks = nn.Parameter(torch.empty(cfg.n_heads))

    def project(self, x, rope: tuple[torch.Tensor, torch.Tensor] | None, start: int = 0):
        """q (B, H, T, D), k and v (B, G, T, D) of the new tokens x (B, T, C) at positions
        ``start``.. : QK-norm, then RoPE (``rope``: cos, sin of the tokens' positions; None: not
        rotated), or (Llama 4) RoPE, then the norm; an unrotated block's temperature."""
        return self._project(x, rope, start)[:3]

    def _project(self, x, rope: tuple[torch.Tensor, torch.Tensor] | None, start: int = 0):
        """``project``'s q, k, v and the output gate (B, T, H·D; None without one)."""
        B, T, _ = x.shape
        H, G, D = self.n_heads, self.n_kv_heads, self.cfg.head_dim
        q, k, v = self.qkv_proj.split(self.qkv_proj(x))  # (B, T, H·D), (B, T, G·D) ×2
        gate = None
        if self.cfg.attn_output_gate:  # each head's [q_h, gate_h]
            q, gate = q.view(B, T, H, 2 * D).split(D, dim=-1)
            gate = gate.reshape(B, T, H * D)
        if self.cfg.qk_norm and self.cfg.qk_norm_scope == "projection":  # OLMo 2: over H·D, G·D
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.view(B, T, H, D), k.view(B, T, G, D), v.view(B, T, G, D)
        if self.cfg.qk_norm and self.cfg.qk_norm_scope == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H|G, T, D)
        if rope is not None:  # RoPE rotates q and k (their first rope_dim dimensions), never v
            q, k = self._rotate(q, rope), self._rotate(k, rope)
            if self.cfg.qk_norm and self.cfg.qk_norm_scope == "rope_l2":  # Llama 4: after RoPE
                q, k = unit_rms(q, self.cfg.norm_eps), unit_rms(k, self.cfg.norm_eps)
        if self.cfg.temperature_layer_flags[self.layer_idx]:  # Llama 4's NoPE blocks
            q = sharpen(q, self.cfg, start)
        norm_first = self.cfg.qk_norm and self.cfg.qk_norm_scope != "rope_l2"  # before RoPE
        if rope is not None or norm_first:
            # q and k are new tensors now; v, a view, would keep the whole q/k/v output alive
            # (SDPA saves v for backward): it gets its own storage — unless QK-norm saves its
            # q and k inputs, views of that output, for backward anyway
            if not (norm_first and torch.is_grad_enabled()):
                v = v.contiguous()
        return q, k, v, gate

    def _rotate(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """RoPE on a head's first rope_dim dimensions (all of them but under partial rotary:
        Phi-3, GLM), the rest passed through."""
        width, interleaved = self.cfg.rope_dim, self.cfg.rope_interleave
        if width == x.shape[-1] and not interleaved:
            return apply_rope(x, *rope)
        # in the (B, T, heads, D) layout the projection wrote, as a full rotate-half rotation
        # keeps it (its output joined, or the evens and odds concatenated, in that layout): SDPA's
        # output then has it too, and o_proj reads that without a copy
        x, (cos, sin) = x.transpose(1, 2), (t[:, None] for t in rope)  # (T, 1, width) tables
        rotated = (apply_rope_interleaved if interleaved else apply_rope)(x[..., :width], cos, sin)
        if width < x.shape[-1]:
            rotated = torch.cat((rotated, x[..., width:]), dim=-1)
        return rotated.transpose(1, 2)

    def forward(self, x, rope: tuple[torch.Tensor, torch.Tensor] | None, cache: KVCache | None):
        B, T, _ = x.shape
        H, D = self.n_heads, self.cfg.head_dim
        q, k, v, gate = self._project(x, rope, cache.length if cache is not None else 0)
        chunk_start = None  # a chunked block: the absolute position of its first key
        if self.chunked:
            chunk_start = cache.chunk_start(self.layer_idx) if cache is not None else 0
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v)  # (B, G, S, D)
        cfg, scale, window = self.cfg, self.cfg.attention_multiplier, self.window
        mask = None  # a sparse pattern's, over the keys' own positions
        if self.sparse is not None:
            positions = cache.key_positions(self.layer_idx, T) if cache is not None else None
            mask = attention_mask(
                T, k.shape[2], window, q.device, sparse=self.sparse, key_positions=positions
            )
        if cfg.attention_sinks or cfg.attn_softcap:
            sinks = self.sinks if cfg.attention_sinks else None
            out = matmul_attention(
                q, k, v, cfg.n_rep, window, scale, sinks, cfg.attn_softcap, chunk_start, mask
            )
        elif not cfg.causal:  # BERT: bidirectional
            out = bidirectional_attention(q, k, v, cfg.n_rep, scale)  # (B, H, T, D)
        else:
            out = causal_attention(q, k, v, cfg.n_rep, window, scale, chunk_start, mask)  # (B, H, T, D)
        out = out.transpose(1, 2).reshape(B, T, H * D)
        return self.o_proj(out if gate is None else out * torch.sigmoid(gate))
