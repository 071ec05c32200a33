"""A preallocated KV cache of every layer (gpt-fast style).
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..config import ModelConfig


class KVCache(nn.Module):
    """Preallocated keys and values of every layer: (L, B, G, S_max, D) each."""

    def __init__(self, cfg: ModelConfig, batch_size: int, max_len: int | None = None,
                 device=None, dtype=None):
        super().__init__()
        max_len = max_len or cfg.max_seq_len
        shape = (cfg.n_layers, batch_size, cfg.n_kv_heads, max_len, cfg.head_dim)
        self.register_buffer("k", torch.zeros(shape, device=device, dtype=dtype), persistent=False)
        self.register_buffer("v", torch.zeros(shape, device=device, dtype=dtype), persistent=False)
        self.length = 0      # tokens already cached

    @property
    def max_len(self) -> int:
        return self.k.shape[3]

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (B, G, T, D) at positions [length, length+T); return all keys/values so far."""
        start, end = self.length, self.length + k.shape[2]
        self.k[layer, :, :, start:end] = k
        self.v[layer, :, :, start:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def allocated_bytes(self) -> int:
        """Bytes of storage the K and V tensors really hold (for all ``max_len`` positions)."""
        return self.k.untyped_storage().nbytes() + self.v.untyped_storage().nbytes()

    def nbytes(self) -> int:
        """Bytes of the cache tensors holding the tokens cached so far."""
        per_token = self.k[:, :, :, :1].numel() * self.k.element_size()
        return 2 * per_token * self.length
