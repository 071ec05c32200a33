"""Normalisation layers: RMSNorm (LLaMA) and LayerNorm (2017)."""

from __future__ import annotations

import torch
import torch.nn as nn

from ..config import ModelConfig
from .kernels import rms_norm


class RMSNorm(nn.Module):
    """x / rms(x) · γ, computed in float32 and cast back (as LLaMA); ``plus_one``: · (1 + γ), γ
    starting at 0 (Gemma); for backward it keeps only x and rstd (``kernels.rms_norm``)."""

    def __init__(self, dim: int, eps: float, plus_one: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim) if plus_one else torch.ones(dim))
        self.eps, self.plus_one = eps, plus_one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps, self.plus_one)


def make_norm(cfg: ModelConfig) -> nn.Module:
    if cfg.norm_type == "rmsnorm":
        return RMSNorm(cfg.d_model, cfg.norm_eps, cfg.norm_plus_one)
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
