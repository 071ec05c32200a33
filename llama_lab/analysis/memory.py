"""Memory: a prefill's working set, and inference and training memory (AdamW, mixed precision,
ZeRO / FSDP sharding); the activations training saves are ``activations``'.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import pandas as pd

from ..config import ModelConfig
from ..errors import AnalysisError
from ..runtime.hardware import DTYPE_BYTES
from ..units import plural
from .activations import activation_bytes
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
from .kv import kv_cache_bytes, weight_bytes
from .params import count_params
from .quant import WeightQuant
from .shapes import Shapes

SHARDINGS = ("none", "zero1", "zero2", "zero3", "fsdp")


def inference_activation_bytes(
    cfg: ModelConfig,
    seq_len: int,
    batch: int,
    dtype: str = "bf16",
    last_only: bool = False,
    source_len: int | None = None,
) -> int:
    """Peak bytes of live intermediate tensors in a no-grad forward of llama_lab.model over
    B×T tokens (a prefill): the largest of the norm, attention, FFN and lm_head working sets,
    counting what callers still hold, plus the RoPE tables; a sparse block
    with its experts' expected share of the tokens (k/E each). Not counted:
    allocator slack, kernel workspaces, RoPE's 16-bit casts of cos/sin (T·D each).
    ``last_only``: the prefill of ``generate`` (``model(ids, last_only=True)``), whose lm_head
    computes the last position's logits only (B·V instead of B·T·V). An encoder-decoder: see
    ``_encoder_decoder_peak``, over a source of ``source_len`` tokens (None: ``seq_len``)."""
    check_seq(seq_len, batch)
    S = check_source_len(cfg, seq_len, source_len)
    b = checked_dtype_bytes(dtype)
    if dtype in ("fp8", "int8", "int4"):
        b = DTYPE_BYTES["bf16"]  # weight-only formats compute in bf16
    T, N = seq_len, batch * seq_len
    s = Shapes.of(cfg)
    C, H, G, D, F, V = s.C, s.H, s.G, s.D, s.F, s.V
    pre = cfg.norm_position != "post"
    # Elements per token alive at each phase of a block. The block input stays referenced by
    # the layer loop; Pre-LN also holds the norm output being read, and on the FFN side the
    # residual after attention.
    q_k_v = (H + 2 * G) * D  # locals of Attention.forward until it returns
    at_o_proj = q_k_v + H * D + C  # + attention output + o_proj output
    at_rope = 0
    if cfg.pos_encoding == "rope":  # x·cos, rotate_half(x), rotate_half(x)·sin
        at_rope = 2 * G * D + max(
            4 * H * D,  # while rotating q (k, v alive)
            2 * H * D + 3 * G * D,
        )  # while rotating k (old and new q)
    at_scores, mask = 0, 0.0
    if cfg.attention_sinks:  # plain matmuls: the scores, their concatenation with the sinks
        # and its softmax, (T + 1) per head, alive together; the (T, T) boolean mask
        at_scores, mask = q_k_v + H * T + 2 * H * (T + 1), T * T / N
    elif cfg.attn_softcap:  # plain matmuls: the scores, scores / cap, tanh, × cap: three alive
        at_scores, mask = q_k_v + 3 * H * T, T * T / N
    attention = (2 * C if pre else C) + max(at_o_proj, at_rope, at_scores)
    # SwiGLU: the fused gate/up output (2F, alive through the block), silu(g), the product;
    # ReLU/GELU: the activation's input and output
    hidden = 4 * F if cfg.gated_ffn else 2 * F
    ffn = (3 * C if pre else 2 * C) + max(hidden, F + C)  # F + C: down_proj's input and output
    if cfg.norm_type == "rmsnorm":  # float32 x·rstd, its cast, γ·x
        norm_bytes = 4 * C + (b * C if b != 4 else 0) + b * C
    else:
        norm_bytes = b * C + 2 * STATS_BYTES
    # the two tensors held around a norm; three around a sandwich block's output norms (the
    # block input, the residual, the sublayer's output)
    norm = (3 if cfg.norm_position == "sandwich" else 2) * C * b + norm_bytes
    # learned positions: their ids are gone before the first block runs (nothing counted)
    positions = 2 * T * D * 4 if cfg.pos_encoding == "rope" else 0  # cos and sin (T, D), float32
    per_token = max(attention * b + mask, norm, ffn * b if not all(cfg.moe_layer_flags) else 0)
    if cfg.is_moe:  # the output accumulator, the router's float32
        # probabilities and top-k, and one expert's temporaries at a time, for its expected
        # share k/E of the tokens: gathered input, gate/up, silu, product, output, weighted
        gpt_oss = cfg.moe_style == "gpt_oss"
        # gpt-oss: the gathered input, gate/up and five Fe-wide steps of its clamped SwiGLU;
        # its router's logits, top-k and softmax stay in the dtype
        expert = (s.C + 7 * s.Fe) if gpt_oss else (2 * C + 4 * s.Fe)
        held = (3 * C if pre else 2 * C) + C + s.K / s.E * expert
        router = b * (s.E + 2 * s.K) + INT64_BYTES * s.K if gpt_oss else 4 * s.E + 12 * s.K
        per_token = max(per_token, held * b + router)
    block_peak = math.ceil(N * per_token) + positions
    if cfg.is_encoder_decoder:
        return _encoder_decoder_peak(cfg, batch, seq_len, S, b, per_token, norm)
    logits = batch * V if last_only else N * V
    # final hidden state + logits (soft-capped: the logits, their tanh and its product alive);
    # a bare encoder (BERT) has no logits: its last hidden state and the pooler's two B×C outputs
    head_peak = nbytes(N * C + (3 if cfg.logit_softcap else 1) * logits, b)
    if not cfg.lm_head:
        head_peak = nbytes(N * C + (2 * batch * C if cfg.pooler else 0), b)
    return max(block_peak, head_peak)


def _encoder_decoder_peak(
    cfg: ModelConfig, batch: int, seq_len: int, source_len: int, b: float, block: float, norm: float
) -> int:
    """An encoder-decoder's prefill (``model.encoder_decoder``, Post-LN, no RoPE, H·D = C): the
    larger of the encoder's peak over the source (``source_len`` tokens; its blocks as a decoder-only
    model's, ``block`` bytes per token) and the decoder's over the T target tokens with both
    caches already held (counted under kv_cache, not here). A decoder block's phases are the
    self-attention's, the FFN's and their norms' (``block`` too), the cross-attention's (the
    block input and the self-attention's normed output held, q, SDPA's output, out_proj's output)
    and the norm after it (one more tensor held than ``norm``); then the head: the last hidden
    state, the logits and the logits + final_logits_bias, at every target position (the
    model's forward computes them all: no last_only)."""
    s = Shapes.of(cfg)
    N, C, V = batch * seq_len, s.C, s.V
    cross = max((3 * C + 2 * s.H * s.D) * b, norm + C * b)
    head = nbytes(N * (C + 2 * V), b)
    encoder = math.ceil(batch * source_len * block)
    return max(encoder, math.ceil(N * max(block, cross)), head)


@dataclass(frozen=True)
class MemoryEstimate:
    kind: str  # "inference" or "training"
    dtype: str
    seq_len: int
    batch: int  # per GPU
    components: dict[str, int]  # bytes for one unsharded replica
    total_bytes: int  # sum of components: what one GPU needs without sharding
    sharding: str
    n_gpus: int
    per_gpu_components: dict[str, int]
    per_gpu_bytes: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {"component": name, "bytes": value, "per_gpu_bytes": self.per_gpu_components[name]}
                for name, value in self.components.items()
            ]
        )


def inference_memory(
    cfg: ModelConfig,
    seq_len: int,
    batch: int = 1,
    dtype: str = "bf16",
    weights: "WeightQuant | str | None" = None,
    kv_dtype: str | None = None,
) -> MemoryEstimate:
    """Serving B sequences of T tokens: weights (in ``weights``' format, scales included;
    default ``dtype``) + the full KV cache (at ``kv_dtype``, default ``dtype``) + the prefill's
    peak activations (at ``dtype``)."""
    check_seq(seq_len, batch)
    checked_dtype_bytes(dtype)
    components = {
        "weights": weight_bytes(cfg, weights or dtype),
        "kv_cache": kv_cache_bytes(cfg, seq_len, batch, kv_dtype or dtype),
        "activations": inference_activation_bytes(cfg, seq_len, batch, dtype, last_only=True),
    }
    total = sum(components.values())
    return MemoryEstimate(
        "inference",
        dtype,
        seq_len,
        batch,
        components,
        total,
        "none",
        1,
        dict(components),
        total,
        [
            "activations: peak working set of a no-grad prefill that "
            "computes the last position's logits only, as generate does "
            "(inference_activation_bytes)"
            if cfg.lm_head and not cfg.is_encoder_decoder
            else "activations: peak working set of a no-grad forward of the bare encoder and its "
            "pooler (inference_activation_bytes)"
            if not cfg.lm_head
            else "activations: the larger of the encoder's peak over the source (as long as the "
            "target) and the decoder's over the target with both caches held, computing every "
            "target position's logits, as the model's forward does (inference_activation_bytes)"
        ]
        + (
            [
                "Gated DeltaNet blocks: their prefill working set (the chunked rule's float32 "
                "chunk matrices) is not modelled; the activations are the attention and FFN "
                "blocks' peak"
            ]
            if cfg.has_linear_attention
            else []
        ),
    )


# Which model states each scheme splits across the GPUs (Rajbhandari et al. 2020, ZeRO:
# stage 1 = optimizer states, 2 = + gradients, 3 = + parameters; FSDP full-shard = stage 3).
SHARDED_STATES = {
    "none": (),
    "zero1": ("optimizer_moments", "master_weights"),
    "zero2": ("optimizer_moments", "master_weights", "gradients"),
    "zero3": ("optimizer_moments", "master_weights", "gradients", "weights"),
    "fsdp": ("optimizer_moments", "master_weights", "gradients", "weights"),
}


def training_memory(
    cfg: ModelConfig,
    seq_len: int,
    batch: int,
    dtype: str = "bf16",
    mixed_precision: bool = True,
    activation_checkpointing: bool = False,
    sharding: str = "none",
    n_gpus: int = 1,
) -> MemoryEstimate:
    """AdamW training, ``batch`` sequences per GPU. Mixed precision (bf16/fp16 with fp32 master
    weights and moments) is ZeRO's 2Ψ + 2Ψ + 12Ψ; fp32 is 4Ψ + 4Ψ + 8Ψ; pure 16-bit keeps the
    moments in 16 bits. Activations from ``activation_bytes``."""
    check_seq(seq_len, batch)
    b = checked_dtype_bytes(dtype, TRAINING_DTYPES)
    if sharding not in SHARDINGS:
        raise AnalysisError(f"sharding={sharding!r} must be one of {', '.join(SHARDINGS)}")
    check_count("n_gpus", n_gpus, 1_000_000)
    P = count_params(cfg).total
    mixed = mixed_precision and dtype != "fp32"
    moment_bytes = 4 if (mixed or dtype == "fp32") else b
    components = {
        "weights": nbytes(P, b),
        "gradients": nbytes(P, b),
        "optimizer_moments": nbytes(2 * P, moment_bytes),  # AdamW m and v
        "master_weights": 4 * P if mixed else 0,  # fp32 copy updated by AdamW
        "activations": activation_bytes(cfg, seq_len, batch, dtype, activation_checkpointing),
    }
    per_gpu = {
        name: (math.ceil(value / n_gpus) if name in SHARDED_STATES[sharding] else value)
        for name, value in components.items()
    }
    notes = [f"batch={batch}: {plural(batch, 'sequence')} per GPU; activations are never sharded"]
    if mixed_precision and dtype == "fp32":
        notes.append("dtype fp32: no mixed precision, no master copy")
    if sharding == "none" and n_gpus > 1:
        notes.append("sharding='none': plain data parallel, every GPU holds every state")
    return MemoryEstimate(
        "training",
        dtype,
        seq_len,
        batch,
        components,
        sum(components.values()),
        sharding,
        n_gpus,
        per_gpu,
        sum(per_gpu.values()),
        notes,
    )
