"""The KV cache: bytes per token, the MHA / GQA / MQA variants of a model, and the longest
context or largest batch that fits a GPU next to the weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import pandas as pd

from ..config import LIMITS, MAX_BATCH, ModelConfig
from ..config.recipes import without_mla
from ..runtime.hardware import DTYPE_BYTES, GPU
from ..units import plural
from .common import check_count, check_seq, checked_gpu
from .quant import KV_DTYPES, WeightQuant, kv_head_bytes, weights_bytes
from .shapes import Shapes

# One rule for the cache a GPU holds under tensor parallelism, for every page and command (the
# Many GPUs page, `predict decode`'s memory and decode roofline, the vLLM fit, the report).
# Plain attention: each of tp ranks keeps its G/tp KV heads, and at least one: when tp > G each
# KV head is replicated on tp/G ranks (Megatron's and vLLM's split). MLA: the whole latent on
# every rank. A rank's query heads need K and V of their own heads, which it rebuilds from the
# whole latent (kv_b_proj is column-parallel by heads; kv_a_proj, which makes the latent, is
# replicated), so the latent cannot be split by heads and is kept whole on each rank. vLLM keeps
# it so (vllm-project/vllm, vllm/config/model.py @ 0052a5b818980ce8a0477706aaf9f75bd5af72cd,
# ModelConfig.get_num_kv_heads):
#     if self.use_mla:
#         # When using MLA during decode it becomes MQA
#         return 1
#     ...
#     return max(1, total_num_kv_heads // parallel_config.tensor_parallel_size)
# with get_head_size() = kv_lora_rank + qk_rope_head_dim for MLA; and its DeepSeek attention
# (vllm/model_executor/models/deepseek_v2.py @ 002d6073aa034d4f5545d45021b0e56d1f3c3593) builds
# fused_qkv_a_proj with disable_tp=True and kv_b_proj as a ColumnParallelLinear of
# num_heads // tp_size local heads.


def kv_heads_per_gpu(cfg: ModelConfig, tp: int = 1) -> int:
    """KV heads one of ``tp`` tensor-parallel ranks holds: G/tp, or one (each KV head
    replicated on tp/G ranks) when tp exceeds G."""
    G = cfg.n_kv_heads
    return G // tp if G >= tp else 1


def layer_token_bytes(cfg: ModelConfig, dtype: str = "bf16", tp: int = 1) -> int:
    """What one attention layer caches per token on one of ``tp`` tensor-parallel GPUs (the
    rule above): K and V of its ``kv_heads_per_gpu`` heads, 2 · G_tp · (D · b + the row's scale
    for int8 and int4); MLA: the latent and the shared RoPE key, (Rkv + Dr) · b + their scales,
    whole on every rank."""
    s = Shapes.of(cfg)
    if cfg.is_mla:
        return kv_head_bytes(dtype, s.Rkv) + kv_head_bytes(dtype, s.Dr) + indexer_key_bytes(cfg, dtype)
    return 2 * kv_heads_per_gpu(cfg, tp) * kv_head_bytes(dtype, s.D)


def indexer_key_bytes(cfg: ModelConfig, dtype: str = "bf16") -> int:
    """DeepSeek Sparse Attention: the indexer's key one layer keeps per token, index_head_dim
    values at the cache's ``dtype`` (transformers' DynamicIndexedLayer keeps it beside the latent,
    in the model's dtype; whole on every tensor-parallel rank, as the latent); 0 without an
    indexer. DeepSeek's own inference code keeps it in fp8 with a float32 scale per 128 values
    (``fp8_indexer_key_bytes``)."""
    return kv_head_bytes(dtype, cfg.index_head_dim) if cfg.has_indexer else 0


# DeepSeek-V3.2-Exp's inference code (deepseek-ai/DeepSeek-V3.2-Exp, inference/model.py @
# 6d8cb70dfdd6f37c83c5208105a3e2c8da117485, class Indexer) keeps the indexer's keys so:
#     self.register_buffer("k_cache", torch.zeros(args.max_batch_size, args.max_seq_len,
#         self.head_dim, dtype=torch.float8_e4m3fn), persistent=False)
#     self.register_buffer("k_scale_cache", torch.zeros(args.max_batch_size, args.max_seq_len,
#         self.head_dim // block_size, dtype=torch.float32), persistent=False)
FP8_INDEXER_BLOCK = 128  # the values one float32 scale covers (its block_size)


def fp8_indexer_key_bytes(cfg: ModelConfig) -> int:
    """The indexer key per layer and token as DeepSeek's inference code caches it: Di bytes of
    e4m3 and a float32 scale per block of 128 (132 bytes for Di = 128); 0 without an indexer."""
    if not cfg.has_indexer:
        return 0
    return cfg.index_head_dim + 4 * (cfg.index_head_dim // FP8_INDEXER_BLOCK)


def _layer_kinds(cfg: ModelConfig, layers: Sequence[int] | None) -> tuple[int, int, int]:
    """Among ``layers`` (default every block): the blocks that attend (and keep a KV cache), of
    them those that attend through a sliding window, and the Gated DeltaNet blocks. A
    bidirectional encoder (BERT) reads its whole input in one pass and decodes nothing: none."""
    if not cfg.causal:
        return 0, 0, 0
    if layers is None:
        return cfg.full_attention_layers, sum(cfg.local_layer_flags), sum(cfg.linear_layer_flags)
    linear = sum(cfg.linear_layer_flags[i] for i in layers)
    return len(layers) - linear, sum(cfg.local_layer_flags[i] for i in layers), linear


def kv_cache_bytes_per_token(
    cfg: ModelConfig, dtype: str = "bf16", tp: int = 1, layers: Sequence[int] | None = None
) -> int:
    """The cache of every attention layer (of ``layers``: a pipeline stage's) for one token on
    one of ``tp`` GPUs, ``layer_token_bytes`` each (a sliding-window layer stops growing once
    it holds its window: ``kv_cache_bytes``; a Gated DeltaNet layer never grows: ``state_bytes``).
    A bidirectional encoder (BERT) caches nothing (``_layer_kinds``)."""
    return _layer_kinds(cfg, layers)[0] * layer_token_bytes(cfg, dtype, tp)


def cross_attention_bytes_per_token(cfg: ModelConfig, dtype: str = "bf16", tp: int = 1) -> int:
    """An encoder-decoder's cross-attention cache per source token: every decoder block's K and
    V of the encoder's output (``layer_token_bytes`` each), computed once per source and fixed
    while the target grows; 0 for a decoder-only model (the encoder itself caches nothing)."""
    return cfg.n_layers * layer_token_bytes(cfg, dtype, tp) if cfg.is_encoder_decoder else 0


def tp_cache_note(cfg: ModelConfig, dtype: str = "bf16") -> str:
    """The one tensor-parallel cache rule, said for ``cfg`` (the Many GPUs page and the report
    show it beside their serving splits)."""
    if cfg.is_mla:
        s = Shapes.of(cfg)
        return (
            f"MLA: every GPU holds the whole latent ({s.Rkv} + {s.Dr} values per layer and token, "
            f"{kv_cache_bytes_per_token(cfg, dtype):,} bytes per token at {dtype}) at any tensor-parallel "
            "split: each rank rebuilds its own heads' K and V from the whole latent (kv_b_proj is split by "
            "heads, the latent is not), so the latent cannot be divided among them — vLLM keeps it so "
            "(“When using MLA during decode it becomes MQA”: one KV head of kv_lora_rank + "
            "qk_rope_head_dim on each GPU)."
        )
    G = Shapes.of(cfg).G
    return (
        f"Each GPU holds the cache of its G/tp of the {G} KV heads; at tp > {G}, one KV head, "
        f"replicated on tp/{G} GPUs (as vLLM: max(1, G // tp) KV heads per GPU)."
    )


def linear_state_bytes(cfg: ModelConfig, dtype: str = "bf16") -> dict[str, int]:
    """One sequence's fixed state in one Gated DeltaNet layer, as transformers' cache holds it:
    ``conv`` the convolution's last K inputs (conv_dim · K, in the activations' dtype: ``dtype``
    when it is a float format, else 16-bit) and ``recurrent`` the delta rule's state per value
    head (Hv · dk · dv, float32: transformers' delta rule keeps it so, and Qwen3.5's configs say
    mamba_ssm_dtype float32). The convolution needs only K − 1 earlier inputs between steps (the
    FLA and vLLM kernels keep K − 1); transformers keeps K."""
    width = int(DTYPE_BYTES[dtype]) if dtype in ("fp32", "bf16", "fp16") else 2
    return {
        "conv": cfg.linear_conv_dim * cfg.linear_conv_kernel * width,
        "recurrent": cfg.linear_v_heads * cfg.linear_k_head_dim * cfg.linear_v_head_dim * 4,
    }


def state_bytes(cfg: ModelConfig, dtype: str = "bf16") -> int:
    """One sequence's state in every Gated DeltaNet layer (``linear_state_bytes``): the same at
    any context length; 0 without such layers."""
    return sum(cfg.linear_layer_flags) * sum(linear_state_bytes(cfg, dtype).values())


def naive_mla_bytes_per_token(cfg: ModelConfig, dtype: str = "bf16") -> int:
    """MLA's cache if the up-projected per-head K and V were kept, as early implementations
    did: every layer H · (D · b + scale) for K and H · (Dv · b + scale) for V. Not MLA: the
    cache itself."""
    if not cfg.is_mla:
        return kv_cache_bytes_per_token(cfg, dtype)
    s = Shapes.of(cfg)
    return s.L * s.H * (kv_head_bytes(dtype, s.D) + kv_head_bytes(dtype, s.Dv))


def kv_cache_bytes(
    cfg: ModelConfig,
    tokens: int,
    batch: int = 1,
    dtype: str = "bf16",
    tp: int = 1,
    layers: Sequence[int] | None = None,
    source_len: int | None = None,
) -> int:
    """Bytes of the cache holding ``tokens`` tokens of each of ``batch`` sequences on one of
    ``tp`` tensor-parallel GPUs, for ``layers`` (a pipeline stage's blocks; default all): every
    attention layer ``layer_token_bytes`` per token held, a sliding-window layer holding at most
    its window (under a sparse pattern: the first G tokens and the dilated window's span, or every
    token with random blocks: ``ModelConfig.local_cache_tokens``); every Gated DeltaNet layer its
    fixed state per sequence (``linear_state_bytes``: its blocks are not split by tensor
    parallelism, so each rank holds the whole state); an encoder-decoder's decoder blocks also
    their cross-attention K and V of a source of ``source_len`` tokens (None: ``tokens``)."""
    attending, local, linear = _layer_kinds(cfg, layers)
    held = local * min(tokens, cfg.local_cache_tokens or tokens) + (attending - local) * tokens
    state = linear * sum(linear_state_bytes(cfg, dtype).values()) if linear else 0
    if cfg.is_encoder_decoder:  # every decoder block's K and V of the source
        held += attending * (tokens if source_len is None else source_len)
    return batch * (layer_token_bytes(cfg, dtype, tp) * held + state)


def decode_read_bytes(
    cfg: ModelConfig, context_len: int, batch: int = 1, dtype: str = "bf16", tp: int = 1
) -> int:
    """Bytes of cache one decode step reads for ``batch`` new tokens at ``context_len`` keys each
    (their own included), on one of ``tp`` GPUs: every key a token attends — the whole cache
    (``kv_cache_bytes``: a sliding-window layer its window) — or, under DeepSeek Sparse Attention,
    the latents of its index_topk chosen keys and the indexer key of every earlier token."""
    if not cfg.has_indexer:
        return kv_cache_bytes(cfg, context_len, batch, dtype, tp)
    index = indexer_key_bytes(cfg, dtype)
    latent = layer_token_bytes(cfg, dtype, tp) - index  # the latent and the RoPE key
    chosen = min(context_len, cfg.index_topk)
    return batch * cfg.full_attention_layers * (chosen * latent + context_len * index)


def gqa_kv_heads(cfg: ModelConfig) -> int:
    """KV heads of the 'GQA' column: the model's own when it is GQA; otherwise the proper
    divisor of n_heads nearest n_heads/8 (LLaMA-2-70B and LLaMA-3 use 8 query heads per KV
    head), or the model's own count when n_heads has no proper divisor (no GQA possible)."""
    H = cfg.n_heads
    if 1 < cfg.n_kv_heads < H:
        return cfg.n_kv_heads
    divisors = [g for g in range(2, H) if H % g == 0]
    if not divisors:
        return cfg.n_kv_heads
    return min(divisors, key=lambda g: (abs(g - H / 8), g))


def attention_variants(cfg: ModelConfig, distinct: bool = False) -> dict[str, ModelConfig]:
    """The same model as MHA, GQA and MQA (only n_kv_heads changes). ``distinct`` drops
    repeats: a head count with no divisor strictly between 1 and itself has no GQA, and one
    head is MHA and MQA at once. An MLA model comes first as itself ("mla"), then as plain
    attention with heads of its value width d_h (DeepSeek-V2's Table 1 compares MLA so)."""
    plain = without_mla(cfg)
    variants = {
        "mha": plain.replace(n_kv_heads=plain.n_heads),
        "gqa": plain.replace(n_kv_heads=gqa_kv_heads(plain)),
        "mqa": plain.replace(n_kv_heads=1),
    }
    if distinct and variants["gqa"].n_kv_heads in (1, plain.n_heads):
        del variants["gqa"]
    if distinct and plain.n_heads == 1:
        del variants["mqa"]
    return {"mla": cfg, **variants} if cfg.is_mla else variants


@dataclass(frozen=True)
class KVCacheReport:
    dtype: str
    seq_len: int
    batch: int
    n_kv_heads: int
    bytes_per_token: int  # all layers, K and V
    bytes_per_sequence: int  # × seq_len
    bytes: int  # × batch × seq_len
    compare: dict[str, int]  # mha/gqa/mqa → bytes_per_token
    compare_kv_heads: dict[str, int]  # mha/gqa/mqa → n_kv_heads used
    by_dtype: dict[str, int]  # dtype → bytes_per_token
    note: str
    state_bytes: int = 0  # per sequence: every Gated DeltaNet layer's fixed state (in ``bytes``)
    # an encoder-decoder: the batch's cross-attention K and V of the source (in ``bytes``), fixed
    # by the source's length (source_len) however many target tokens are generated
    cross_bytes: int = 0
    source_len: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        ratio = self.bytes / max(1, self.bytes_per_token * self.batch * self.seq_len)
        rows = [
            {
                "attention": kind.upper(),
                "n_kv_heads": self.compare_kv_heads[kind],
                "bytes_per_token": per_token,
                "bytes": round(per_token * self.batch * self.seq_len * ratio),
            }
            for kind, per_token in self.compare.items()
        ]
        return pd.DataFrame(rows)


ENCODER_CACHE_NOTE = (
    "A bidirectional encoder (BERT) caches nothing: every token attends to every other, later ones "
    "included, so the whole input is read in one forward pass and no token is generated one at a "
    "time — there is no KV cache to keep (0 bytes per token)."
)


def encoder_decoder_note(cfg: ModelConfig, source_len: int, dtype: str) -> str:
    """What an encoder-decoder caches, in words (self-attention vs cross-attention)."""
    per_token = kv_cache_bytes_per_token(cfg, dtype)
    cross = cross_attention_bytes_per_token(cfg, dtype)
    return (
        f" Encoder-decoder: the {plural(cfg.n_layers, 'decoder block')}' self-attention cache grows "
        f"by {per_token:,} bytes per generated token (bytes_per_token); their cross-attention K and V of "
        f"the encoder's output, {cross:,} bytes per source token, are computed once and stay fixed: "
        f"{cross * source_len:,} bytes per sequence for a source of {source_len:,} tokens (the source "
        f"length is seq_len unless given). The encoder caches nothing: it runs once over the source."
    )


def kv_cache(
    cfg: ModelConfig, seq_len: int, batch: int = 1, dtype: str = "bf16", source_len: int | None = None
) -> KVCacheReport:
    """The cache of ``batch`` sequences of ``seq_len`` tokens (an encoder-decoder's target,
    over a source of ``source_len`` tokens, None: seq_len)."""
    check_seq(seq_len, batch)
    source = seq_len if source_len is None else source_len
    check_seq(source, batch)
    per_token = kv_cache_bytes_per_token(cfg, dtype)
    variants = attention_variants(cfg)
    g = variants["gqa"].n_kv_heads
    if cfg.is_mla:
        note = (
            f"MLA caches a latent of {cfg.kv_lora_rank} and a RoPE key of {cfg.qk_rope_head_dim} per "
            f"layer and token; the MHA, GQA ({plural(g, 'KV head')}) and MQA columns are plain "
            f"attention with "
            f"heads of its value width {cfg.v_head_dim} (DeepSeek-V2's Table 1)."
        )
        if cfg.has_indexer:
            note += (
                f" DeepSeek Sparse Attention's indexer keeps a key of {cfg.index_head_dim} more per layer "
                f"and token ({indexer_key_bytes(cfg, dtype):,} bytes at {dtype}, as transformers caches it; "
                f"DeepSeek's inference code keeps it in fp8 with a float32 scale per 128 values, "
                f"{fp8_indexer_key_bytes(cfg):,} bytes)."
            )
    elif 1 < cfg.n_kv_heads < cfg.n_heads:
        note = f"GQA column: the model's own {g} KV heads."
    elif g in (1, cfg.n_heads):
        note = f"n_heads={cfg.n_heads} has no proper divisor: no GQA between MHA and MQA."
    else:
        note = (
            f"GQA column: {g} KV heads ({cfg.n_heads // g} query heads per KV head), the "
            f"divisor of n_heads nearest n_heads/8 as in LLaMA-2-70B/LLaMA-3."
        )
    if not cfg.causal:
        note = ENCODER_CACHE_NOTE
    n_linear = sum(cfg.linear_layer_flags)
    if n_linear:
        note += (
            f" {n_linear} of {plural(cfg.n_layers, 'layer')} {'is' if n_linear == 1 else 'are'} Gated "
            f"DeltaNet: no per-token cache, a fixed "
            f"state of {state_bytes(cfg, dtype) // n_linear:,} bytes per layer and sequence (the "
            f"convolution's last {cfg.linear_conv_kernel} inputs and the float32 delta-rule state, "
            f"as transformers' cache holds them), counted in the cache's bytes at every length."
        )
    local = sum(cfg.local_layer_flags)
    if local and seq_len > cfg.sliding_window and cfg.chunked_attention:
        note += (
            f" {local} of {plural(cfg.n_layers, 'layer')} "
            f"{'attends' if local == 1 else 'attend'} in chunks of {cfg.sliding_window:,} tokens and "
            f"{'holds' if local == 1 else 'hold'}"
            f" at most one chunk (W slots: the ring writes a new token's K and V before attending;"
            f" transformers' chunked cache keeps W − 1 between steps, as for a sliding window). A token"
            f" at position p attends only the p mod W + 1 keys of its own chunk, so right after a"
            f" chunk boundary a full ring holds keys no query reads."
        )
    elif local and cfg.sparse_pattern is not None:
        note += " " + sparse_cache_note(cfg)
    elif local and seq_len > cfg.sliding_window:
        note += (
            f" {local} of {plural(cfg.n_layers, 'layer')} {'holds' if local == 1 else 'hold'} at most "
            f"{'its' if local == 1 else 'their'} window of {cfg.sliding_window:,} tokens"
            f" (W: the preallocated ring writes a new token's K and V before attending; transformers'"
            f" sliding-window cache keeps W − 1 between steps and joins the new token's on the fly:"
            f" both attend the same W keys)."
        )
    if cfg.is_encoder_decoder:
        note += encoder_decoder_note(cfg, source, dtype)
    return KVCacheReport(
        dtype=dtype,
        seq_len=seq_len,
        batch=batch,
        n_kv_heads=cfg.n_kv_heads,
        bytes_per_token=per_token,
        bytes_per_sequence=kv_cache_bytes(cfg, seq_len, 1, dtype, source_len=source),
        bytes=kv_cache_bytes(cfg, seq_len, batch, dtype, source_len=source),
        compare={k: kv_cache_bytes_per_token(v, dtype) for k, v in variants.items()},
        compare_kv_heads={k: v.n_kv_heads for k, v in variants.items()},
        by_dtype={name: kv_cache_bytes_per_token(cfg, name) for name in KV_DTYPES},
        note=note,
        state_bytes=state_bytes(cfg, dtype),
        cross_bytes=batch * cross_attention_bytes_per_token(cfg, dtype) * source,
        source_len=source if cfg.is_encoder_decoder else 0,
    )


def sparse_cache_note(cfg: ModelConfig) -> str:
    """What a windowed layer's cache keeps under its sparse pattern, in words."""
    p, local = cfg.sparse_pattern, sum(cfg.local_layer_flags)
    assert p is not None
    layers = f"{local} of {plural(cfg.n_layers, 'layer')}"
    if p.cache_tokens is None:
        return (
            f"{layers} attend through BigBird's {plural(p.random_blocks, 'random block')} of "
            f"{p.block_size} per query block: any earlier block may be drawn, so the cache keeps every "
            f"token, as a full-attention layer's."
        )
    window = f"window of {p.window:,} keys" + (f" {p.dilation} apart" if p.dilation > 1 else "")
    return (
        f"{layers} {'keeps' if local == 1 else 'keep'} at most {p.cache_tokens:,} tokens: the first "
        f"{p.global_tokens:,} (global) and the last {p.span:,} positions, the span of the dilated "
        f"{window} ((W − 1)·d + 1), all a later query can see."
    )


def weight_bytes(cfg: ModelConfig, dtype: "WeightQuant | str" = "bf16") -> int:
    """Every weight in ``dtype``'s format (quant.weights_bytes: scales included)."""
    return weights_bytes(cfg, dtype).total


def _free_after_weights(cfg: ModelConfig, gpu: GPU | str, weights: "WeightQuant | str") -> int:
    return checked_gpu(gpu).usable_bytes - weight_bytes(cfg, weights)


def max_context_that_fits(
    cfg: ModelConfig,
    gpu: GPU | str,
    batch: int = 1,
    dtype: "WeightQuant | str" = "bf16",
    kv_dtype: str | None = None,
) -> int:
    """Longest context (tokens per sequence) whose KV cache fits next to the weights (0 when
    the weights alone do not fit, or when not even one token of cache fits beside them).
    Activations of decoding are tiny and not reserved; the
    answer may exceed max_seq_len (it says what memory allows, not what the model supports).
    An encoder-decoder's context is its target with a source of the same length: each token
    costs its self-attention K and V and a source token's cross-attention K and V."""
    check_count("batch", batch, MAX_BATCH)
    free = _free_after_weights(cfg, gpu, dtype)
    dtype = kv_dtype or kv_dtype_of(dtype)
    per_token = kv_cache_bytes_per_token(cfg, dtype) + cross_attention_bytes_per_token(cfg, dtype)
    free -= batch * state_bytes(cfg, dtype)  # Gated DeltaNet layers: a fixed state per sequence
    if free < batch * per_token:
        return 0
    if per_token == 0:  # no attention layer grows: any length fits once the states do
        return LIMITS["max_seq_len"]
    window = cfg.local_cache_tokens if any(cfg.local_layer_flags) else None  # what a local layer keeps
    states = batch * state_bytes(cfg, dtype)  # already set aside: kv_cache_bytes holds them too
    if window is None or free < kv_cache_bytes(cfg, window, batch, dtype) - states:
        return free // (batch * per_token)  # every layer still grows per token
    global_per_token = layer_token_bytes(cfg, dtype) * (
        cfg.full_attention_layers - sum(cfg.local_layer_flags)
    )
    if global_per_token == 0:  # every layer local: the cache stops at W
        return LIMITS["max_seq_len"]
    left = free - (kv_cache_bytes(cfg, window, batch, dtype) - states)
    return window + left // (batch * global_per_token)


def max_batch_that_fits(
    cfg: ModelConfig,
    gpu: GPU | str,
    seq_len: int,
    dtype: "WeightQuant | str" = "bf16",
    kv_dtype: str | None = None,
) -> int:
    """Most sequences of ``seq_len`` tokens whose KV cache fits next to the weights (a model
    that caches nothing, a bidirectional encoder: the largest batch, once the weights fit)."""
    check_count("seq_len", seq_len, LIMITS["max_seq_len"])
    free = _free_after_weights(cfg, gpu, dtype)
    per_sequence = kv_cache_bytes(cfg, seq_len, 1, kv_dtype or kv_dtype_of(dtype))
    if per_sequence == 0:
        return MAX_BATCH if free >= 0 else 0
    return max(0, free // per_sequence)


def kv_dtype_of(weights: "WeightQuant | str") -> str:
    """The KV dtype that follows a weight format when none is given: the same name."""
    return weights.dtype if isinstance(weights, WeightQuant) else weights


def all_attention(cfg: ModelConfig) -> ModelConfig:
    """The same model with every Gated DeltaNet block attending as its attention blocks do (a
    pure-GQA model of the same heads): what its hybrid layout is compared against."""
    return cfg.replace(linear_layers="none", linear_grouped_proj=False)


def hybrid_crossover(cfg: ModelConfig, dtype: str = "bf16") -> int:
    """The shortest context at which the hybrid's cache (attention blocks' K and V plus the
    linear blocks' fixed state) is smaller than the same model with attention in every block:
    ⌈S / (b_all − b_hybrid)⌉ + (1 where it ties), S one sequence's state, b the bytes per token."""
    saved = kv_cache_bytes_per_token(all_attention(cfg), dtype) - kv_cache_bytes_per_token(cfg, dtype)
    if saved <= 0:
        raise ValueError("the model has no Gated DeltaNet block: no crossover")
    return state_bytes(cfg, dtype) // saved + 1


def hybrid_cache_frame(cfg: ModelConfig, contexts, batch: int = 1, dtype: str = "bf16") -> pd.DataFrame:
    """Per context length: the hybrid's cache (its attention blocks' K and V, its linear blocks'
    state) against the same model with attention in every block."""
    pure = all_attention(cfg)
    rows = []
    for T in contexts:
        hybrid = kv_cache_bytes(cfg, T, batch, dtype)
        rows.append(
            {
                "context": T,
                "attention blocks' K, V": hybrid - batch * state_bytes(cfg, dtype),
                "Gated DeltaNet state": batch * state_bytes(cfg, dtype),
                "hybrid total": hybrid,
                "all blocks attention": kv_cache_bytes(pure, T, batch, dtype),
                "hybrid ÷ all attention": hybrid / kv_cache_bytes(pure, T, batch, dtype),
            }
        )
    return pd.DataFrame(rows)
