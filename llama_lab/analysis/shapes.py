"""The sizes every count is written in, derived once from a config: V vocab, C = d_model,
L layers, H query heads, G KV heads, D head dim, F ffn_hidden, the q and k/v widths and the
number of FFN matrices, and the experts (E, top-K, width Fe). Parameters, FLOPs, memory, the roofline and
the block table all read
them from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ModelConfig


@dataclass(frozen=True)
class Shapes:
    V: int  # vocabulary
    C: int  # d_model
    L: int  # blocks
    H: int  # query heads
    G: int  # key/value heads (G = H: MHA, 1: MQA)
    D: int  # head dim
    F: int  # FFN inner size
    q_dim: int  # H·D: width of q (and of the attention output)
    kv_dim: int  # G·D: width of k and of v
    n_ffn_matrices: int  # 3 for SwiGLU (gate, up, down), 2 for ReLU/GELU (up, down)
    n_up: int  # matrices reading the block's input: 2 (gate, up) or 1 (up)
    E: int = 0  # routed experts of a sparse layer (0: every layer dense)
    K: int = 0  # experts each token is routed to (top-k)
    Fe: int = 0  # an expert's FFN width

    @classmethod
    def of(cls, cfg: ModelConfig) -> "Shapes":
        gated = cfg.ffn_type == "swiglu"
        return cls(
            V=cfg.vocab_size,
            C=cfg.d_model,
            L=cfg.n_layers,
            H=cfg.n_heads,
            G=cfg.n_kv_heads,
            D=cfg.head_dim,
            F=cfg.ffn_hidden,
            q_dim=cfg.n_heads * cfg.head_dim,
            kv_dim=cfg.n_kv_heads * cfg.head_dim,
            n_ffn_matrices=3 if gated else 2,
            n_up=2 if gated else 1,
            E=cfg.n_experts,
            K=cfg.experts_per_token,
            Fe=cfg.expert_ffn_hidden,
        )
