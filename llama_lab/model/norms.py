"""Normalisation layers: RMSNorm (LLaMA) and LayerNorm (2017).
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..config import ModelConfig


class RMSNorm(nn.Module):
    """x / rms(x) · γ, computed in float32 and cast back (as LLaMA)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def make_norm(cfg: ModelConfig) -> nn.Module:
    if cfg.norm_type == "rmsnorm":
        return RMSNorm(cfg.d_model, cfg.norm_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
