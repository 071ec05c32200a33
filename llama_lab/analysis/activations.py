"""Activations: the tensors our implementation saves for backward, block by block (attention,
MLA, Gated DeltaNet, the FFN or experts, the loss head), plain or with activation checkpointing,
on one tensor-parallel rank. ``memory`` adds them to the weights and states of training."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ..config import ModelConfig, require_decoder_only
from ..errors import AnalysisError
from .common import (
    INT64_BYTES,
    STATS_BYTES,
    TRAINING_DTYPES,
    check_count,
    check_seq,
    check_source_len,
    checked_dtype_bytes,
    nbytes,
)
from .kv import kv_heads_per_gpu
from .params import norms_per_block
from .shapes import Shapes


@dataclass(frozen=True)
class ActivationEstimate:
    dtype: str
    seq_len: int
    batch: int
    checkpointing: bool
    per_layer: int  # bytes one block saves for backward
    components: dict[str, int]
    total_bytes: int
    assumptions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


ACTIVATION_ASSUMPTIONS = [
    "Counts the tensors autograd saves for backward in llama_lab.model with every parameter in "
    "`dtype` (model.to(dtype), no autocast), each storage once, parameters excluded, for the "
    "model's own loss (loss='chunked': model.loss, the LM head and cross-entropy in chunks, "
    "which keeps the gradients of the hidden states (N·C) and of the head's weight (V·C), never "
    "the N·V logits) or F.cross_entropy on the logits (loss='logits': the lm_head input and "
    "the N·V log-probabilities), or transformers' ForCausalLMLoss (loss='upcast': the logits "
    "held by the model's output, upcast to float32 before F.cross_entropy, whose float32 "
    "log-probabilities are saved).",
    "Attention runs in a fused SDPA kernel (flash / CPU flash): it saves q, k, v (G heads, not "
    "repeated), its output and a float32 logsumexp (B·H·T) - never the T×T weights.",
    "RMSNorm saves its input and rstd (float32, one per row; backward recomputes x·rstd); "
    "LayerNorm saves its input and float32 mean/rstd (the CPU kernel keeps them in the input "
    "dtype: a few bytes per token less). A norm's output is saved by the linear layers that "
    "read it. QK-norm's inputs are views of the q/k/v projection's output, which they keep "
    "whole (SDPA's v is a view of it too).",
    "SwiGLU and GeGLU save the fused gate/up output and the product (3·F per token: the "
    "activation of the gate is recomputed in backward); ReLU its output; GELU its input and output.",
    "Sandwich blocks (Gemma) save four norms' inputs and rstd; attention with sinks or soft-capped "
    "scores runs as plain matmuls, saving the softmax (and the cap's tanh), never fused.",
    "RoPE saves cos and sin (T×D): the model's tables, built once per device for the longest "
    "length used (T in a training step), in float32; or one cast copy per use in 16-bit dtypes.",
    "checkpointing = torch.utils.checkpoint around every block: the block inputs stay, plus one "
    "block's activations while it is recomputed in backward.",
    "An encoder-decoder (model.encoder_decoder, the 2017 Transformer): the source ids (source_len "
    "tokens, as many as the target unless given) and the target ids, the encoder's blocks over "
    "the source (saved as a "
    "decoder block's: bidirectional SDPA keeps the same tensors), the encoder's output once "
    "(every decoder block's k_proj and v_proj read it), each decoder block with its "
    "cross-attention, and its own loss, F.cross_entropy on the logits (+ final_logits_bias, "
    "which saves nothing). A bare encoder (BERT, lm_head=False): its embedding LayerNorm, the "
    "blocks, and the pooler's input (a view keeping the last hidden state) and tanh's output; "
    "no LM head, task head or loss. Both without checkpointing or tensor parallelism (refused).",
    "Gated DeltaNet blocks (Qwen3-Next, Qwen3.5): the tensors of the chunked rule over the "
    "sequence padded to whole chunks of 64 (float32), the convolution's input and output, the "
    "gates and the gated norm; equal to saved-tensor hooks on the tested shapes (T = 5 to 130: "
    "one chunk, whole chunks, a partial last chunk).",
]


def _norm_saved_bytes(cfg: ModelConfig, tokens: int, b: float) -> int:
    C = Shapes.of(cfg).C
    if cfg.norm_type == "rmsnorm":
        return nbytes(tokens * C, b) + STATS_BYTES * tokens  # input + rstd
    return nbytes(tokens * C, b) + 2 * STATS_BYTES * tokens  # input + mean, rstd


def _ffn_saved_bytes(cfg: ModelConfig, tokens: int, b: float, sparse: bool, tp: int = 1) -> int:
    """What one block's FFN saves beyond its input, on one of ``tp`` tensor-parallel ranks (the
    hidden width F, or each expert's Fe, split across them; the router replicated). Dense
    SwiGLU: the gate/up output and the product (3·F per token); ReLU its output; GELU input
    and output. Sparse: the router's float32 softmax (E per token), top-k indices (int64), the
    renormalisation's weights and sum (float32), and per (token, expert) slot the gathered
    input, gate/up (2·Fe) and the product (Fe: ``kernels.swiglu`` recomputes silu), the expert's
    output and its weighted copy (2·C), the weight and two int64 indices."""
    s = Shapes.of(cfg)
    if not sparse:
        F = s.F // tp
        per_token = {"swiglu": 3 * F, "geglu": 3 * F, "relu": F, "gelu": 2 * F, "silu": 2 * F}[cfg.ffn_type]
        return nbytes(tokens * per_token, b)
    slots = tokens * s.K
    if cfg.moe_style == "gpt_oss":
        # the top-k indices and the softmax over the k logits (in the dtype); per slot the
        # gathered input, gate/up (2·Fe) and five Fe-wide steps of the clamped SwiGLU (the
        # clamped gate, σ(α·g), g·σ, up + 1, the product), the output and its weighted copy
        per_slot = nbytes(3 * s.C + 7 * s.Fe + 1, b) + 2 * INT64_BYTES
        return INT64_BYTES * slots + nbytes(slots, b) + slots * per_slot
    if cfg.moe_style == "llama4":  # σ of the k chosen logits in float32, not a softmax over E
        router = STATS_BYTES * slots + INT64_BYTES * slots
    else:
        router = STATS_BYTES * tokens * s.E + INT64_BYTES * slots
    if cfg.moe_renormalize:
        router += STATS_BYTES * (slots + tokens)
    per_slot = nbytes(3 * s.C + 3 * (s.Fe // tp) + 1, b) + 2 * INT64_BYTES
    shared = nbytes(tokens * 3 * (s.Fs // tp), b)  # the shared experts: a SwiGLU of width Fs
    if cfg.shared_expert_gate:  # Qwen: σ(gate) (1 per token) and the shared expert's output (C)
        shared += nbytes(tokens * (s.C + 1), b)
    # sigmoid scores come from float32 logits: float32 copies of a 16-bit input and of the
    # router's weight (E × C) are saved
    deepseek_sigmoid = cfg.moe_scoring == "sigmoid" and cfg.moe_style == "standard"
    upcast = STATS_BYTES * (tokens + s.E) * s.C if deepseek_sigmoid and b != STATS_BYTES else 0
    return router + slots * per_slot + shared + upcast


def block_saved(
    cfg: ModelConfig,
    layer: int,
    B: int,
    T: int,
    b: float,
    dtype: str,
    tp: int = 1,
    sequence_parallel: bool = False,
) -> dict:
    """The tensors block ``layer`` saves for backward, by part, on one of ``tp`` tensor-parallel
    ranks (Megatron's split: the query heads, the KV heads and the FFN width divided by tp; the
    block input, the norms and the linear layers' inputs replicated — or, with
    ``sequence_parallel``, each rank's T/tp positions of them)."""
    if cfg.linear_layer_flags[layer]:
        return _linear_block_saved(cfg, layer, B, T, b, tp, sequence_parallel)
    if cfg.is_mla:
        return _mla_block_saved(cfg, layer, B, T, b, dtype, tp, sequence_parallel)
    s = Shapes.of(cfg)
    N, C, D = B * T, s.C, s.D
    H, G = s.H // tp, kv_heads_per_gpu(cfg, tp)
    kv_heads_saved = G  # SDPA broadcasts the KV heads (enable_gqa): K and V saved as G heads
    window = cfg.window_of(layer)
    n_rep = math.ceil(N / tp) if sequence_parallel else N  # rows of the replicated tensors
    return {
        "norms": norms_per_block(cfg) * _norm_saved_bytes(cfg, n_rep, b),
        # QK-norm keeps the q/k/v output whole through its q and k views (less v when SDPA's
        # own v is that view, counted under qkv) and one rstd per head row
        "qk_norm": (
            _rope_l2_saved(cfg, layer, N, H, G)
            if cfg.qk_norm_scope == "rope_l2"
            else nbytes(N * (H * (2 if cfg.attn_output_gate else 1) + 2 * G) * D, b)  # (q_proj: and its gate)
            - (nbytes(N * G * D, b) if kv_heads_saved == G else 0)
            + STATS_BYTES * N * ((H + G) if cfg.qk_norm_scope == "head" else 2)
            if cfg.qk_norm
            else 0
        ),
        # Llama 4's NoPE blocks: q × its positions' factors (float32, T) is a new tensor, so
        # SDPA's q is no longer a view of the q/k/v output, which k and v keep alive (a rotated
        # q is a new tensor anyway: the product replaces it)
        "temperature": (
            (0 if cfg.rope_layer_flags[layer] else nbytes(N * H * D, b)) + STATS_BYTES * T
            if cfg.temperature_layer_flags[layer]
            else 0
        ),
        "attention_input": nbytes(n_rep * C, b),  # read by q, k, v
        "qkv": nbytes(N * (H + 2 * kv_heads_saved) * D, b),  # saved by SDPA
        **(
            _matmul_saved(cfg, B, T, H, D, b)
            if cfg.attention_sinks or cfg.attn_softcap
            else _sdpa_saved(
                B, T, H, D, b, window is not None and (window < T or cfg.sparse_pattern is not None)
            )
        ),
        # gated attention (Qwen3-Next): σ(gate) and the gated output (o_proj's input)
        "output_gate": 2 * nbytes(N * H * D, b) if cfg.attn_output_gate else 0,
        # 16-bit: cos and sin cast afresh for q and for k
        "rope_casts": _rope_casts(cfg, T, b, dtype) if cfg.rope_layer_flags[layer] else 0,
        "ffn_input": nbytes(n_rep * C, b),  # read by gate/up (or the router)
        "ffn_hidden": _ffn_saved_bytes(cfg, N, b, cfg.moe_layer_flags[layer], tp),
    }


def cross_attention_saved(cfg: ModelConfig, B: int, T: int, S: int, b: float) -> dict:
    """What a decoder block's cross-attention (``model.encoder_decoder``) saves beyond the block
    ``block_saved`` counts, by part: its norm's input and statistics, q_proj's input (the
    previous norm's output), q over the T target tokens and K, V over the S source tokens (G
    heads each: k_proj's and v_proj's outputs, read by SDPA; their input, the encoder's output,
    is counted once for all blocks), SDPA's output and logsumexp over the queries. Unmasked, as
    every query sees every key."""
    s = Shapes.of(cfg)
    N, H, G, D = B * T, s.H, s.G, s.D
    return {
        "cross_norm": _norm_saved_bytes(cfg, N, b),
        "cross_query_input": nbytes(N * s.C, b),
        "cross_qkv": nbytes(N * H * D + 2 * B * S * G * D, b),
        "cross_output": _sdpa_saved(B, T, H, D, b, False)["attention_output"],
    }


def _rope_l2_saved(cfg: ModelConfig, layer: int, N: int, H: int, G: int) -> int:
    """Llama 4's QK-norm after RoPE (a rotated block only): ``F.rms_norm`` of the rotated q and
    k in float32 keeps that float32 input and one rstd per head row, (H + G)·(D + 1) float32
    values per token, whatever the dtype."""
    return STATS_BYTES * N * (H + G) * (Shapes.of(cfg).D + 1) if cfg.rope_layer_flags[layer] else 0


def _sdpa_saved(B: int, T: int, H: int, D: int, b: float, masked: bool) -> dict:
    """SDPA's output (also o_proj's input: same storage) and its float32 logsumexp; ``masked``
    (a window shorter than T, or any sparse pattern: an explicit mask), the (T, T) mask it
    keeps, converted to the dtype."""
    return {
        "attention_output": nbytes(B * T * H * D, b) + STATS_BYTES * B * H * T,
        "window_mask": nbytes(T * T, b) if masked else 0,
    }


def _matmul_saved(cfg: ModelConfig, B: int, T: int, H: int, D: int, b: float) -> dict:
    """Attention as plain matmuls (``model.attention.matmul_attention``): with sinks the softmax
    over T keys and the sink (B·H·T·(T+1)); else the softmax (B·H·T·T) and, with soft-capped
    scores, their tanh (B·H·T·T); o_proj's input (the output, made contiguous) and the (T, T)
    boolean mask."""
    probs = B * H * T * (T + 1) if cfg.attention_sinks else B * H * T * T
    tanh = B * H * T * T if cfg.attn_softcap else 0
    return {"attention_output": nbytes(probs + tanh + B * T * H * D, b), "window_mask": T * T}


def _rope_casts(cfg: ModelConfig, T: int, b: float, dtype: str) -> int:
    """16-bit: cos and sin cast afresh for q and for k, over the rotated width (interleaved
    RoPE casts the half it uses)."""
    if cfg.pos_encoding != "rope" or dtype == "fp32":
        return 0
    return nbytes(4 * T * (cfg.rope_dim // 2 if cfg.rope_interleave else cfg.rope_dim), b)


def _mla_block_saved(
    cfg: ModelConfig, layer: int, B: int, T: int, b: float, dtype: str, tp: int, sequence_parallel: bool
) -> dict:
    """What an MLA block saves (``model.mla``, no cache: every head's K and V rebuilt): its
    input; q's bottleneck (q_a's output, its norm's rstd and output); kv_a's output (the latent's
    norm saves it whole, a view), the rstd and the normalised latent (kv_b's input); the
    rebuilt q and k (H·D each) and v zero-padded to their width (the fused kernel takes one
    head width: ``model.attention.causal_attention``), SDPA's padded output and logsumexp, and
    o_proj's input (the output cut to Dv, made contiguous); then the FFN. The latent projections
    are replicated under tensor parallelism, the heads split."""
    s = Shapes.of(cfg)
    N, C, H = B * T, s.C, s.H // tp
    n_rep = math.ceil(N / tp) if sequence_parallel else N  # rows of the replicated tensors
    q_path = 2 * nbytes(N * s.Rq, b) + STATS_BYTES * N if s.Rq else 0
    return {
        "norms": norms_per_block(cfg) * _norm_saved_bytes(cfg, n_rep, b),
        "attention_input": nbytes(n_rep * C, b),  # read by q (or q_a) and kv_a
        "latent": q_path + nbytes(N * (2 * s.Rkv + s.Dr), b) + STATS_BYTES * N,
        "qkv": nbytes(N * H * (2 * s.D + max(s.D, s.Dv)), b),  # q, k, v padded to one width
        # SDPA's output (padded) and its logsumexp; o_proj's input, the output cut to Dv
        "attention_output": nbytes(N * H * (max(s.D, s.Dv) + s.Dv), b) + STATS_BYTES * B * H * T,
        "rope_casts": _rope_casts(cfg, T, b, dtype),
        "ffn_input": nbytes(n_rep * C, b),
        "ffn_hidden": _ffn_saved_bytes(cfg, N, b, cfg.moe_layer_flags[layer], tp),
    }


def _linear_block_saved(
    cfg: ModelConfig, layer: int, B: int, T: int, b: float, tp: int, sequence_parallel: bool
) -> dict:
    """What a Gated DeltaNet block saves (``model.delta_net``, no cache), by part: its input
    (in_proj's); the convolution's input (K − 1 zeros, then the T tokens) and output (SiLU's
    input); β, the decay's softplus in and out and exp(A_log) (float32); q and k repeated to the
    Hv value heads and their L2 norms' inputs and rstd (float32); then the chunked rule over
    Tp = n·64 padded tokens, all float32: the causal mask (bool), the pairwise decay, k·kᵀ and
    q·kᵀ (c per token and head each), the padded q, k, v and β, k·β, e^Γ and e^{Γ_c − Γ},
    the triangular system and its solution (dk + dv), the decayed scores, k decayed to the
    chunk's end, and per chunk the state entering it and its writes u (q decayed too once a
    chunk follows a state that carries gradient); then the gated norm: its float32 input and
    rstd, x̂ and γ·x̂ (the dtype), z's float32 copy and SiLU(z), and out_proj's input. Gated
    DeltaNet blocks are replicated under tensor parallelism (``analysis.parallel``)."""
    from ..model.delta_net import CHUNK

    del tp, sequence_parallel  # replicated: every rank holds the whole block and its rows
    s = Shapes.of(cfg)
    N, C, f, c = B * T, s.C, 4, CHUNK
    n = -(-T // c)
    Hv, dk, dv, K = cfg.linear_v_heads, cfg.linear_k_head_dim, cfg.linear_v_head_dim, cfg.linear_conv_kernel
    P, PT, Vd = B * Hv * n * c, B * Hv * T, cfg.linear_value_dim
    n_rep = N  # replicated: no rank's share of the rows either (sequence parallelism is not applied)
    rule = (
        c * c  # the bool causal mask
        # decay, k·kᵀ, the system, q·kᵀ, the scores (c each); β, e^Γ, e^{Γ_c − Γ}; q, k, k·β, k
        # to the chunk's end (dk each); v; the solution (dk + dv)
        + f * P * (5 * c + 3 + 4 * dk + dv + (dk + dv))
        + f * (P * dk if n > 1 else 0)  # q decayed, read against a state that carries gradient
        + f * n * B * Hv * (dk * dv + c * dv)  # per chunk: the state entering it, its writes
    )
    return {
        "norms": norms_per_block(cfg) * _norm_saved_bytes(cfg, n_rep, b),
        "attention_input": nbytes(n_rep * C, b),  # read by in_proj
        "linear_conv": nbytes(B * cfg.linear_conv_dim * (2 * T + K - 1), b),  # its input and output
        "linear_gates": nbytes(N * Hv, b) + f * (2 * N * Hv + 2 * Hv),  # β; softplus in, out; A
        "linear_qk_norm": 2 * f * PT * (dk + 1),  # q and k at Hv heads, their rstd
        "delta_rule": rule,
        # the gated norm: float32 input, rstd, z's copy and SiLU(z); x̂, γ·x̂, out_proj's input
        "linear_norm": f * (3 * N * Vd + N * Hv) + 3 * nbytes(N * Vd, b),
        "ffn_input": nbytes(n_rep * C, b),
        "ffn_hidden": _ffn_saved_bytes(cfg, N, b, cfg.moe_layer_flags[layer], 1),
    }


LOSS_PATHS = ("chunked", "logits", "upcast")


def head_saved(cfg: ModelConfig, N: int, b: float, loss: str, tp: int = 1) -> int:
    """What the loss head saves on one of ``tp`` ranks (a vocabulary-parallel head holds V/tp
    rows): the final norm's tensors, then for the chunked loss its two gradients, for
    F.cross_entropy the lm_head input, the log-probabilities, the targets and nll_loss's total
    weight; for transformers' ForCausalLMLoss ("upcast": ``logits = logits.float()`` before
    F.cross_entropy, transformers ``loss/loss_utils.py``) the logits in the dtype, which the
    model's output holds, and float32 log-probabilities."""
    if loss not in LOSS_PATHS:
        raise AnalysisError(f"loss={loss!r} must be one of {', '.join(LOSS_PATHS)}")
    s = Shapes.of(cfg)
    norm = _norm_saved_bytes(cfg, N, b) if cfg.final_norm else 0
    V = math.ceil(s.V / tp)
    if loss == "chunked":
        return norm + nbytes(N * s.C, b) + nbytes(V * s.C, b)
    logits = (2 if cfg.logit_softcap else 1) * N * V
    probs = nbytes(N * V, 4) if loss == "upcast" else 0  # the float32 log-probabilities
    return norm + nbytes(N * s.C, b) + nbytes(logits, b) + probs + INT64_BYTES * N + math.ceil(b)


def bare_encoder_head_saved(cfg: ModelConfig, B: int, T: int, b: float) -> int:
    """A bare encoder (``lm_head=False``, BertModel) has no LM head and no loss of its own: what
    a task head reads is its last hidden state and, with a pooler, the pooled output
    (``model.pooled``, tanh of the dense layer on each sequence's first token). Saved: the final
    norm's tensors (if any); the pooler's input, a view of the last hidden state that keeps it
    whole (B·T·C), and tanh's output (B·C). A task head's own tensors are not counted."""
    s = Shapes.of(cfg)
    norm = _norm_saved_bytes(cfg, B * T, b) if cfg.final_norm else 0
    return norm + (nbytes(B * T * s.C + B * s.C, b) if cfg.pooler else 0)


def _rope_tables_used(cfg: ModelConfig) -> int:
    """RoPE tables the blocks read: one, or two when windowed and global blocks rotate with
    different bases (Gemma 3); none when no block rotates."""
    windowed = [w for w, rotated in zip(cfg.local_layer_flags, cfg.rope_layer_flags) if rotated]
    if not windowed:  # NoPE everywhere
        return 0
    return 1 if cfg.rope_local_theta == cfg.rope_theta else len(set(windowed))


def activation_estimate(
    cfg: ModelConfig,
    seq_len: int,
    batch: int,
    dtype: str = "fp32",
    checkpointing: bool = False,
    loss: str = "chunked",
    tp: int = 1,
    sequence_parallel: bool = False,
    source_len: int | None = None,
) -> ActivationEstimate:
    """What autograd saves in one forward over ``batch`` × ``seq_len`` tokens, on one of ``tp``
    tensor-parallel ranks (1: the whole model); an encoder-decoder's encoder over a source of
    ``source_len`` tokens (None: ``seq_len``)."""
    check_seq(seq_len, batch)
    S = check_source_len(cfg, seq_len, source_len)
    check_count("tp", tp, Shapes.of(cfg).H)
    b = checked_dtype_bytes(dtype, TRAINING_DTYPES)
    B, T, N = batch, seq_len, batch * seq_len
    encoder = cfg.is_encoder_decoder or not cfg.lm_head
    if encoder and (checkpointing or tp > 1 or sequence_parallel):
        model = "an encoder-decoder" if cfg.is_encoder_decoder else "a bare encoder (lm_head=False)"
        raise AnalysisError(
            f"activations of {model} are modelled without activation checkpointing or tensor "
            f"parallelism (checkpointing={checkpointing}, tp={tp}, sequence_parallel={sequence_parallel})"
        )
    s = Shapes.of(cfg)
    C, L = s.C, s.L
    rope = cfg.pos_encoding == "rope"

    # blocks come in few kinds: (window, sparse, rotated, Gated DeltaNet, temperature); a NoPE
    # attention block and a linear block are both unrotated, so the fourth flag tells them apart
    def kind(layer: int) -> tuple[int | None, bool, bool, bool, bool]:
        moe, rope, linear = cfg.moe_layer_flags, cfg.rope_layer_flags, cfg.linear_layer_flags
        return (
            cfg.window_of(layer),
            moe[layer],
            rope[layer],
            linear[layer],
            cfg.temperature_layer_flags[layer],
        )

    kinds: dict[tuple[int | None, bool, bool, bool, bool], list[int]] = {}
    for layer in range(L):
        kinds.setdefault(kind(layer), [layer, 0])[1] += 1
    saved = {
        key: sum(block_saved(cfg, first, B, T, b, dtype, tp, sequence_parallel).values())
        for key, (first, _) in kinds.items()
    }
    per_layer = saved[kind(0)]
    table = 2 * T * cfg.rope_dim * 4 if rope and dtype == "fp32" else 0  # one (cos, sin), float32
    # checkpointed: the block recomputed at a time that saves the most, with the table it reads
    heaviest = max(saved, key=lambda key: saved[key] + table * key[2])

    def ids(tokens: int) -> int:  # a sequence's token ids, and its position ids if learned
        return INT64_BYTES * B * tokens + (INT64_BYTES * tokens if cfg.pos_encoding == "learned" else 0)

    components = {
        # an encoder-decoder's source ids (and positions) too
        "token_ids": ids(T) + (ids(S) if cfg.is_encoder_decoder else 0),
        # all layers' one (cos, sin), or two where windowed layers rotate with their own base
        # (checkpointed: the one block recomputed at a time holds its own, if it rotates)
        "rope_tables": table * (heaviest[2] if checkpointing else _rope_tables_used(cfg)),
        # BERT: the LayerNorm on the summed embeddings
        **({"embed_norm": _norm_saved_bytes(cfg, N, b)} if cfg.embed_norm else {}),
        # an encoder-decoder's own loss (EncoderDecoderLM.loss) is F.cross_entropy on the logits
        "head_and_loss": (
            head_saved(cfg, N, b, "logits" if cfg.is_encoder_decoder and loss == "chunked" else loss, tp)
            if cfg.lm_head
            else bare_encoder_head_saved(cfg, B, T, b)
        ),
    }
    if cfg.is_encoder_decoder:  # the encoder's blocks over the source, and its output (read
        # by every decoder block's k_proj and v_proj, kept once); each decoder block's
        # cross-attention joins its own
        components["encoder_blocks"] = cfg.encoder_layers * sum(block_saved(cfg, 0, B, S, b, dtype).values())
        components["encoder_output"] = nbytes(B * S * C, b)
        cross = sum(cross_attention_saved(cfg, B, T, S, b).values())
        saved = {key: value + cross for key, value in saved.items()}
        per_layer += cross
    if checkpointing:
        block_input = nbytes((math.ceil(N / tp) if sequence_parallel else N) * C, b)
        components["block_inputs"] = L * block_input
        # While a block is recomputed, its first saved tensor is the stored input itself
        # (Post-LN: q/k/v read it; Pre-LN: the first norm saves it)
        components["recomputed_block"] = saved[heaviest] - block_input
    else:
        components["blocks"] = sum(saved[key] * count for key, (_, count) in kinds.items())
    return ActivationEstimate(
        dtype,
        seq_len,
        batch,
        checkpointing,
        per_layer,
        components,
        sum(components.values()),
        list(ACTIVATION_ASSUMPTIONS),
    )


def activation_bytes(
    cfg: ModelConfig,
    seq_len: int,
    batch: int,
    dtype: str = "fp32",
    checkpointing: bool = False,
    loss: str = "chunked",
    tp: int = 1,
    sequence_parallel: bool = False,
    source_len: int | None = None,
) -> int:
    """Bytes of the tensors our implementation saves for backward (see ACTIVATION_ASSUMPTIONS),
    on one of ``tp`` tensor-parallel ranks; an encoder-decoder's source of ``source_len``
    tokens (None: ``seq_len``)."""
    return activation_estimate(
        cfg, seq_len, batch, dtype, checkpointing, loss, tp, sequence_parallel, source_len
    ).total_bytes


def autocast_activation_bytes(cfg: ModelConfig, seq_len: int, batch: int, dtype: str) -> int:
    """What the live model saves for backward under ``torch.autocast`` to ``dtype`` (fp32
    weights, mixed precision): ``activation_bytes`` in ``dtype``, except that the residual
    stream stays float32, so every norm's input (two per block, four in a sandwich block, the
    final norm) is saved in 4 bytes instead of ``dtype``'s. fp32: ``activation_bytes`` itself.
    A decoder-only model's (the live pass's and the training loop's, which refuse the rest)."""
    require_decoder_only(cfg, "autocast_activation_bytes")
    exact = activation_bytes(cfg, seq_len, batch, dtype)
    b = checked_dtype_bytes(dtype, TRAINING_DTYPES)
    norm_inputs = norms_per_block(cfg) * cfg.n_layers + (1 if cfg.final_norm else 0)
    return exact + norm_inputs * nbytes(batch * seq_len * cfg.d_model, 4 - b)


# ---- a fine-tuning step: the base frozen -----------------------------------------------------
FINETUNE_ACTIVATION_ASSUMPTIONS = [
    "With the base frozen, autograd keeps only what the gradients that are still needed read: "
    "a linear layer whose weight is frozen saves no input (measured on llama_lab.model with "
    "saved_tensors_hooks: tests/unit/analysis/test_finetune_activations.py), an adapter saves "
    "its input (shared with whatever else keeps it) and A·x (N·r per targeted projection), and "
    "nothing upstream of the first adapter saves anything (the embedding is frozen: no token "
    "ids kept; block 0's first norm keeps nothing unless the stream already needs a gradient).",
    "DoRA (model.lora): the adapted output W·x + s·B·A·x of each targeted projection (N·out) and "
    "the scale m / ‖W + s·B·A‖ with the detached norm (out, float32 each), kept by the product.",
    "QLoRA: the NF4 layers dequantise again in backward (model.quant's NF4 matmul, as "
    "bitsandbytes' MatMul4Bit): no dequantised weight is saved; otherwise as LoRA.",
    "A frozen head keeps no weight gradient (chunked loss) or no input (logits loss). Full "
    "fine-tuning is training: activation_estimate itself. Blocks other than dense attention + "
    "FFN (MLA, Gated DeltaNet, experts, sandwich norms) are counted as in training (an upper "
    "bound).",
]
FINETUNE_METHODS = ("lora", "qlora", "dora", "full")
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _targeted(targets: tuple[str, ...] | str) -> frozenset[str]:
    if targets == "all-linear" or targets == ("all-linear",):
        return frozenset(PROJECTIONS)
    return frozenset((targets,) if isinstance(targets, str) else targets)


def _frozen_block_saved(
    cfg: ModelConfig,
    layer: int,
    B: int,
    T: int,
    b: float,
    dtype: str,
    rank: int,
    targets: frozenset[str],
    dora: bool,
    grad_in: bool,
) -> tuple[dict, bool]:
    """What block ``layer`` saves when only the adapters on ``targets`` train, the stream
    entering it needing a gradient or not (``grad_in``); and whether the stream leaving it does.
    Walks the block in order: norm, q/k/v, attention, o_proj, residual, norm, FFN, residual."""
    full = block_saved(cfg, layer, B, T, b, dtype)
    plain = not (cfg.is_mla or cfg.linear_layer_flags[layer] or cfg.moe_layer_flags[layer])
    if not plain or norms_per_block(cfg) != 2:
        return full, True  # counted as in training: an upper bound
    s = Shapes.of(cfg)
    N, H, G, D, F = B * T, s.H, s.G, s.D, s.F
    widths = {
        "q_proj": H * D * (2 if cfg.attn_output_gate else 1),
        "k_proj": G * D,
        "v_proj": G * D,
        "o_proj": s.C,
        **({"gate_proj": F, "up_proj": F} if cfg.ffn_type in ("swiglu", "geglu") else {"up_proj": F}),
        "down_proj": s.C,
    }
    on = {name for name in widths if name in targets}
    qkv_on = bool(on & {"q_proj", "k_proj", "v_proj"})
    attn_grad = grad_in or qkv_on  # q, k, v need a gradient
    mid_grad = attn_grad or "o_proj" in on  # the stream after attention
    ffn_in_on = bool(on & {"gate_proj", "up_proj"})
    ffn_grad = mid_grad or ffn_in_on  # the FFN's hidden activations need a gradient
    out_grad = ffn_grad or "down_proj" in on  # the stream leaving the block
    one_norm = full["norms"] // 2
    attention_keys = (
        "qk_norm",
        "temperature",
        "qkv",
        "attention_output",
        "window_mask",
        "output_gate",
        "rope_casts",
    )
    saved = {
        # Pre-LN: the norms read the stream entering attention and the FFN; Post-LN: the stream
        # after each residual add
        "norms": one_norm
        * (int(grad_in) + int(mid_grad) if cfg.norm_position == "pre" else int(mid_grad) + int(out_grad)),
        "attention_input": full["attention_input"] if qkv_on else 0,
        **{key: full[key] if attn_grad else 0 for key in attention_keys},
        # o_proj's input is SDPA's output: kept by SDPA when q, k, v need a gradient
        "o_proj_input": nbytes(N * H * D, b) if "o_proj" in on and not attn_grad else 0,
        "ffn_input": full["ffn_input"] if ffn_in_on else 0,
        "ffn_hidden": _frozen_ffn_saved(cfg, N, b, ffn_grad, "down_proj" in on),
        # each adapter's A·x (B's input); DoRA's adapted output and its scale (and norm)
        "adapters": sum(nbytes(N * rank, b) for name in on),
        "dora": sum(nbytes(N * widths[name], b) + 2 * STATS_BYTES * widths[name] for name in on)
        if dora
        else 0,
    }
    return saved, out_grad


def _frozen_ffn_saved(cfg: ModelConfig, N: int, b: float, grad: bool, down_on: bool) -> int:
    """A dense FFN with frozen weights: the activation's own tensors when its output needs a
    gradient (SwiGLU/GeGLU the gate/up output, 2·F; ReLU its output; GELU its input), and
    down_proj's input (the product, F) when an adapter reads it (ReLU's output is that input)."""
    F = Shapes.of(cfg).F
    own = {"swiglu": 2 * F, "geglu": 2 * F, "relu": F, "gelu": F, "silu": F}[cfg.ffn_type]
    if cfg.ffn_type == "relu":
        return nbytes(N * F, b) if grad or down_on else 0
    return nbytes(N * (own * int(grad) + F * int(down_on)), b)


def finetune_activation_estimate(
    cfg: ModelConfig,
    seq_len: int,
    batch: int,
    dtype: str = "fp32",
    *,
    method: str,
    rank: int = 8,
    targets: tuple[str, ...] | str = ("q_proj", "v_proj"),
    checkpointing: bool = False,
    loss: str = "chunked",
) -> ActivationEstimate:
    """What autograd saves in one forward of a fine-tuning step (see
    FINETUNE_ACTIVATION_ASSUMPTIONS); ``full`` = ``activation_estimate``."""
    if method not in FINETUNE_METHODS:
        raise AnalysisError(f"method={method!r} must be one of {', '.join(FINETUNE_METHODS)}")
    if method == "full":
        return activation_estimate(cfg, seq_len, batch, dtype, checkpointing, loss)
    check_seq(seq_len, batch)
    check_count("rank", rank, 1 << 20)
    b = checked_dtype_bytes(dtype, TRAINING_DTYPES)
    B, T, N, L = batch, seq_len, batch * seq_len, cfg.n_layers
    chosen = _targeted(targets)
    per_block, grad = [], False  # the frozen embedding's output needs no gradient
    for layer in range(L):
        saved, grad = _frozen_block_saved(cfg, layer, B, T, b, dtype, rank, chosen, method == "dora", grad)
        per_block.append(sum(saved.values()))
    s = Shapes.of(cfg)
    head = head_saved(cfg, N, b, loss) - (nbytes(s.V * s.C, b) if loss == "chunked" else nbytes(N * s.C, b))
    rope = cfg.pos_encoding == "rope" and dtype == "fp32"
    table = 2 * T * cfg.rope_dim * 4 if rope else 0
    components = {"rope_tables": table * min(1, _rope_tables_used(cfg)), "head_and_loss": head}
    if checkpointing:  # the block inputs and one block recomputed (not measured yet)
        block_input = nbytes(N * s.C, b)
        components["block_inputs"] = block_input * L
        components["recomputed_block"] = max(per_block) - block_input
    else:
        components["blocks"] = sum(per_block)
    return ActivationEstimate(
        dtype,
        seq_len,
        batch,
        checkpointing,
        per_block[-1],
        components,
        sum(components.values()),
        list(ACTIVATION_ASSUMPTIONS) + FINETUNE_ACTIVATION_ASSUMPTIONS,
    )


def finetune_activation_bytes(
    cfg: ModelConfig,
    seq_len: int,
    batch: int,
    dtype: str = "fp32",
    *,
    method: str,
    rank: int = 8,
    targets: tuple[str, ...] | str = ("q_proj", "v_proj"),
    checkpointing: bool = False,
    loss: str = "chunked",
) -> int:
    """Bytes autograd saves in one forward of a fine-tuning step of our model (LoRA, QLoRA,
    DoRA over a frozen base; full = training)."""
    return finetune_activation_estimate(
        cfg,
        seq_len,
        batch,
        dtype,
        method=method,
        rank=rank,
        targets=targets,
        checkpointing=checkpointing,
        loss=loss,
    ).total_bytes


# ---- backward's high point -------------------------------------------------------------------
# Per row of the FFN, the widths backward holds through the activation: gated (kernels.gated's
# backward) the incoming gradient of the product, the fused gate/up gradient (2), the activation
# recomputed and its derivative's product; ReLU or GELU the incoming gradient and the
# pre-activation's.
FFN_BACKWARD_WIDTHS = {"swiglu": 5, "geglu": 5, "relu": 2, "gelu": 2, "silu": 2}


def _last_ffn_rows(cfg: ModelConfig, tokens: int) -> tuple[int, int]:
    """(rows, width) of the last block's FFN: N × F dense, N·K routed slots × Fe sparse."""
    s = Shapes.of(cfg)
    return (tokens * s.K, s.Fe) if cfg.moe_layer_flags[-1] else (tokens, s.F)


def backward_temporaries(cfg: ModelConfig, seq_len: int, batch: int, dtype: str = "fp32") -> int:
    """The gradients backward holds at its high point, the last block's FFN activation, reached
    while every earlier block's activations are still saved: the stream's gradient (N·C,
    shared by the residual and the FFN branch) and the FFN's through its activation
    (``FFN_BACKWARD_WIDTHS`` × F per row). Measured with torch's profiler on the live copies
    of seed-demo (SwiGLU) and transformer-2017 (ReLU), float32: LoRA, QLoRA, DoRA and full
    peak there; a sparse last block counted per routed slot at the expert's width (not measured)."""
    b = checked_dtype_bytes(dtype, TRAINING_DTYPES)
    N = batch * seq_len
    rows, F = _last_ffn_rows(cfg, N)
    return nbytes(N * Shapes.of(cfg).C, b) + nbytes(rows * FFN_BACKWARD_WIDTHS[cfg.ffn_type] * F, b)


def released_at_backward_peak(
    cfg: ModelConfig, seq_len: int, batch: int, dtype: str = "fp32", *, down_input_saved: bool
) -> int:
    """What the last block has freed of its saved tensors by backward's high point (its FFN's
    activation), beyond the loss head's: a Post-LN block's last norm (its input and statistics:
    its backward runs first) and, when saved (``down_input_saved``: full fine-tuning, or an
    adapter on down_proj) and a tensor of its own, the down projection's input — the gated
    product or GELU's output (F per row); ReLU's output stays (its backward reads it)."""
    b = checked_dtype_bytes(dtype, TRAINING_DTYPES)
    N = batch * seq_len
    rows, F = _last_ffn_rows(cfg, N)
    post_norm = _norm_saved_bytes(cfg, N, b) if cfg.norm_position == "post" else 0
    down = nbytes(rows * F, b) if down_input_saved and cfg.ffn_type != "relu" else 0
    return post_norm + down
