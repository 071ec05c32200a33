"""FLOPs (2 per multiply-add): matmuls by component, the element-wise work listed apart, the
PaLM 6N + 12·L·H·Q·T estimate beside it, prefill and decode.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable, Optional, Union

import pandas as pd

from ..config import LIMITS, ModelConfig, decoder_stack, encoder_stack
from ..errors import AnalysisError
from .common import check_seq, first_true
from .pairs import causal_pairs, row_keys
from .params import palm_params
from .shapes import Shapes

# FLOPs per element of the element-wise terms, listed next to (never inside) the matmul total.
ELEMENTWISE_FLOPS_PER_ELEMENT = {
    "rmsnorm": 4,  # x², sum for the mean, × rstd, × γ (one rsqrt per row not counted)
    "layernorm": 7,  # sum for μ, − μ, square, sum for σ², × rstd, × γ, + β
    "softmax": 5,  # × 1/√D, − row max, exp, sum, ÷ sum (per score; the max compares free)
    "rope": 3,  # x·cos + rotate_half(x)·sin, per element of q and k
    "swiglu": 5,  # silu(g) = g·σ(g): exp, +1, ÷, × g; then × up
    # 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³))): g³ (2), × c, + g, × √(2/π), tanh (5, as erf),
    # + 1, × 0.5·g (2); then × up
    "geglu": 14,
    "relu": 1,
    "gelu": 8,  # 0.5·x·(1 + erf(x/√2)), erf counted as 5
    "silu": 4,  # x·σ(x): exp, +1, ÷, × (an ungated FFN's: Marian's "swish")
    "residual": 1,  # per element of each residual add (two per block)
    "bias": 1,  # per output element of a biased linear layer
    "position_add": 1,  # learned or sinusoidal table added to the token embeddings
    "embed_scale": 1,  # × √d on the token embeddings (2017 recipe, Gemma)
    "softcap": 7,  # cap · tanh(x / cap): ÷, tanh (5, as erf), × (Gemma 2: scores and logits)
}


FLOP_CONVENTIONS = [
    "FLOPs = 2 per multiply-add: a (m×k)·(k×n) matmul costs 2·m·k·n.",
    "forward = matmul FLOPs only (the JSON key flops.forward): attention projections + attention scores "
    "+ FFN + lm_head. Norms, softmax, RoPE, activations, bias and residual adds, embedding scale "
    "and soft caps are listed in "
    "'elementwise' (per-element constants in 'elementwise_constants') and are NOT in forward.",
    "attention scores = QKᵀ and AV over the full T×T: 4·B·T²·H·D per layer (2 for QKᵀ, 2 for AV); "
    "attention_scores_causal counts only the T(T+1)/2 unmasked pairs: 2·B·T(T+1)·H·D per layer; "
    "a bidirectional encoder (BERT, causal=False) masks nothing: all T² pairs, the full count.",
    "BERT's pooler: a C×C matmul on each sequence's first token (2·B·C², 'pooler'); a bare encoder "
    "(lm_head=False) has no lm_head FLOPs.",
    "a sliding-window layer (Mistral) limits each query to its last W keys: T·min(T, W) pairs "
    "(full convention) and Σ min(i+1, W) causally, as a windowed kernel computes them; a chunked "
    "layer (Llama 4) to the keys of its own chunk of W positions: Σ n_c² over the chunks (full) "
    "and Σ n_c(n_c+1)/2 causally; a decoded token at position p meets p mod W + 1 keys.",
    "a sparse pattern on the windowed layers (global tokens, dilation, BigBird's random blocks; PaLM's "
    "T per block: the keys its last query sees) is run "
    "as a masked dense kernel: T×T scores (full convention), and causally exactly the pairs its mask "
    "allows (analysis.pairs: per query the dilated window's keys, the global ones and the random "
    "blocks', without double counting); a decoded token is scored against the keys its cache held and "
    "its own (full: min(S, kept + 1)) and counted over the ones its row of the mask allows (causal).",
    "a sparse (MoE) layer costs its router (2·C·E per token, listed as 'router') and the k "
    "experts each token is routed to (k × 3 matrices of C×Fe, in 'ffn'), not all E.",
    "MLA (DeepSeek): the projections are its low-rank matrices (q_a, q_b, kv_a, kv_b, o); the scores "
    "cost (D + Dv) per pair and head (q/k head D = nope + rope part, v head Dv); a decode step "
    "attends over the cached latent in the absorbed form (DeepSeek-V2 §2.1.2: W_UK folded into the "
    "query, W_UV into the output, as serving engines decode): (2·Rkv + Dr) per pair and head, the "
    "projections unchanged (W_UK and W_UV are kv_b_proj's rows). Shared experts run for every token.",
    "Gated DeltaNet (Qwen3-Next, Qwen3.5): its projections are in attention_proj (q_proj of a gated "
    "attention block includes its output gate); 'delta_rule' is the causal convolution and the "
    "gated delta rule in the chunked form (chunks of 64, the sequence padded to a whole chunk; the two "
    "unit-triangular solves per chunk included: FlopCounterMode has no rule for solve_triangular and "
    "counts 0 for them) or, decoding, the recurrent form (3·dk·dv per value head and token).",
    "DeepSeek Sparse Attention (DeepSeek-V3.2): 'indexer_scores' is the lightning indexer, Hi·(Di + 1) "
    "multiply-adds per (query, key) pair (q_h·k over its heads, then their weighted sum) over every "
    "earlier key: T×T in forward, as transformers computes it, T(T+1)/2 in forward_causal, S for a "
    "decoded token; its projections are in attention_proj. The main attention keeps the full T×T "
    "convention in attention_scores (transformers' eager forward computes every pair and masks the "
    "unchosen), while attention_scores_causal counts the pairs the top-k allows, Σ min(i+1, "
    "index_topk), and a decoded token attends min(S, index_topk) keys.",
    "GQA/MQA shrink the K/V projections (2·C·G·D per token) but not the scores: every query head "
    "still attends over all keys.",
    "the token-embedding lookup is a gather: 0 FLOPs.",
    "an encoder-decoder (the 2017 Transformer) over a source of S tokens (S = seq_len unless given) "
    "and a target of T: the encoder's blocks over the S source tokens (their scores over all S×S "
    "pairs in both conventions: nothing is masked), the decoder's self-attention over the target "
    "(T×T, causally T(T+1)/2) and its cross-attention: q and o over the T target tokens, k and v over "
    "the S source tokens (once: a decode step reads them from the cache), its scores over the T×S "
    "pairs in both conventions; lm_head over the target. The element-wise terms count the encoder and "
    "the decoder's own blocks, not the cross-attention's norm, softmax and biases.",
    "training_step = 3 × forward (backward ≈ 2 × forward: gradients w.r.t. activations and "
    "weights); no activation-checkpointing recompute, no optimizer update.",
    "palm_training_per_token = 6N + 12·L·H·Q·T (Chowdhery et al. 2022, App. B; nanoGPT "
    "estimate_mfu) with Q = head dim, T = context, N = palm_params = every parameter except the "
    "token and learned positional embedding tables, the lm_head counted even when tied (its "
    "matmul still runs).",
]


@dataclass(frozen=True)
class FlopCount:
    phase: str  # "forward" (B×T tokens) or "decode" (one new token each)
    batch: int
    seq_len: int  # new tokens per sequence
    context_len: int  # keys the last query attends
    tokens: int  # B × seq_len
    forward: int
    per_token: float
    training_step: int  # 3 × forward
    training_per_token: float
    by_component: dict[str, int]  # attention_proj, attention_scores, ffn, lm_head
    attention_scores_causal: int
    forward_causal: int  # forward with the causal-effective scores
    elementwise: dict[str, int]  # norms, softmax, rope, activation, residual, bias, ... total
    elementwise_constants: dict[str, int]  # ELEMENTWISE_FLOPS_PER_ELEMENT
    palm_params: int
    palm_training_per_token: int
    conventions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        rows = [
            {"component": name, "flops": value, "share": value / self.forward, "in_forward": True}
            for name, value in self.by_component.items()
        ]
        rows += [
            {
                "component": f"elementwise: {name}",
                "flops": value,
                "share": value / self.forward,
                "in_forward": False,
            }
            for name, value in self.elementwise.items()
            if name != "total"
        ]
        return pd.DataFrame(rows)


Pairs = Union[int, Callable[[Optional[int]], int]]  # query-key pairs, or pairs(window)


def layer_pairs(cfg: ModelConfig, pairs: Pairs) -> list[int]:
    """Query-key pairs of each attention block: ``pairs`` itself, or ``pairs(window)`` with the
    block's sliding window (None: it attends every earlier key). Gated DeltaNet blocks have none."""
    full = cfg.full_attention_layers
    if not callable(pairs):
        return [pairs] * full
    local = sum(cfg.local_layer_flags)  # two kinds of attention block: windowed or not
    return ([pairs(cfg.sliding_window)] * local if local else []) + ([pairs(None)] * (full - local))


def chunk_lengths(T: int, chunk: int) -> list[int]:
    """The lengths of the chunks of ``chunk`` positions that T tokens from position 0 fill."""
    return [chunk] * (T // chunk) + ([T % chunk] if T % chunk else [])


def linear_proj_params(cfg: ModelConfig) -> int:
    """A Gated DeltaNet block's projection matrices (multiply-adds per token through them): its
    input projections C → 2·Hk·dk + 2·Hv·dv + 2·Hv and out_proj Hv·dv → C."""
    C = cfg.d_model
    return (
        C * (2 * cfg.linear_key_dim + 2 * cfg.linear_value_dim + 2 * cfg.linear_v_heads)
        + cfg.linear_value_dim * C
    )


def delta_rule_flops(cfg: ModelConfig, batch: int, seq_len: int, decode: bool) -> int:
    """Matmul FLOPs of the Gated DeltaNet blocks' token mixing, all of them: the causal
    convolution (conv_dim · K multiply-adds per token) and the gated delta rule per value head.
    A forward over T tokens runs the chunked form (chunks of c = 64, T padded to n·c, as
    transformers and the FLA kernels run it): per chunk k·kᵀ and q·kᵀ (c²·dk each), two
    unit-triangular solves (c(c−1)/2 · (dv + dk)), and against the state S·k, S·q, k·u (c·dk·dv
    each) and the scores times the writes (c²·dv). A decode step is the recurrent form:
    3 · dk · dv per head (read S with k, write k ⊗ u, read S with q)."""
    from ..model.delta_net import CHUNK

    n_linear = sum(cfg.linear_layer_flags)
    if not n_linear:
        return 0
    dk, dv, Hv = cfg.linear_k_head_dim, cfg.linear_v_head_dim, cfg.linear_v_heads
    conv = cfg.linear_conv_dim * cfg.linear_conv_kernel * seq_len
    if decode:
        rule = 3 * dk * dv * seq_len
    else:
        c, n = CHUNK, -(-seq_len // CHUNK)
        rule = n * (2 * c * c * dk + c * c * dv + 3 * c * dk * dv + c * (c - 1) // 2 * (dk + dv))
    return 2 * batch * n_linear * (conv + Hv * rule)


def pair_width(cfg: ModelConfig, absorbed: bool = False) -> int:
    """Multiply-adds per (query, key) pair and query head: QKᵀ over a q/k head (D) plus AV over
    a v head (Dv; both D but under MLA). ``absorbed``: MLA's decode over the cached latent
    (DeepSeek-V2 §2.1.2: W_UK folded into q, W_UV into the output): QKᵀ over Rkv + Dr, AV
    over Rkv."""
    s = Shapes.of(cfg)
    if absorbed and cfg.is_mla:
        return 2 * s.Rkv + s.Dr
    return s.D + s.Dv


def indexer_flops(cfg: ModelConfig, key_pairs: int) -> int:
    """DeepSeek Sparse Attention's lightning indexer over ``key_pairs`` (query, key) pairs per
    block (summed over queries): q_h·k over its Hi heads of Di, then the weighted sum over the
    heads, Hi · (Di + 1) multiply-adds per pair, in every attention block. Its projections (wq_b,
    wk, weights_proj) are among the attention projections. 0 without an indexer."""
    if not cfg.has_indexer:
        return 0
    return 2 * cfg.full_attention_layers * key_pairs * cfg.index_n_heads * (cfg.index_head_dim + 1)


def matmul_flops(cfg: ModelConfig, new_tokens: int, query_key_pairs: Pairs, absorbed: bool = False) -> dict:
    """Matmul FLOPs of one forward over ``new_tokens`` tokens (all sequences together) whose
    queries meet ``query_key_pairs`` keys in total (summed over queries, per head; a function
    of the window when blocks differ). A sparse block's FFN is its router plus the k experts
    each token is routed to and its shared experts. ``absorbed``: MLA attends over the latent
    (``pair_width``); its projections cost the same (W_UK and W_UV are kv_b_proj's rows)."""
    s = Shapes.of(cfg)
    C, H, F, L, V = s.C, s.H, s.F, s.L, s.V
    n_sparse, n_linear = sum(cfg.moe_layer_flags), sum(cfg.linear_layer_flags)
    sparse_ffn = s.K * 3 * C * s.Fe + 3 * C * s.Fs  # k routed experts + the shared ones
    if cfg.shared_expert_gate:
        sparse_ffn += C  # its gate: C → 1
    projections = s.attention_params * (L - n_linear) + linear_proj_params(cfg) * n_linear
    flops = {
        # q: C→H·D (and its gate), k and v: C→G·D, o: H·D→C (or MLA's projections), every
        # token and attention block; Gated DeltaNet blocks: their input projections and out_proj
        "attention_proj": 2 * new_tokens * projections,
        # QKᵀ and AV: 2 FLOPs per MAC × (D + Dv) MACs per (query, key) pair, every head and layer
        "attention_scores": 2 * sum(layer_pairs(cfg, query_key_pairs)) * pair_width(cfg, absorbed) * H,
        # dense blocks: gate/up C→F, down F→C; sparse blocks: k experts (gate/up C→Fe, down Fe→C)
        "ffn": 2 * new_tokens * (s.n_ffn_matrices * C * F * (L - n_sparse) + sparse_ffn * n_sparse),
        # C→V for every position (the model returns logits for all of them); none without a
        # head (BertModel returns the hidden states)
        "lm_head": 2 * new_tokens * C * V if cfg.lm_head else 0,
    }
    if n_sparse:
        flops["router"] = 2 * new_tokens * C * s.E * n_sparse  # C → E logits per token
    return flops


def elementwise_flops(cfg: ModelConfig, new_tokens: int, query_key_pairs: Pairs) -> dict:
    """Estimates of the element-wise work, with ELEMENTWISE_FLOPS_PER_ELEMENT."""
    k = ELEMENTWISE_FLOPS_PER_ELEMENT
    s = Shapes.of(cfg)
    C, H, G, D, F, L = s.C, s.H, s.G, s.D, s.F, s.L
    n_sparse = sum(cfg.moe_layer_flags)
    n_norms = (4 if cfg.norm_position == "sandwich" else 2) * L + cfg.final_norm + cfg.embed_norm
    gated = s.n_ffn_matrices == 3
    attention_biases = ((H + 2 * G) * D if cfg.qkv_bias else 0) + (C if cfg.o_bias else 0)
    ffn_biases = ((2 * F if gated else F) + C) if cfg.mlp_bias else 0  # a dense block's
    # gpt-oss: the router's bias, and each routed expert's gate/up and down biases
    expert_biases = s.E + s.K * (2 * s.Fe + C) if cfg.moe_style == "gpt_oss" else 0
    biases = L * attention_biases + (L - n_sparse) * ffn_biases + n_sparse * expert_biases
    qk_norm = new_tokens * (H + G) * D * cfg.full_attention_layers * k["rmsnorm"] if cfg.qk_norm else 0
    latent_norms = new_tokens * (s.Rq + s.Rkv) * L * k["rmsnorm"]  # MLA's two RMSNorms
    # MLA: q's rope parts, the one key; partial rotary (Phi-3, GLM) the first rope_dim of each head
    rotated = (H + 1) * s.Dr if cfg.is_mla else (H + G) * cfg.rope_dim
    terms = {
        "norms": n_norms * new_tokens * C * k[cfg.norm_type] + qk_norm + latent_norms,
        # + a sink per query and head (gpt-oss), + the router's (gpt-oss's: over its top k)
        "softmax": (
            sum(layer_pairs(cfg, query_key_pairs)) * H
            + (new_tokens * H * L if cfg.attention_sinks else 0)
            + new_tokens * (s.K if cfg.moe_style == "gpt_oss" else s.E) * n_sparse
        )
        * k["softmax"],
        "rope": new_tokens * rotated * sum(cfg.rope_layer_flags) * k["rope"],  # NoPE blocks: none
        "activation": new_tokens * (F * (L - n_sparse) + (s.K * s.Fe + s.Fs) * n_sparse) * k[cfg.ffn_type],
        "residual": 2 * L * new_tokens * C * k["residual"],
        "bias": new_tokens * biases * k["bias"],
        "position_add": (  # a position table, and BERT's segment row, added to the embeddings
            new_tokens
            * C
            * k["position_add"]
            * ((cfg.pos_encoding in ("learned", "sinusoidal")) + bool(cfg.type_vocab_size))
        ),
        "embed_scale": new_tokens * C * k["embed_scale"] if cfg.embed_scale else 0,
        "softcap": (
            (sum(layer_pairs(cfg, query_key_pairs)) * H if cfg.attn_softcap else 0)
            + (new_tokens * s.V if cfg.logit_softcap else 0)
        )
        * k["softcap"],
    }
    terms["total"] = sum(terms.values())
    return terms


def encoder_decoder_matmuls(
    cfg: ModelConfig, batch: int, seq_len: int, source_len: int, pairs: Pairs, decode: bool
) -> dict:
    """``matmul_flops`` of an encoder-decoder: ``seq_len`` target tokens per sequence whose
    self-attention meets ``pairs`` keys, over a source of ``source_len`` tokens. A forward runs
    the encoder over the source and projects each decoder block's cross-attention K and V from
    it; a decode step (``decode``) reads both from the caches."""
    s = Shapes.of(cfg)
    T, S = batch * seq_len, batch * source_len  # tokens of all sequences
    flops = matmul_flops(decoder_stack(cfg), T, pairs)
    if not decode:
        encoder = matmul_flops(encoder_stack(cfg), S, batch * source_len * source_len)
        for key in ("attention_proj", "attention_scores", "ffn"):
            flops[key] += encoder[key]
    L, C = s.L, s.C
    # cross-attention: q (C → H·D) and o (H·D → C) per target token; k, v (C → G·D) per source token
    flops["attention_proj"] += 2 * L * (T * 2 * C * s.q_dim + (0 if decode else S * 2 * C * s.kv_dim))
    # QKᵀ and AV over every (target, source) pair, every head and decoder block
    flops["attention_scores"] += 2 * L * T * source_len * pair_width(cfg) * s.H
    return flops


def elementwise(cfg: ModelConfig, phase: str, batch: int, tokens: int, pairs: Pairs, source_len: int) -> dict:
    """``elementwise_flops`` of the model: an encoder-decoder's decoder blocks over the target,
    and (a forward) its encoder's over the source."""
    if not cfg.is_encoder_decoder:
        return elementwise_flops(cfg, tokens, pairs)
    terms = elementwise_flops(decoder_stack(cfg), tokens, pairs)
    if phase != "decode":
        encoder = elementwise_flops(encoder_stack(cfg), batch * source_len, batch * source_len**2)
        terms = {key: value + encoder[key] for key, value in terms.items()}
    return terms


# How an MLA model decodes (DeepSeek-V2 §2.1.2): over its cached latent with W_UK and W_UV
# absorbed (serving engines); with the up-projected per-head K and V cached (early
# implementations: the naive cache); or with the latent cached and every head's K and V rebuilt
# from all of it at each step (transformers 5).
MLA_FORMS = ("absorbed", "naive", "rebuilt")


def _flop_count(
    cfg, phase, batch, seq_len, context_len, pairs, causal_pairs, mla_form="absorbed", source_len=None
) -> FlopCount:
    tokens = batch * seq_len
    absorbed = phase == "decode" and mla_form == "absorbed"  # MLA over its cached latent

    def matmuls(query_key_pairs: Pairs) -> dict:
        if cfg.is_encoder_decoder:
            source = context_len if source_len is None else source_len
            return encoder_decoder_matmuls(cfg, batch, seq_len, source, query_key_pairs, phase == "decode")
        return matmul_flops(cfg, tokens, query_key_pairs, absorbed)

    by_component = matmuls(pairs)
    if cfg.has_linear_attention:  # Gated DeltaNet: the convolution and the delta rule
        by_component["delta_rule"] = delta_rule_flops(cfg, batch, seq_len, phase == "decode")
    if cfg.pooler:  # BERT's pooler: dense C → C on each sequence's first token
        by_component["pooler"] = 2 * batch * Shapes.of(cfg).C ** 2
    if phase == "decode" and mla_form == "rebuilt" and cfg.is_mla:  # kv_b over every cached latent
        s = Shapes.of(cfg)
        kv_b = s.Rkv * s.H * (s.D - s.Dr + s.Dv)
        by_component["kv_rebuild"] = 2 * sum(layer_pairs(cfg, pairs)) * kv_b
    # DSA: the indexer scores every earlier key (a forward over T tokens: all T×T pairs as
    # transformers computes them, T(T+1)/2 causally; a decode step: the S cached keys)
    index_full = batch * seq_len * context_len
    index_causal = batch * seq_len * (seq_len + 1) // 2 if phase == "forward" else index_full
    if cfg.has_indexer:
        by_component["indexer_scores"] = indexer_flops(cfg, index_full)
    forward = sum(by_component.values())
    causal_scores = matmuls(causal_pairs)["attention_scores"]
    causal_indexer = indexer_flops(cfg, index_causal) - indexer_flops(cfg, index_full)
    n_palm = palm_params(cfg)
    # 6N: forward 2N + backward 4N per token; 12·L·H·Q·T: 3 × (QKᵀ + AV) over the keys each
    # block's last query attends (T, or its window)
    s = Shapes.of(cfg)
    keys = last_query_keys(cfg, context_len)
    palm = 6 * n_palm + 6 * s.H * (s.D + s.Dv) * keys  # 12·H·Q when q/k and v heads are alike
    return FlopCount(
        phase=phase,
        batch=batch,
        seq_len=seq_len,
        context_len=context_len,
        tokens=tokens,
        forward=forward,
        per_token=forward / tokens,
        training_step=3 * forward,
        training_per_token=3 * forward / tokens,
        by_component=by_component,
        attention_scores_causal=causal_scores,
        forward_causal=forward - by_component["attention_scores"] + causal_scores + causal_indexer,
        elementwise=elementwise(
            cfg, phase, batch, tokens, pairs, context_len if source_len is None else source_len
        ),
        elementwise_constants=dict(ELEMENTWISE_FLOPS_PER_ELEMENT),
        palm_params=n_palm,
        palm_training_per_token=palm,
        conventions=FLOP_CONVENTIONS + [f"N (palm_params) = {n_palm:,} for this model."],
    )


def last_query_keys(cfg: ModelConfig, context_len: int) -> int:
    """The keys the last of ``context_len`` queries attends, summed over the attention blocks
    (PaLM's T per block): T, or a window's min(T, W), or a sparse pattern's row of its mask
    (Gated DeltaNet blocks attend none)."""
    local, full = sum(cfg.local_layer_flags), cfg.full_attention_layers
    if cfg.sparse_pattern is not None:
        window = int(row_keys(cfg.sparse_pattern, [context_len - 1])[0])
    else:
        window = min(context_len, cfg.sliding_window or context_len)
    return local * window + (full - local) * context_len


def attended_keys(cfg: ModelConfig, keys: int) -> int:
    """Of ``keys`` earlier keys (its own included), how many a query of a full-attention block
    attends: all, or (DeepSeek Sparse Attention) at most index_topk."""
    return min(keys, cfg.index_topk) if cfg.has_indexer else keys


def count_flops(cfg: ModelConfig, seq_len: int, batch: int = 1, source_len: int | None = None) -> FlopCount:
    """One forward pass over B sequences of T tokens (no cache); an encoder-decoder's over a
    source of ``source_len`` tokens (None: T) and a target of T."""
    check_seq(seq_len, batch)
    if source_len is not None:
        check_seq(source_len, batch)
    T = seq_len

    chunked, sparse = cfg.chunked_attention, cfg.sparse_pattern

    def full(window):  # every query meets all T keys, or the W of its window (its chunk's)
        if window and sparse:  # a masked dense kernel over all T keys
            return batch * T * T
        if window and chunked:
            return batch * sum(n * n for n in chunk_lengths(T, window))
        return batch * T * min(T, window or T)

    def causal(window):  # only keys ≤ its own position: T(T+1)/2, or capped at W each (DSA:
        if not cfg.causal:  # its index_topk keys, the same cap); a bidirectional encoder (BERT):
            return batch * T * T  # every query meets all T keys
        if window and sparse:  # the pairs a pattern's mask allows
            return batch * causal_pairs(sparse, T)
        if window and chunked:
            return batch * sum(n * (n + 1) // 2 for n in chunk_lengths(T, window))
        W = min(T, window or attended_keys(cfg, T))
        return batch * (W * (W + 1) // 2 + (T - W) * W)

    return _flop_count(cfg, "forward", batch, T, T, full, causal, source_len=source_len)


# The training FLOPs every MFU and achieved FLOP/s of the lab counts — the Live pass, ``bench``,
# ``train``, ``predict train``, the Many GPUs page, the Validation rows and the report — chosen
# once: the convention of the public MFU figures the Validation page compares against.
# - PaLM (Chowdhery et al. 2022, App. B) defines MFU by the forward and backward passes' FLOPs,
#   6N + 12·L·H·Q·T per token: the scores over all T keys, rematerialisation not counted.
# - torchtitan (pytorch/torchtitan, torchtitan/utils.py @ 9dec370ad26b5f8e9a7333a0e36165018262644b,
#   the commit its benchmarks ran; get_num_flop_per_token): "recomputation should not be counted
#   in calculating MFU", "we follow the convention and do not account for sparsity in causal
#   attention", flop_per_token = 6 * num_params + 12 * l * h * q * t (the embedding excluded).
# - llm-foundry (mosaicml/llm-foundry, scripts/train/benchmarking/README.md @ 061f2c7ce64e; the
#   rows quote the same at 8c8dd48f7216, its MFU column): 3 passes of the forward with
#   attn_flops_per_seq = n_layers * 2 * 2 * (d_model * (seq_len**2)); MFU "does not account for
#   the additional compute required for other implementation details such as activation
#   checkpointing".
# - Megatron-LM (Narayanan et al. 2021, App. "Floating-point operations": 72·B·s·l·h²·(1 + s/6h
#   + V/12lh)) counts the full scores too; Megatron-Bridge's "Model TFLOP/s" does not
#   (NVIDIA-NeMo/Megatron-Bridge, src/megatron/bridge/training/utils/flop_utils.py @ df0289c180dd,
#   "Only half of the attention matrix is non-zero and needs to be multiplied with V."): the
#   Validation rows show its figure beside ours.
# What the kernels actually run (the causal half, recomputation's extra forward) is the time
# model's count, validation.efficiency.train_flops_split, never an MFU.
MFU_CONVENTION = (
    "model FLOPs (PaLM App. B, as torchtitan and llm-foundry count them): 3 × the forward's "
    "matmuls, attention scores over the full T×T, recomputation not counted; MFU against the "
    "dense peak"
)


def model_flops(cfg: ModelConfig, seq_len: int, batch: int = 1) -> int:
    """FLOPs of one training step over ``batch`` sequences of ``seq_len`` tokens as every MFU
    and achieved FLOP/s in the lab counts them (``MFU_CONVENTION``): ``count_flops``'s
    training_step, 3 × the forward with the scores over the full T×T (per token 6N + 12·L·H·Q·T
    for a dense LLaMA, N without the embedding table, the lm_head counted)."""
    return count_flops(cfg, seq_len, batch).training_step


def scores_overtake_ffn_at(cfg: ModelConfig, upper: int | None = None) -> int | None:
    """The shortest sequence length at which the attention-score FLOPs (QKᵀ and AV, full T×T)
    exceed the FFN's, found by bisection on ``analysis.count_flops`` (scores grow as T², the FFN
    as T); None if it does not happen up to ``upper`` (default: the largest allowed length)."""
    upper = upper or LIMITS["max_seq_len"]

    def overtaken(seq_len: int) -> bool:
        parts = count_flops(cfg, seq_len).by_component
        return parts["attention_scores"] > parts["ffn"]

    return first_true(overtaken, 1, upper)


def decode_flops(
    cfg: ModelConfig,
    context_len: int,
    batch: int = 1,
    mla_form: str = "absorbed",
    source_len: int | None = None,
) -> FlopCount:
    """One new token per sequence attending ``context_len`` keys (the cache plus itself):
    projections, FFN and lm_head for B tokens, scores over S keys. Nothing is masked, so the
    causal and full counts agree. training_step is kept as 3 × forward by definition. An MLA
    model decodes in ``mla_form`` (MLA_FORMS; "rebuilt" adds kv_b over the S cached latents as
    ``kv_rebuild``). An encoder-decoder's token also cross-attends to a source of
    ``source_len`` tokens (None: context_len) whose K and V are cached."""
    check_seq(context_len, batch)
    if source_len is not None:
        check_seq(source_len, batch)
    if mla_form not in MLA_FORMS:
        raise AnalysisError(f"mla_form={mla_form!r} must be one of {', '.join(MLA_FORMS)}")

    sparse = cfg.sparse_pattern

    def pairs(window):  # one query per sequence meets S keys, or its window's (its chunk's),
        if window and sparse:  # or (DSA) its index_topk; a pattern: the keys its cache holds
            return batch * min(context_len, (sparse.cache_tokens or context_len) + 1)  # and its own
        if window and cfg.chunked_attention:
            return batch * ((context_len - 1) % window + 1)
        return batch * (min(context_len, window) if window else attended_keys(cfg, context_len))

    def causal(window):  # a sparse pattern's row of the mask: the keys it allows
        if window and sparse:
            return batch * int(row_keys(sparse, [context_len - 1])[0])
        return pairs(window)

    return _flop_count(cfg, "decode", batch, 1, context_len, pairs, causal, mla_form, source_len)


def score_flops_against_t(cfg: ModelConfig, lengths) -> pd.DataFrame:
    """The causal score FLOPs (``attention_scores_causal``) of one sequence per length T: the
    model with dense causal attention in every block (quadratic in T) beside its own pattern
    (windows, global tokens, dilation, random blocks: linear in T once past them)."""
    dense = cfg.replace(
        sliding_window=0,
        chunked_attention=False,
        global_tokens=0,
        random_blocks=0,
        dilation=1,
        sparse_block_size=64,
        sparse_seed=0,
    )
    rows = [
        {
            "T": T,
            "dense causal": count_flops(dense, T).attention_scores_causal,
            "pattern": count_flops(cfg, T).attention_scores_causal,
        }
        for T in lengths
    ]
    return pd.DataFrame(rows, columns=["T", "dense causal", "pattern"])
