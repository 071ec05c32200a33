"""The sizes every count is written in, derived once from a config: V vocab, C = d_model,
L layers, H query heads, G KV heads, D head dim, F ffn_hidden, the q and k/v widths and the
number of FFN matrices, the experts (E, top-K, width Fe, the shared experts' width Fs) and
one block's attention matrices (``attention``: q, k, v, o — or MLA's low-rank projections).
Parameters, FLOPs, memory, the roofline and the block table all read them from here.

MLA (DeepSeek-V2 §2.1): D is a q/k head's width (nope + rope part), Dv a value head's, Rkv the
latent K and V are rebuilt from, Dr the RoPE key shared by all heads, Rq q's bottleneck (0: none).
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
    Fs: int = 0  # the shared experts' width (n_shared_experts · Fe; 0: none)
    Dv: int = 0  # a value head's width (D except under MLA)
    Rkv: int = 0  # MLA: the latent's width (kv_lora_rank; 0: not MLA)
    Rq: int = 0  # MLA: q's bottleneck (q_lora_rank; 0: one q_proj)
    Dr: int = 0  # MLA: the rotated part of a q/k head (qk_rope_head_dim)
    Hi: int = 0  # DSA: the indexer's heads (index_n_heads; 0: no indexer)
    Di: int = 0  # DSA: the indexer's q/k head width (index_head_dim)
    attention: tuple[tuple[str, int, int], ...] = ()  # (name, rows = outputs, cols = inputs)

    @property
    def attention_params(self) -> int:
        """Elements of one block's attention matrices = multiply-adds per token through them."""
        return sum(rows * cols for _, rows, cols in self.attention)

    @classmethod
    def of(cls, cfg: ModelConfig) -> "Shapes":
        gated = cfg.gated_ffn
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
            Fs=cfg.n_shared_experts * cfg.expert_ffn_hidden,
            Dv=cfg.v_head_dim,
            Rkv=cfg.kv_lora_rank,
            Rq=cfg.q_lora_rank,
            Dr=cfg.qk_rope_head_dim,
            Hi=cfg.index_n_heads,
            Di=cfg.index_head_dim if cfg.has_indexer else 0,
            attention=attention_matrices(cfg),
        )


def attention_matrices(cfg: ModelConfig) -> tuple[tuple[str, int, int], ...]:
    """One block's attention matrices as (name, rows, cols), named as the modules: q, k, v at
    H, G, G heads of D and o back to C; MLA: q (or q_a: C → Rq, q_b: Rq → H·D), kv_a: C → Rkv +
    Dr (the latent and the shared RoPE key), kv_b: Rkv → H·(D − Dr + Dv) (every head's k_nope
    and v), o: H·Dv → C; DSA adds its indexer's wq_b: Rq → Hi·Di, wk: C → Di and weights_proj:
    C → Hi."""
    C, H, G, D = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    if not cfg.is_mla:  # a gated attention's q_proj also emits each head's output gate (Qwen3-Next)
        q_rows = H * D * (2 if cfg.attn_output_gate else 1)
        return (("q_proj", q_rows, C), ("k_proj", G * D, C), ("v_proj", G * D, C), ("o_proj", C, H * D))
    Rq, Rkv, Dr, Dv = cfg.q_lora_rank, cfg.kv_lora_rank, cfg.qk_rope_head_dim, cfg.v_head_dim
    q = (("q_a_proj", Rq, C), ("q_b_proj", H * D, Rq)) if Rq else (("q_proj", H * D, C),)
    mla = q + (
        ("kv_a_proj_with_mqa", Rkv + Dr, C),
        ("kv_b_proj", H * (D - Dr + Dv), Rkv),
        ("o_proj", C, H * Dv),
    )
    if not cfg.has_indexer:
        return mla
    Hi, Di = cfg.index_n_heads, cfg.index_head_dim
    return mla + (("indexer_wq_b", Hi * Di, Rq), ("indexer_wk", Di, C), ("indexer_weights_proj", Hi, C))
