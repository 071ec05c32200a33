"""Positions: RoPE (rotate-half, as transformers) and the 2017 sinusoidal table, with the
tables each forward needs built once per device and length (``PositionTables``), not on every
call: a decode step reads a slice of tables built at prefill.
"""

from __future__ import annotations

import math

import torch

from ..config import ModelConfig


def rope_inv_freq(head_dim: int, theta: float) -> torch.Tensor:
    """θ_i = theta^(-2i/D) for i < D/2, as transformers computes it."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))


def rope_cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    angles = torch.outer(positions.float(), inv_freq)  # (T, D/2)
    angles = torch.cat((angles, angles), dim=-1)  # (T, D) rotate-half layout
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, heads, T, D); cos/sin: (T, D)."""
    return (x * cos.to(x.dtype)) + (rotate_half(x) * sin.to(x.dtype))


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on adjacent pairs (x0, x1), (x2, x3), … (DeepSeek's layout), as transformers'
    ``apply_rotary_pos_emb_interleave``: the rotated evens, then the rotated odds. q and k get
    the same permutation, so their dot products — the scores — are those of the pairs rotated
    in place (DeepSeek-V2's complex multiplication). x: (B, heads, T, D); cos/sin: (T, D)."""
    half = cos.shape[-1] // 2
    cos, sin = cos[..., :half].to(x.dtype), sin[..., :half].to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.cat((even * cos - odd * sin, odd * cos + even * sin), dim=-1)


def sinusoidal_table(n_positions: int, dim: int, device=None) -> torch.Tensor:
    """Vaswani et al. 2017, section 3.5: PE[p, 2i] = sin(p/10000^(2i/d)), PE[p, 2i+1] = cos(...)."""
    pos = torch.arange(n_positions, dtype=torch.float32, device=device)[:, None]
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / dim))
    table = torch.zeros(n_positions, dim, device=device)
    table[:, 0::2] = torch.sin(pos * div)
    table[:, 1::2] = torch.cos(pos * div)[:, : dim // 2]
    return table


class PositionTables:
    """float32 position tables of one model, per device: RoPE's (cos, sin) of shape (n, D) or
    the sinusoidal table (n, C), for positions 0..n-1. ``get(end)`` returns tables covering
    positions < end: built once for the longest length asked so far (exactly that length on
    the first call, so a training step at T holds T rows), grown at least 2× past it when a
    longer one comes (amortised decoding), never past max_seq_len. Plain attributes, not
    buffers: ``model.to(bf16)`` must not round them. A model whose windowed layers rotate with a
    base of their own (Gemma 3's ``rope_local_theta``) has a second RoPE table for them
    (``get(..., local=True)``)."""

    def __init__(self, cfg: ModelConfig):
        self.cfg = cfg
        self._tables: dict[str, tuple[torch.Tensor, ...]] = {}

    def _build(self, n: int, device: torch.device, local: bool) -> tuple[torch.Tensor, ...]:
        # ordinary tensors even under inference_mode: a later training forward saves them
        with torch.inference_mode(False), torch.no_grad():
            return self._tables_for(n, device, local)

    @property
    def inv_freq(self) -> torch.Tensor:
        """RoPE's frequencies θ_i of this model (float32, on the CPU), over the rotated width
        (``cfg.rope_dim``: a head, its rotated share, or MLA's RoPE part)."""
        return self.frequencies()

    def frequencies(self, local: bool = False) -> torch.Tensor:
        """``inv_freq``, or with ``local`` the windowed layers' (their own base, if any)."""
        cfg = self.cfg
        return rope_inv_freq(cfg.rope_dim, cfg.rope_local_theta if local else cfg.rope_theta)

    @property
    def separate_local(self) -> bool:
        """Whether the windowed layers rotate with a base of their own (Gemma 3)."""
        cfg = self.cfg
        return cfg.pos_encoding == "rope" and cfg.rope_local_theta != cfg.rope_theta

    def _tables_for(self, n: int, device: torch.device, local: bool) -> tuple[torch.Tensor, ...]:
        cfg = self.cfg
        if cfg.pos_encoding == "rope":
            return rope_cos_sin(torch.arange(n, device=device), self.frequencies(local).to(device))
        return (sinusoidal_table(n, cfg.d_model, device=device),)

    def get(self, end: int, device: torch.device, local: bool = False) -> tuple[torch.Tensor, ...]:
        """Tables covering positions < end; ``local``: the windowed layers' (their own RoPE base,
        where they have one)."""
        local = local and self.separate_local
        key = f"{device}:local" if local else str(device)
        tables = self._tables.get(key)
        if tables is None or tables[0].shape[0] < end:
            n = (
                end
                if tables is None
                else min(max(end, 2 * tables[0].shape[0]), max(end, self.cfg.max_seq_len))
            )
            tables = self._tables[key] = self._build(n, device, local)
        return tables

    def rows(self) -> int:
        """The most positions a table holds on any device (0 before the first forward)."""
        return max((t[0].shape[0] for t in self._tables.values()), default=0)
