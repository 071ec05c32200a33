"""The roofline: lower-bound time of a decode or prefill step from its FLOPs and the bytes it
moves, on a GPU's data-sheet peaks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import pandas as pd

from ..config import ModelConfig
from ..errors import AnalysisError
from ..runtime.hardware import DTYPE_BYTES, GPU
from .common import check_seq, checked_dtype_bytes, checked_gpu, nbytes
from .flops import count_flops, decode_flops
from .kv import (
    attention_variants,
    decode_read_bytes,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    naive_mla_bytes_per_token,
    weight_bytes,
)
from .layouts import gpu_weight_bytes
from .parallel import Layout, check_layout
from .quant import WeightQuant, as_weight_quant
from .shapes import Shapes

DEFAULT_GPU = "H100 80GB"  # the GPU the roofline tables and figures use unless told


@dataclass(frozen=True)
class Roofline:
    phase: str
    gpu: str
    batch: int
    context_len: int
    dtype: str
    flops: int
    weight_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    bytes_moved: int
    arithmetic_intensity: float  # FLOPs per byte moved
    ridge_point: float  # the GPU's peak FLOP/s ÷ bandwidth
    peak_flops: float
    hbm_bytes_per_s: float
    compute_time_s: float
    memory_time_s: float
    time_per_step_s: float  # lower bound: max(compute, memory)
    tokens_per_step: int
    time_per_token_s: float
    tokens_per_s: float
    bound: str  # "compute" or "memory"
    tp: int = 1  # one GPU of a tp-way tensor-parallel group: its FLOPs and bytes, the group's tokens

    def to_dict(self) -> dict:
        return asdict(self)


def experts_hit(cfg: ModelConfig, tokens: int) -> float:
    """Expected distinct experts a sparse layer reads for ``tokens`` tokens routed uniformly at
    random, k each: E · (1 − (1 − k/E)^tokens)."""
    s = Shapes.of(cfg)
    return s.E * (1 - (1 - s.K / s.E) ** tokens) if s.E else 0.0


def _weight_bytes_read(cfg: ModelConfig, weights: WeightQuant, tokens: int, tp: int = 1) -> int:
    """Every matmul weight one of ``tp`` tensor-parallel GPUs holds, once, in its stored format
    (scales included; ``layouts.gpu_weight_bytes``, the Many GPUs page's per-GPU rule) — of a
    sparse layer the router and only the experts some token is routed to (in expectation) —
    plus the embedding rows gathered for ``tokens`` tokens (vocabulary-parallel: ⌈rows/tp⌉ on
    each rank's shard); a tied lm_head reads the whole (local) table."""
    s = Shapes.of(cfg)
    by_name = gpu_weight_bytes(cfg, weights, Layout(tp, tp))
    tables = by_name["embed_tokens"] + by_name.get("embed_positions", 0)
    head = by_name["embed_tokens"] if cfg.tie_embeddings else 0
    n_sparse = sum(cfg.moe_layer_flags)
    experts = by_name.get("experts.gate_up_proj", 0) + by_name.get("experts.down_proj", 0)
    unread = experts * (1 - experts_hit(cfg, tokens) / s.E) if n_sparse else 0
    token_rows = math.ceil(min(tokens, s.V) / tp)
    rows = token_rows + (min(tokens, cfg.max_seq_len) if cfg.pos_encoding == "learned" else 0)
    gathered = rows * weights.row_bytes("embeddings", s.C)
    return math.ceil(sum(by_name.values()) - tables + head - unread + gathered)


def _prefill_activation_traffic(cfg: ModelConfig, batch: int, tokens: int, b: float) -> int:
    """Each matmul reads its input and writes its output once (element-wise ops fused away);
    the K/V outputs are the cache writes. A sparse layer's tokens pass the router and k
    experts; the lm_head reads the last position of each sequence (generate's prefill)."""
    s = Shapes.of(cfg)
    C, H, G, D, F, L, V = s.C, s.H, s.G, s.D, s.F, s.L, s.V
    qkv = (H + 2 * G) * D
    attention = (C + qkv) + (qkv + H * D) + (H * D + C)  # projections, SDPA, o_proj
    if cfg.is_mla:  # each projection reads its input and writes its output; SDPA over the
        # rebuilt per-head q, k (D) and v (Dv), writing H·Dv
        attention = sum(rows + cols for _, rows, cols in s.attention) + H * (2 * D + 2 * s.Dv)
    dense = s.n_up * (C + F) + (F + C)  # gate/up, down
    sparse = (C + s.E) + s.K * (s.n_up * (C + s.Fe) + (s.Fe + C))  # router, k experts
    sparse += (s.n_up * (C + s.Fs) + (s.Fs + C)) if s.Fs else 0  # the shared experts
    n_sparse = sum(cfg.moe_layer_flags)
    per_token = L * attention + (L - n_sparse) * dense + n_sparse * sparse
    return nbytes(tokens * per_token + batch * (C + V), b)


def roofline(
    cfg: ModelConfig,
    gpu: GPU | str,
    batch: int,
    context_len: int,
    dtype: str = "bf16",
    phase: str = "decode",
    weights: "WeightQuant | str | None" = None,
    kv_dtype: str | None = None,
    mla_form: str = "absorbed",
    tp: int = 1,
) -> Roofline:
    """Lower-bound time of one step from FLOPs and bytes moved. decode: one token for each of
    B sequences with ``context_len`` keys - weights once + the KV cache read (DSA: the chosen
    keys' latents and every indexer key, ``kv.decode_read_bytes``) + the new K/V written.
    prefill: B×T tokens - weights once + activation traffic; its FLOPs use the causal half of
    the scores (fused kernels skip masked blocks) and the lm_head on the last position
    of each sequence, as generate's prefill runs it. ``dtype`` is what the matmuls compute in
    (the activations' format), at that format's dense peak (``GPU.peak_flops``): fp32, bf16,
    fp16, or fp8/int8 (W8A8: a GPU without that format's tensor cores is refused); weight-only
    quantisation keeps bf16 compute. ``weights`` (a format, default ``dtype``) and
    ``kv_dtype`` (default ``dtype``) set what the weights and the cache are stored in. An MLA
    model decodes in ``mla_form`` (``flops.MLA_FORMS``): "absorbed" and "rebuilt" read the
    latent cache ("rebuilt" also writes and reads every head's rebuilt K and V), "naive" the
    per-head K and V it caches. ``tp``: one GPU of a tp-way tensor-parallel group, which reads
    its own weights (``layouts.gpu_weight_bytes``) and its own cache (``kv.layer_token_bytes``'s
    rule: G/tp KV heads and at least one, MLA's latent whole) and runs 1/tp of the FLOPs (the
    few matmuls every rank repeats — MLA's latent projections, a router — counted once)."""
    if phase not in ("decode", "prefill"):
        raise AnalysisError(f"phase={phase!r} must be 'decode' or 'prefill'")
    check_seq(context_len, batch)
    b = checked_dtype_bytes(dtype)
    gpu = checked_gpu(gpu)
    weights = as_weight_quant(weights or dtype)
    kv_dtype = kv_dtype or dtype
    if tp > 1:
        check_layout(cfg, Layout(tp, tp))
    kv_per_token = kv_cache_bytes_per_token(cfg, kv_dtype, tp)
    if phase == "decode":
        flops = decode_flops(cfg, context_len, batch, mla_form).forward
        tokens = batch
        act_bytes = 0
        if cfg.is_mla and mla_form == "naive":  # the per-head K and V cached instead (H/tp heads)
            kv_per_token = naive_mla_bytes_per_token(cfg, kv_dtype) // tp
            kv_bytes = (batch * context_len + batch) * kv_per_token  # read + write
        else:
            kv_bytes = decode_read_bytes(cfg, context_len, batch, kv_dtype, tp) + batch * kv_per_token
        if cfg.is_mla and mla_form == "rebuilt":  # K and V of every (local) head, written then read
            act_bytes = 2 * batch * context_len * naive_mla_bytes_per_token(cfg, dtype) // tp
    else:
        count = count_flops(cfg, context_len, batch)
        # generate's prefill: the lm_head runs on each sequence's last position only
        flops = count.forward_causal - count.by_component["lm_head"] * (context_len - 1) // context_len
        tokens = batch * context_len
        kv_bytes = 0  # the K/V writes are in the activation traffic
        act_bytes = _prefill_activation_traffic(cfg, batch, tokens, DTYPE_BYTES["bf16"] if b < 2 else b) // tp
    flops //= tp
    w_bytes = _weight_bytes_read(cfg, weights, tokens, tp)
    moved = w_bytes + kv_bytes + act_bytes
    peak = gpu.peak_flops(dtype)
    compute_s, memory_s = flops / peak, moved / gpu.hbm_bytes_per_s
    step_s = max(compute_s, memory_s)
    intensity, ridge = flops / moved, peak / gpu.hbm_bytes_per_s
    return Roofline(
        phase=phase,
        gpu=gpu.name,
        batch=batch,
        context_len=context_len,
        dtype=dtype,
        flops=flops,
        weight_bytes=w_bytes,
        kv_cache_bytes=kv_bytes,
        activation_bytes=act_bytes,
        bytes_moved=moved,
        arithmetic_intensity=intensity,
        ridge_point=ridge,
        peak_flops=peak,
        hbm_bytes_per_s=gpu.hbm_bytes_per_s,
        compute_time_s=compute_s,
        memory_time_s=memory_s,
        time_per_step_s=step_s,
        tokens_per_step=tokens,
        time_per_token_s=step_s / tokens,
        tokens_per_s=tokens / step_s,
        bound="compute" if compute_s >= memory_s else "memory",
        tp=tp,
    )


def roofline_table(
    cfg: ModelConfig,
    gpu: GPU | str = DEFAULT_GPU,
    batches=(1, 8, 32, 128),
    context_lens=(1024, 8192, 32768),
    dtype: str = "bf16",
    phase: str = "decode",
    weights: "WeightQuant | str | None" = None,
    kv_dtype: str | None = None,
) -> pd.DataFrame:
    """The roofline of the same model as MHA, GQA and MQA over batch × context (weights and
    cache stored at ``weights`` / ``kv_dtype``, default ``dtype``). Decode reads the whole KV
    cache per token, so fewer KV heads raise the arithmetic intensity at long context and
    large batch - the reason GQA exists."""
    gpu = checked_gpu(gpu)
    rows = []
    for kind, variant in attention_variants(cfg).items():
        stored = weight_bytes(variant, weights or dtype)
        for batch in batches:
            for context in context_lens:
                r = roofline(variant, gpu, batch, context, dtype, phase, weights, kv_dtype)
                kv_total = kv_cache_bytes(variant, context, batch, kv_dtype or dtype)
                rows.append(
                    {
                        "attention": kind.upper(),
                        "n_kv_heads": variant.n_kv_heads,
                        "batch": batch,
                        "context_len": context,
                        "kv_cache_bytes": kv_total,
                        "fits": stored + kv_total <= gpu.usable_bytes,
                        "arithmetic_intensity": r.arithmetic_intensity,
                        "ridge_point": r.ridge_point,
                        "bound": r.bound,
                        "time_per_step_ms": r.time_per_step_s * 1e3,
                        "time_per_token_ms": r.time_per_token_s * 1e3,
                        "tokens_per_s": r.tokens_per_s,
                    }
                )
    return pd.DataFrame(rows)


def sparse_attention_variants(cfg: ModelConfig) -> dict[str, ModelConfig]:
    """A DeepSeek Sparse Attention model beside the same model without its indexer (MLA over
    every key: DeepSeek-V3's attention) and as plain GQA (``attention_variants``' heads of the
    value width); keyed "dsa", "mla", "gqa"."""
    dense = cfg.replace(index_n_heads=0)
    return {"dsa": cfg, "mla": dense, "gqa": attention_variants(dense)["gqa"]}


def decode_cost_frame(cfg: ModelConfig, context_lens: Sequence[int], kv_dtype: str = "bf16") -> pd.DataFrame:
    """What one decoded token costs its attention against the context S, one sequence, for each
    of ``sparse_attention_variants``: the score FLOPs (``flops.decode_flops``' attention_scores,
    MLA's absorbed form over min(S, index_topk) keys under DSA, and DSA's indexer_scores over all
    S) and the cache bytes it reads (``kv.decode_read_bytes``). Past index_topk the sparse
    attention stops growing; the indexer's part keeps growing, at Hi·(Di + 1) multiply-adds and
    one indexer key per earlier token."""
    rows = []
    for kind, variant in sparse_attention_variants(cfg).items():
        for context in context_lens:
            flops = decode_flops(variant, context).by_component
            rows.append(
                {
                    "attention": kind,
                    "n_kv_heads": 1 if variant.is_mla else variant.n_kv_heads,
                    "context_len": context,
                    "attention_flops": flops["attention_scores"],
                    "indexer_flops": flops.get("indexer_scores", 0),
                    "score_flops": flops["attention_scores"] + flops.get("indexer_scores", 0),
                    "cache_bytes_read": decode_read_bytes(variant, context, 1, kv_dtype),
                }
            )
    return pd.DataFrame(rows)
