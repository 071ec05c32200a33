"""The feed-forward block: SwiGLU (LLaMA) or a ReLU/GELU MLP (2017).
"""
from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F

from ..config import ModelConfig


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) ⊙ up(x)); ReLU/GELU: down(act(up(x)))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gated = cfg.ffn_type == "swiglu"
        if self.gated:
            self.gate_proj = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=cfg.bias)
        self.up_proj = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=cfg.bias)
        self.down_proj = nn.Linear(cfg.ffn_hidden, cfg.d_model, bias=cfg.bias)
        self.act = {"swiglu": F.silu, "relu": F.relu, "gelu": F.gelu}[cfg.ffn_type]

    def forward(self, x):
        if self.gated:
            return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(self.act(self.up_proj(x)))
