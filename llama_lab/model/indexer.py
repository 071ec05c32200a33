"""DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2-Exp), with the module names of
transformers' ``DeepseekV32Indexer``. Shapes: B batch, T new tokens, S keys, C = d_model, Rq q's
bottleneck, Hi the indexer's heads of Di, Dr the rotated part of each.

    q_h = rope(wq_b(q_resid))_h          (B, T, Hi, Di)   q_resid = q_a_layernorm(q_a_proj(x))
    k   = rope(LayerNorm(wk(x)))         (B, S, Di)       ← cached (one key per token and layer)
    w_h = weights_proj(x)_h · Hi^-½      (B, T, Hi)
    I(t, s) = Σ_h w_h · relu(q_h · k_s · Di^-½)

Each query attends only the index_topk earlier keys of highest I (all of them while it has
fewer). RoPE rotates the first Dr of each head on halves (MLA's own heads rotate adjacent pairs).
DeepSeek's kernels compute the scores in fp8 after a Hadamard rotation (which keeps dot products);
transformers and this module compute them in float32. Nothing differentiable flows through the
top-k choice: the indexer gets no gradient from the language-model loss (DeepSeek trains it with
its own KL loss).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import ModelConfig
from .positions import apply_rope

# transformers builds the indexer key's LayerNorm with ε 1e-6 whatever rms_norm_eps says
INDEXER_NORM_EPS = 1e-6


class Indexer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        C, Rq, Hi, Di = cfg.d_model, cfg.q_lora_rank, cfg.index_n_heads, cfg.index_head_dim
        self.cfg = cfg
        self.wq_b = nn.Linear(Rq, Hi * Di, bias=False)
        self.wk = nn.Linear(C, Di, bias=False)
        self.k_norm = nn.LayerNorm(Di, eps=INDEXER_NORM_EPS)
        self.weights_proj = nn.Linear(C, Hi, bias=False)

    def _rotate(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """RoPE on halves over the first Dr of each head of x (B, heads, T, Di)."""
        Dr = self.cfg.qk_rope_head_dim
        x_rot, x_pass = x.split([Dr, x.shape[-1] - Dr], -1)
        return torch.cat((apply_rope(x_rot, *rope), x_pass), -1)

    def key(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """The new tokens' keys (B, T, Di), rotated: what the cache keeps."""
        return self._rotate(self.k_norm(self.wk(x)).unsqueeze(1), rope).squeeze(1)

    def scores(
        self,
        x: torch.Tensor,
        q_resid: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        keys: torch.Tensor,
    ) -> torch.Tensor:
        """I (B, T, S) of the new tokens x (B, T, C) over ``keys`` (B, S, Di), in float32."""
        B, T, _ = x.shape
        Hi, Di = self.cfg.index_n_heads, self.cfg.index_head_dim
        q = self.wq_b(q_resid).view(B, T, Hi, Di).transpose(1, 2)  # (B, Hi, T, Di)
        q = self._rotate(q, rope).transpose(1, 2)  # (B, T, Hi, Di)
        dots = (
            torch.matmul(q.float(), keys.transpose(-1, -2).float().unsqueeze(1)) * Di**-0.5
        )  # (B, T, Hi, S)
        weights = self.weights_proj(x).float() * Hi**-0.5  # (B, T, Hi)
        return torch.matmul(weights.unsqueeze(-2), F.relu(dots)).squeeze(-2)  # Σ_h w_h · relu(·)

    @torch.no_grad()
    def select(
        self,
        x: torch.Tensor,
        q_resid: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        keys: torch.Tensor,
        start: int = 0,
    ) -> torch.Tensor:
        """Which keys each new query (at positions start..) attends: (B, 1, T, S), True where a
        key is earlier (or its own) and among the query's index_topk best."""
        T, S = x.shape[1], keys.shape[1]
        query_pos = torch.arange(start, start + T, device=x.device)[:, None]
        causal = torch.arange(S, device=x.device)[None, :] <= query_pos  # (T, S)
        index = self.scores(x, q_resid, rope, keys).masked_fill(~causal, float("-inf"))
        best = index.topk(min(self.cfg.index_topk, S), dim=-1).indices  # (B, T, k)
        chosen = torch.zeros_like(index, dtype=torch.bool).scatter(-1, best, True)
        return (chosen & causal).unsqueeze(1)


def sparse_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor, scale: float
) -> torch.Tensor:
    """Attention of q (B, H, T, E) over k (B, G, S, E), v (B, G, S, Ev) where ``keep`` (B, 1, T, S)
    is True: the pairs the indexer chose (G = 1: the latent, every head over it)."""
    if k.shape[1] == q.shape[1]:  # (MHA without the flag, as attention.causal_attention)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale, enable_gqa=True)
