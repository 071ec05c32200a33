"""Where a decoder's parameters, FLOPs and memory go: closed-form counts, each written once with
its factors commented, plus the same parameter count read from the module built on the meta
device (so the formulas are checked against the code that runs).

Symbols: V vocab, C = d_model, L layers, H query heads, G KV heads, D head dim, F ffn_hidden,
B batch, T new tokens per sequence, S keys attended (cached + new), b bytes per element.
FLOPs count 2 per multiply-add.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import pandas as pd

from .config import LIMITS, ConfigError, ModelConfig
from .units import human_bytes, human_count
from .hardware import DTYPE_BYTES, GPU, GPUS, get_gpu
from .model import SDPA_HAS_GQA, build_model


class AnalysisError(ConfigError):
    """An invalid analysis argument (sequence length, batch, dtype, GPU, sharding)."""


TRAINING_DTYPES = ("fp32", "bf16", "fp16")
SHARDINGS = ("none", "zero1", "zero2", "zero3", "fsdp")
MAX_BATCH = 1_048_576
INT64_BYTES = 8      # token ids and position ids
STATS_BYTES = 4      # norm statistics (rstd, mean) and SDPA's logsumexp are kept in float32


def _check_dtype(dtype: str, allowed=tuple(DTYPE_BYTES)) -> float:
    if dtype not in allowed:
        raise AnalysisError(f"dtype={dtype!r} must be one of {', '.join(allowed)}")
    return DTYPE_BYTES[dtype]


def _check_count(name: str, value, upper: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AnalysisError(f"{name}={value!r} must be an integer")
    if not 1 <= value <= upper:
        raise AnalysisError(f"{name}={value} must be between 1 and {upper:,}")
    return value


def _check_seq(seq_len, batch) -> None:
    _check_count("seq_len", seq_len, LIMITS["max_seq_len"])
    _check_count("batch", batch, MAX_BATCH)


def _nbytes(n_elements: int, dtype_bytes: float) -> int:
    """Bytes of n elements; int4 packs two per byte."""
    return math.ceil(n_elements * dtype_bytes)


# ==== parameters ===============================================================================
# One key per kind of parameter tensor, named after the module that owns it.
DETAIL_KEYS = ("embed_tokens", "embed_positions", "q_proj", "k_proj", "v_proj", "o_proj",
               "attention_bias", "gate_proj", "up_proj", "down_proj", "ffn_bias",
               "input_layernorm", "post_attention_layernorm", "final_norm", "lm_head")
COMPONENT_OF = {
    "embed_tokens": "embedding", "embed_positions": "positional",
    "q_proj": "attention", "k_proj": "attention", "v_proj": "attention", "o_proj": "attention",
    "attention_bias": "attention",
    "gate_proj": "ffn", "up_proj": "ffn", "down_proj": "ffn", "ffn_bias": "ffn",
    "input_layernorm": "norms", "post_attention_layernorm": "norms", "final_norm": "norms",
    "lm_head": "lm_head",
}
COMPONENTS = ("embedding", "positional", "attention", "ffn", "norms", "lm_head")


@dataclass(frozen=True)
class ParamCount:
    total: int
    non_embedding: int          # total − token embedding − learned positions (Kaplan et al.)
    per_layer: int              # one decoder block
    by_component: dict          # COMPONENTS → int; a tied lm_head is 0; sums to total
    detail: dict                # DETAIL_KEYS → int, summed over layers; sums to total
    source: str                 # "closed form" or "meta module"

    def spec_by_component(self) -> dict:
        """SPEC's view: a learned positional table is counted under ``embedding``."""
        parts = dict(self.by_component)
        parts["embedding"] += parts.pop("positional")
        return parts

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        rows = [{"component": name, "params": count, "share": count / self.total}
                for name, count in self.by_component.items()]
        return pd.DataFrame(rows)


def norm_params(cfg: ModelConfig) -> int:
    """One norm: γ (RMSNorm), or γ and β (LayerNorm)."""
    return cfg.d_model * (2 if cfg.norm_type == "layernorm" else 1)


def layer_param_detail(cfg: ModelConfig) -> dict:
    """Parameters of one decoder block by tensor kind."""
    C, H, G, D, F = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.ffn_hidden
    gated = cfg.ffn_type == "swiglu"
    return {
        "q_proj": C * H * D,
        "k_proj": C * G * D,                                   # GQA/MQA: G < H shrinks K and V
        "v_proj": C * G * D,
        "o_proj": H * D * C,
        "attention_bias": (H * D + 2 * G * D + C) if cfg.bias else 0,
        "gate_proj": C * F if gated else 0,                    # SwiGLU's third matrix
        "up_proj": C * F,
        "down_proj": F * C,
        "ffn_bias": ((2 * F if gated else F) + C) if cfg.bias else 0,
        "input_layernorm": norm_params(cfg),
        "post_attention_layernorm": norm_params(cfg),
    }


def _param_count(detail: dict, per_layer: int, source: str) -> ParamCount:
    by_component = dict.fromkeys(COMPONENTS, 0)
    for key, count in detail.items():
        by_component[COMPONENT_OF[key]] += count
    total = sum(detail.values())
    non_embedding = total - by_component["embedding"] - by_component["positional"]
    return ParamCount(total, non_embedding, per_layer, by_component, dict(detail), source)


def count_params(cfg: ModelConfig) -> ParamCount:
    """Closed form: L blocks + token embedding + learned positions + final norm + lm_head."""
    layer = layer_param_detail(cfg)
    detail = dict.fromkeys(DETAIL_KEYS, 0)
    for key, count in layer.items():
        detail[key] = cfg.n_layers * count
    detail["embed_tokens"] = cfg.vocab_size * cfg.d_model
    detail["embed_positions"] = cfg.max_seq_len * cfg.d_model if cfg.pos_encoding == "learned" else 0
    detail["final_norm"] = norm_params(cfg) if cfg.final_norm else 0
    detail["lm_head"] = 0 if cfg.tie_embeddings else cfg.vocab_size * cfg.d_model
    return _param_count(detail, sum(layer.values()), "closed form")


def _detail_key(name: str) -> str:
    """Map a parameter name of CausalLM (HF LlamaForCausalLM names) to its DETAIL_KEYS kind."""
    parts = name.split(".")
    owner, kind = parts[-2], parts[-1]
    if name.startswith("model.norm."):
        return "final_norm"
    if owner in ("embed_tokens", "embed_positions", "lm_head", "input_layernorm",
                 "post_attention_layernorm"):
        return owner
    if kind == "bias" and "self_attn" in parts:
        return "attention_bias"
    if kind == "bias" and "mlp" in parts:
        return "ffn_bias"
    if owner in DETAIL_KEYS:
        return owner
    raise RuntimeError(f"parameter {name!r} has no counting rule")


def count_params_module(cfg: ModelConfig) -> ParamCount:
    """Read the counts from the module built on the meta device (no weight memory).
    ``named_parameters`` yields a tied lm_head weight once, under the embedding."""
    model = build_model(cfg, device="meta")
    detail = dict.fromkeys(DETAIL_KEYS, 0)
    for name, parameter in model.named_parameters():
        detail[_detail_key(name)] += parameter.numel()
    per_layer = sum(p.numel() for p in model.model.layers[0].parameters())
    return _param_count(detail, per_layer, "meta module")


# ==== FLOPs ====================================================================================
# FLOPs per element of the element-wise terms, listed next to (never inside) the matmul total.
ELEMENTWISE_FLOPS_PER_ELEMENT = {
    "rmsnorm": 4,         # x², sum for the mean, × rstd, × γ (one rsqrt per row not counted)
    "layernorm": 7,       # sum for μ, − μ, square, sum for σ², × rstd, × γ, + β
    "softmax": 5,         # × 1/√D, − row max, exp, sum, ÷ sum (per score; the max compares free)
    "rope": 3,            # x·cos + rotate_half(x)·sin, per element of q and k
    "swiglu": 5,          # silu(g) = g·σ(g): exp, +1, ÷, × g; then × up
    "relu": 1,
    "gelu": 8,            # 0.5·x·(1 + erf(x/√2)), erf counted as 5
    "residual": 1,        # per element of each residual add (two per block)
    "bias": 1,            # per output element of a biased linear layer
    "position_add": 1,    # learned or sinusoidal table added to the token embeddings
}

FLOP_CONVENTIONS = [
    "FLOPs = 2 per multiply-add: a (m×k)·(k×n) matmul costs 2·m·k·n.",
    "forward = matmul FLOPs only (SPEC flops.forward): attention projections + attention scores "
    "+ FFN + lm_head. Norms, softmax, RoPE, activations, bias and residual adds are listed in "
    "'elementwise' (per-element constants in 'elementwise_constants') and are NOT in forward.",
    "attention scores = QKᵀ and AV over the full T×T: 4·B·T²·H·D per layer (2 for QKᵀ, 2 for AV); "
    "attention_scores_causal counts only the T(T+1)/2 unmasked pairs: 2·B·T(T+1)·H·D per layer.",
    "GQA/MQA shrink the K/V projections (2·C·G·D per token) but not the scores: every query head "
    "still attends over all keys.",
    "the token-embedding lookup is a gather: 0 FLOPs.",
    "training_step = 3 × forward (backward ≈ 2 × forward: gradients w.r.t. activations and "
    "weights); no activation-checkpointing recompute, no optimizer update.",
    "palm_training_per_token = 6N + 12·L·H·Q·T (Chowdhery et al. 2022, App. B; nanoGPT "
    "estimate_mfu) with Q = head dim, T = context, N = palm_params = every parameter except the "
    "token and learned positional embedding tables, the lm_head counted even when tied (its "
    "matmul still runs).",
]


@dataclass(frozen=True)
class FlopCount:
    phase: str                      # "forward" (B×T tokens) or "decode" (one new token each)
    batch: int
    seq_len: int                    # new tokens per sequence
    context_len: int                # keys the last query attends
    tokens: int                     # B × seq_len
    forward: int
    per_token: float
    training_step: int              # 3 × forward
    training_per_token: float
    by_component: dict              # attention_proj, attention_scores, ffn, lm_head
    attention_scores_causal: int
    forward_causal: int             # forward with the causal-effective scores
    elementwise: dict               # norms, softmax, rope, activation, residual, bias, ... total
    elementwise_constants: dict
    palm_params: int
    palm_training_per_token: int
    conventions: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        rows = [{"component": name, "flops": value, "share": value / self.forward,
                 "in_forward": True} for name, value in self.by_component.items()]
        rows += [{"component": f"elementwise: {name}", "flops": value,
                  "share": value / self.forward, "in_forward": False}
                 for name, value in self.elementwise.items() if name != "total"]
        return pd.DataFrame(rows)


def matmul_flops(cfg: ModelConfig, new_tokens: int, query_key_pairs: int) -> dict:
    """Matmul FLOPs of one forward over ``new_tokens`` tokens (all sequences together) whose
    queries meet ``query_key_pairs`` keys in total (summed over queries, per head)."""
    C, H, G, D, F = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.ffn_hidden
    L, V = cfg.n_layers, cfg.vocab_size
    n_ffn_matrices = 3 if cfg.ffn_type == "swiglu" else 2
    return {
        # q: C→H·D, k and v: C→G·D, o: H·D→C, for every token and layer
        "attention_proj": 2 * new_tokens * (C * H * D + 2 * C * G * D + H * D * C) * L,
        # QKᵀ and AV: 2 matmuls × 2 FLOPs per MAC × D per (query, key) pair, every head and layer
        "attention_scores": 2 * 2 * query_key_pairs * D * H * L,
        # gate/up: C→F, down: F→C
        "ffn": 2 * new_tokens * n_ffn_matrices * C * F * L,
        # C→V for every position (the model returns logits for all of them)
        "lm_head": 2 * new_tokens * C * V,
    }


def elementwise_flops(cfg: ModelConfig, new_tokens: int, query_key_pairs: int) -> dict:
    """Estimates of the element-wise work, with ELEMENTWISE_FLOPS_PER_ELEMENT."""
    k = ELEMENTWISE_FLOPS_PER_ELEMENT
    C, H, G, D, F, L = (cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
                        cfg.ffn_hidden, cfg.n_layers)
    n_norms = 2 * L + (1 if cfg.final_norm else 0)
    gated = cfg.ffn_type == "swiglu"
    biased_outputs = (H + 2 * G) * D + C + (2 * F if gated else F) + C
    terms = {
        "norms": n_norms * new_tokens * C * k[cfg.norm_type],
        "softmax": query_key_pairs * H * L * k["softmax"],
        "rope": new_tokens * (H + G) * D * L * k["rope"] if cfg.pos_encoding == "rope" else 0,
        "activation": new_tokens * F * L * k[cfg.ffn_type],
        "residual": 2 * L * new_tokens * C * k["residual"],
        "bias": new_tokens * biased_outputs * L * k["bias"] if cfg.bias else 0,
        "position_add": (new_tokens * C * k["position_add"]
                         if cfg.pos_encoding in ("learned", "sinusoidal") else 0),
    }
    terms["total"] = sum(terms.values())
    return terms


def palm_params(cfg: ModelConfig) -> int:
    """N of PaLM's 6N: parameters that take part in matmuls (embedding tables excluded, a tied
    lm_head included once more because its matmul runs)."""
    counts = count_params(cfg)
    tied_head = cfg.vocab_size * cfg.d_model if cfg.tie_embeddings else 0
    return counts.non_embedding + tied_head


def _flop_count(cfg, phase, batch, seq_len, context_len, pairs, causal_pairs) -> FlopCount:
    tokens = batch * seq_len
    by_component = matmul_flops(cfg, tokens, pairs)
    forward = sum(by_component.values())
    causal_scores = matmul_flops(cfg, tokens, causal_pairs)["attention_scores"]
    n_palm = palm_params(cfg)
    # 6N: forward 2N + backward 4N per token; 12·L·H·Q·T: 3 × (QKᵀ + AV) over T keys per token
    palm = 6 * n_palm + 12 * cfg.n_layers * cfg.n_heads * cfg.head_dim * context_len
    return FlopCount(
        phase=phase, batch=batch, seq_len=seq_len, context_len=context_len, tokens=tokens,
        forward=forward, per_token=forward / tokens,
        training_step=3 * forward, training_per_token=3 * forward / tokens,
        by_component=by_component, attention_scores_causal=causal_scores,
        forward_causal=forward - by_component["attention_scores"] + causal_scores,
        elementwise=elementwise_flops(cfg, tokens, pairs),
        elementwise_constants=dict(ELEMENTWISE_FLOPS_PER_ELEMENT),
        palm_params=n_palm, palm_training_per_token=palm,
        conventions=FLOP_CONVENTIONS + [f"N (palm_params) = {n_palm:,} for this model."],
    )


def count_flops(cfg: ModelConfig, seq_len: int, batch: int = 1) -> FlopCount:
    """One forward pass over B sequences of T tokens (no cache)."""
    _check_seq(seq_len, batch)
    T = seq_len
    # every query meets all T keys (full); causally only keys ≤ its own position
    return _flop_count(cfg, "forward", batch, T, T, batch * T * T, batch * T * (T + 1) // 2)


def scores_overtake_ffn_at(cfg: ModelConfig, upper: int | None = None) -> int | None:
    """The shortest sequence length at which the attention-score FLOPs (QKᵀ and AV, full T×T)
    exceed the FFN's, found by bisection on ``analysis.count_flops`` (scores grow as T², the FFN
    as T); None if it does not happen up to ``upper`` (default: the largest allowed length)."""
    upper = upper or LIMITS["max_seq_len"]

    def overtaken(seq_len: int) -> bool:
        parts = count_flops(cfg, seq_len).by_component
        return parts["attention_scores"] > parts["ffn"]

    if not overtaken(upper):
        return None
    low, high = 1, upper                       # overtaken(high) holds
    if overtaken(low):
        return low
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if overtaken(middle) else (middle, high)
    return high


def decode_flops(cfg: ModelConfig, context_len: int, batch: int = 1) -> FlopCount:
    """One new token per sequence attending ``context_len`` keys (the cache plus itself):
    projections, FFN and lm_head for B tokens, scores over S keys. Nothing is masked, so the
    causal and full counts agree. training_step is kept as 3 × forward by definition."""
    _check_seq(context_len, batch)
    pairs = batch * context_len
    return _flop_count(cfg, "decode", batch, 1, context_len, pairs, pairs)


# ==== KV cache =================================================================================
def kv_cache_bytes_per_token(cfg: ModelConfig, dtype: str = "bf16") -> int:
    """K and V of every layer for one token: 2 · L · G · D · b."""
    b = _check_dtype(dtype)
    return _nbytes(2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim, b)


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
    head is MHA and MQA at once."""
    variants = {"mha": cfg.replace(n_kv_heads=cfg.n_heads),
                "gqa": cfg.replace(n_kv_heads=gqa_kv_heads(cfg)),
                "mqa": cfg.replace(n_kv_heads=1)}
    if distinct and variants["gqa"].n_kv_heads in (1, cfg.n_heads):
        del variants["gqa"]
    if distinct and cfg.n_heads == 1:
        del variants["mqa"]
    return variants


@dataclass(frozen=True)
class KVCacheReport:
    dtype: str
    seq_len: int
    batch: int
    n_kv_heads: int
    bytes_per_token: int            # all layers, K and V
    bytes_per_sequence: int         # × seq_len
    bytes: int                      # × batch × seq_len
    compare: dict                   # mha/gqa/mqa → bytes_per_token
    compare_kv_heads: dict          # mha/gqa/mqa → n_kv_heads used
    by_dtype: dict                  # dtype → bytes_per_token
    note: str

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        rows = [{"attention": kind.upper(), "n_kv_heads": self.compare_kv_heads[kind],
                 "bytes_per_token": per_token, "bytes": per_token * self.batch * self.seq_len}
                for kind, per_token in self.compare.items()]
        return pd.DataFrame(rows)


def kv_cache(cfg: ModelConfig, seq_len: int, batch: int = 1, dtype: str = "bf16") -> KVCacheReport:
    _check_seq(seq_len, batch)
    per_token = kv_cache_bytes_per_token(cfg, dtype)
    variants = attention_variants(cfg)
    g = variants["gqa"].n_kv_heads
    if 1 < cfg.n_kv_heads < cfg.n_heads:
        note = f"GQA column: the model's own {g} KV heads."
    elif g in (1, cfg.n_heads):
        note = f"n_heads={cfg.n_heads} has no proper divisor: no GQA between MHA and MQA."
    else:
        note = (f"GQA column: {g} KV heads ({cfg.n_heads // g} query heads per KV head), the "
                f"divisor of n_heads nearest n_heads/8 as in LLaMA-2-70B/LLaMA-3.")
    return KVCacheReport(
        dtype=dtype, seq_len=seq_len, batch=batch, n_kv_heads=cfg.n_kv_heads,
        bytes_per_token=per_token, bytes_per_sequence=per_token * seq_len,
        bytes=per_token * seq_len * batch,
        compare={k: kv_cache_bytes_per_token(v, dtype) for k, v in variants.items()},
        compare_kv_heads={k: v.n_kv_heads for k, v in variants.items()},
        by_dtype={name: kv_cache_bytes_per_token(cfg, name) for name in DTYPE_BYTES},
        note=note,
    )


def weight_bytes(cfg: ModelConfig, dtype: str = "bf16") -> int:
    return _nbytes(count_params(cfg).total, _check_dtype(dtype))


def _gpu(gpu: GPU | str) -> GPU:
    try:
        return get_gpu(gpu)
    except ValueError as exc:
        raise AnalysisError(str(exc)) from None


def _free_after_weights(cfg: ModelConfig, gpu: GPU | str, dtype: str) -> int:
    return _gpu(gpu).memory_bytes - weight_bytes(cfg, dtype)


def max_context_that_fits(cfg: ModelConfig, gpu: GPU | str, batch: int = 1,
                          dtype: str = "bf16") -> int:
    """Longest context (tokens per sequence) whose KV cache fits next to the weights (0 when
    the weights alone do not fit, or when not even one token of cache fits beside them). Activations of decoding are tiny and not reserved; the
    answer may exceed max_seq_len (it says what memory allows, not what the model supports)."""
    _check_count("batch", batch, MAX_BATCH)
    free = _free_after_weights(cfg, gpu, dtype)
    return max(0, free // (batch * kv_cache_bytes_per_token(cfg, dtype)))


def max_batch_that_fits(cfg: ModelConfig, gpu: GPU | str, seq_len: int, dtype: str = "bf16") -> int:
    """Most sequences of ``seq_len`` tokens whose KV cache fits next to the weights."""
    _check_count("seq_len", seq_len, LIMITS["max_seq_len"])
    free = _free_after_weights(cfg, gpu, dtype)
    return max(0, free // (seq_len * kv_cache_bytes_per_token(cfg, dtype)))


# ==== activations ===============================================================================
@dataclass(frozen=True)
class ActivationEstimate:
    dtype: str
    seq_len: int
    batch: int
    checkpointing: bool
    per_layer: int                  # bytes one block saves for backward
    components: dict
    total_bytes: int
    assumptions: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


ACTIVATION_ASSUMPTIONS = [
    "Counts the tensors autograd saves for backward in llama_lab.model with every parameter in "
    "`dtype` (model.to(dtype), no autocast), each storage once, parameters excluded, for "
    "F.cross_entropy on the logits.",
    "Attention runs in a fused SDPA kernel (flash / CPU flash): it saves q, k, v (G heads, not "
    "repeated), its output and a float32 logsumexp (B·H·T) - never the T×T weights.",
    "RMSNorm saves its float32 input, rstd (float32) and the normalised x; LayerNorm saves its "
    "input and float32 mean/rstd (the CPU kernel keeps them in the input dtype: a few bytes per "
    "token less). A norm's output is saved by the linear layers that read it.",
    "SwiGLU saves gate, silu(gate), up and their product (4·F per token); ReLU its output; GELU "
    "its input and output.",
    "RoPE saves cos and sin (T×D): once in float32, or one cast copy per use in 16-bit dtypes.",
    "checkpointing = torch.utils.checkpoint around every block: the block inputs stay, plus one "
    "block's activations while it is recomputed in backward.",
]


def _norm_saved_bytes(cfg: ModelConfig, tokens: int, b: float) -> int:
    C = cfg.d_model
    if cfg.norm_type == "rmsnorm":
        # float32 copy of the input (the input itself in fp32) + rstd + normalised x in dtype
        return 4 * tokens * C + STATS_BYTES * tokens + _nbytes(tokens * C, b)
    return _nbytes(tokens * C, b) + 2 * STATS_BYTES * tokens      # input + mean, rstd


def activation_estimate(cfg: ModelConfig, seq_len: int, batch: int, dtype: str = "fp32",
                        checkpointing: bool = False) -> ActivationEstimate:
    _check_seq(seq_len, batch)
    b = _check_dtype(dtype, TRAINING_DTYPES)
    B, T, N = batch, seq_len, batch * seq_len
    C, H, G, D, F, L, V = (cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
                           cfg.ffn_hidden, cfg.n_layers, cfg.vocab_size)
    kv_heads_saved = G if (SDPA_HAS_GQA or G == H) else H          # old torch repeats K/V
    rope = cfg.pos_encoding == "rope"
    ffn_saved_per_token = {"swiglu": 4 * F, "relu": F, "gelu": 2 * F}[cfg.ffn_type]
    block = {
        "norms": 2 * _norm_saved_bytes(cfg, N, b),
        "attention_input": _nbytes(N * C, b),                      # read by q, k, v
        "qkv": _nbytes(N * (H + 2 * kv_heads_saved) * D, b),       # saved by SDPA
        # SDPA's output (also o_proj's input: same storage) + its float32 logsumexp
        "attention_output": _nbytes(N * H * D, b) + STATS_BYTES * B * H * T,
        # 16-bit: cos and sin cast afresh for q and for k
        "rope_casts": _nbytes(4 * T * D, b) if rope and dtype != "fp32" else 0,
        "ffn_input": _nbytes(N * C, b),                            # read by gate/up
        "ffn_hidden": _nbytes(N * ffn_saved_per_token, b),
    }
    per_layer = sum(block.values())
    head = ((_norm_saved_bytes(cfg, N, b) if cfg.final_norm else 0)
            + _nbytes(N * C, b)                                            # lm_head input
            + _nbytes(N * V, b)                                            # log_softmax output
            + INT64_BYTES * N + math.ceil(b))                              # targets, total_weight
    components = {
        "token_ids": INT64_BYTES * N + (INT64_BYTES * T if cfg.pos_encoding == "learned" else 0),
        "rope_tables": 2 * T * D * 4 if rope and dtype == "fp32" else 0,   # shared by all layers
        "head_and_loss": head,
    }
    if checkpointing:
        components["block_inputs"] = L * _nbytes(N * C, b)
        # While a block is recomputed, its first saved tensor is often the stored input itself
        # (Post-LN: q/k/v read it; LayerNorm saves it; RMSNorm's float32 upcast of an fp32 x is x).
        reuses_input = (cfg.norm_position == "post" or cfg.norm_type == "layernorm"
                        or dtype == "fp32")
        components["recomputed_block"] = per_layer - (_nbytes(N * C, b) if reuses_input else 0)
    else:
        components["blocks"] = L * per_layer
    return ActivationEstimate(dtype, seq_len, batch, checkpointing, per_layer, components,
                              sum(components.values()), list(ACTIVATION_ASSUMPTIONS))


def activation_bytes(cfg: ModelConfig, seq_len: int, batch: int, dtype: str = "fp32",
                     checkpointing: bool = False) -> int:
    """Bytes of the tensors our implementation saves for backward (see ACTIVATION_ASSUMPTIONS)."""
    return activation_estimate(cfg, seq_len, batch, dtype, checkpointing).total_bytes


def inference_activation_bytes(cfg: ModelConfig, seq_len: int, batch: int,
                               dtype: str = "bf16") -> int:
    """Peak bytes of live intermediate tensors in a no-grad forward of llama_lab.model over
    B×T tokens (a prefill): the largest of the norm, attention, FFN and lm_head working sets,
    counting what callers still hold, plus the position ids and RoPE tables. Not counted:
    allocator slack, kernel workspaces, RoPE's 16-bit casts of cos/sin (T·D each)."""
    _check_seq(seq_len, batch)
    b = _check_dtype(dtype)
    if dtype in ("fp8", "int8", "int4"):
        b = DTYPE_BYTES["bf16"]                      # weight-only formats compute in bf16
    T, N = seq_len, batch * seq_len
    C, H, G, D, F, V = (cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
                        cfg.ffn_hidden, cfg.vocab_size)
    pre = cfg.norm_position == "pre"
    # Elements per token alive at each phase of a block. The block input stays referenced by
    # the layer loop; Pre-LN also holds the norm output being read, and on the FFN side the
    # residual after attention.
    q_k_v = (H + 2 * G) * D                         # locals of Attention.forward until it returns
    at_o_proj = q_k_v + H * D + C                   # + attention output + o_proj output
    at_rope = 0
    if cfg.pos_encoding == "rope":                  # x·cos, rotate_half(x), rotate_half(x)·sin
        at_rope = 2 * G * D + max(4 * H * D,        # while rotating q (k, v alive)
                                  2 * H * D + 3 * G * D)   # while rotating k (old and new q)
    attention = (2 * C if pre else C) + max(at_o_proj, at_rope)
    hidden = 3 * F if cfg.ffn_type == "swiglu" else 2 * F   # silu(g), up, product / act in+out
    ffn = (3 * C if pre else 2 * C) + max(hidden, F + C)    # F + C: down_proj's input and output
    if cfg.norm_type == "rmsnorm":                  # float32 x·rstd, its cast, γ·x
        norm_bytes = 4 * C + (b * C if b != 4 else 0) + b * C
    else:
        norm_bytes = b * C + 2 * STATS_BYTES
    norm = 2 * C * b + norm_bytes                   # the two tensors held around a norm
    positions = INT64_BYTES * T                     # position ids, held through the blocks
    if cfg.pos_encoding == "rope":                  # + cos and sin, float32 (T, D) each
        positions += 2 * T * D * 4
    block_peak = math.ceil(N * max(max(attention, ffn) * b, norm)) + positions
    head_peak = _nbytes(N * (C + V), b)             # final hidden state + logits
    return max(block_peak, head_peak)


# ==== memory ===================================================================================
@dataclass(frozen=True)
class MemoryEstimate:
    kind: str                       # "inference" or "training"
    dtype: str
    seq_len: int
    batch: int                      # per GPU
    components: dict                # bytes for one unsharded replica
    total_bytes: int                # sum of components: what one GPU needs without sharding
    sharding: str
    n_gpus: int
    per_gpu_components: dict
    per_gpu_bytes: int
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"component": name, "bytes": value,
                              "per_gpu_bytes": self.per_gpu_components[name]}
                             for name, value in self.components.items()])


def inference_memory(cfg: ModelConfig, seq_len: int, batch: int = 1,
                     dtype: str = "bf16") -> MemoryEstimate:
    """Serving B sequences of T tokens: weights + full KV cache + the prefill's peak activations."""
    _check_seq(seq_len, batch)
    _check_dtype(dtype)
    components = {
        "weights": weight_bytes(cfg, dtype),
        "kv_cache": kv_cache_bytes_per_token(cfg, dtype) * batch * seq_len,
        "activations": inference_activation_bytes(cfg, seq_len, batch, dtype),
    }
    total = sum(components.values())
    return MemoryEstimate("inference", dtype, seq_len, batch, components, total, "none", 1,
                          dict(components), total,
                          ["activations: peak working set of a no-grad prefill "
                           "(inference_activation_bytes)"])


# Which model states each scheme splits across the GPUs (Rajbhandari et al. 2020, ZeRO:
# stage 1 = optimizer states, 2 = + gradients, 3 = + parameters; FSDP full-shard = stage 3).
SHARDED_STATES = {
    "none": (),
    "zero1": ("optimizer_moments", "master_weights"),
    "zero2": ("optimizer_moments", "master_weights", "gradients"),
    "zero3": ("optimizer_moments", "master_weights", "gradients", "weights"),
    "fsdp": ("optimizer_moments", "master_weights", "gradients", "weights"),
}


def training_memory(cfg: ModelConfig, seq_len: int, batch: int, dtype: str = "bf16",
                    mixed_precision: bool = True, activation_checkpointing: bool = False,
                    sharding: str = "none", n_gpus: int = 1) -> MemoryEstimate:
    """AdamW training, ``batch`` sequences per GPU. Mixed precision (bf16/fp16 with fp32 master
    weights and moments) is ZeRO's 2Ψ + 2Ψ + 12Ψ; fp32 is 4Ψ + 4Ψ + 8Ψ; pure 16-bit keeps the
    moments in 16 bits. Activations from ``activation_bytes``."""
    _check_seq(seq_len, batch)
    b = _check_dtype(dtype, TRAINING_DTYPES)
    if sharding not in SHARDINGS:
        raise AnalysisError(f"sharding={sharding!r} must be one of {', '.join(SHARDINGS)}")
    _check_count("n_gpus", n_gpus, 1_000_000)
    P = count_params(cfg).total
    mixed = mixed_precision and dtype != "fp32"
    moment_bytes = 4 if (mixed or dtype == "fp32") else b
    components = {
        "weights": _nbytes(P, b),
        "gradients": _nbytes(P, b),
        "optimizer_moments": _nbytes(2 * P, moment_bytes),          # AdamW m and v
        "master_weights": 4 * P if mixed else 0,                    # fp32 copy updated by AdamW
        "activations": activation_bytes(cfg, seq_len, batch, dtype, activation_checkpointing),
    }
    per_gpu = {name: (math.ceil(value / n_gpus) if name in SHARDED_STATES[sharding] else value)
               for name, value in components.items()}
    notes = [f"batch={batch} sequences per GPU; activations are never sharded"]
    if mixed_precision and dtype == "fp32":
        notes.append("dtype fp32: no mixed precision, no master copy")
    if sharding == "none" and n_gpus > 1:
        notes.append("sharding='none': plain data parallel, every GPU holds every state")
    return MemoryEstimate("training", dtype, seq_len, batch, components, sum(components.values()),
                          sharding, n_gpus, per_gpu, sum(per_gpu.values()), notes)


# ==== roofline =================================================================================
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
    arithmetic_intensity: float     # FLOPs per byte moved
    ridge_point: float              # the GPU's peak FLOP/s ÷ bandwidth
    peak_flops: float
    hbm_bytes_per_s: float
    compute_time_s: float
    memory_time_s: float
    time_per_step_s: float          # lower bound: max(compute, memory)
    tokens_per_step: int
    time_per_token_s: float
    tokens_per_s: float
    bound: str                      # "compute" or "memory"

    def to_dict(self) -> dict:
        return asdict(self)


def _weight_bytes_read(cfg: ModelConfig, b: float, tokens: int) -> int:
    """Every matmul weight once, plus only the embedding rows gathered for ``tokens`` tokens."""
    rows = min(tokens, cfg.vocab_size) + (min(tokens, cfg.max_seq_len)
                                          if cfg.pos_encoding == "learned" else 0)
    return _nbytes(palm_params(cfg) + rows * cfg.d_model, b)


def _prefill_activation_traffic(cfg: ModelConfig, tokens: int, b: float) -> int:
    """Each matmul reads its input and writes its output once (element-wise ops fused away);
    the K/V outputs are the cache writes."""
    C, H, G, D, F, L, V = (cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
                           cfg.ffn_hidden, cfg.n_layers, cfg.vocab_size)
    qkv = (H + 2 * G) * D
    attention = (C + qkv) + (qkv + H * D) + (H * D + C)        # projections, SDPA, o_proj
    n_up = 2 if cfg.ffn_type == "swiglu" else 1
    ffn = n_up * (C + F) + (F + C)                              # gate/up, down
    return _nbytes(tokens * (L * (attention + ffn) + C + V), b)


def roofline(cfg: ModelConfig, gpu: GPU | str, batch: int, context_len: int, dtype: str = "bf16",
             phase: str = "decode") -> Roofline:
    """Lower-bound time of one step from FLOPs and bytes moved. decode: one token for each of
    B sequences with ``context_len`` keys - weights once + the KV cache read + the new K/V
    written. prefill: B×T tokens - weights once + activation traffic; its FLOPs use the causal
    half of the scores (fused kernels skip masked blocks). fp8/int8/int4 are weight/KV-only
    formats computing at the bf16 peak."""
    if phase not in ("decode", "prefill"):
        raise AnalysisError(f"phase={phase!r} must be 'decode' or 'prefill'")
    _check_seq(context_len, batch)
    b = _check_dtype(dtype)
    gpu = _gpu(gpu)
    kv_per_token = kv_cache_bytes_per_token(cfg, dtype)
    if phase == "decode":
        flops = decode_flops(cfg, context_len, batch).forward
        tokens = batch
        kv_bytes = batch * context_len * kv_per_token + batch * kv_per_token   # read + write
        act_bytes = 0
    else:
        flops = count_flops(cfg, context_len, batch).forward_causal
        tokens = batch * context_len
        kv_bytes = 0                          # the K/V writes are in the activation traffic
        act_bytes = _prefill_activation_traffic(cfg, tokens, DTYPE_BYTES["bf16"] if b < 2 else b)
    w_bytes = _weight_bytes_read(cfg, b, tokens)
    moved = w_bytes + kv_bytes + act_bytes
    peak = gpu.peak_flops(dtype)
    compute_s, memory_s = flops / peak, moved / gpu.hbm_bytes_per_s
    step_s = max(compute_s, memory_s)
    intensity, ridge = flops / moved, peak / gpu.hbm_bytes_per_s
    return Roofline(
        phase=phase, gpu=gpu.name, batch=batch, context_len=context_len, dtype=dtype,
        flops=flops, weight_bytes=w_bytes, kv_cache_bytes=kv_bytes, activation_bytes=act_bytes,
        bytes_moved=moved, arithmetic_intensity=intensity, ridge_point=ridge, peak_flops=peak,
        hbm_bytes_per_s=gpu.hbm_bytes_per_s, compute_time_s=compute_s, memory_time_s=memory_s,
        time_per_step_s=step_s, tokens_per_step=tokens, time_per_token_s=step_s / tokens,
        tokens_per_s=tokens / step_s, bound="compute" if compute_s >= memory_s else "memory",
    )


def roofline_table(cfg: ModelConfig, gpu: GPU | str = "H100 80GB",
                   batches=(1, 8, 32, 128), context_lens=(1024, 8192, 32768),
                   dtype: str = "bf16", phase: str = "decode") -> pd.DataFrame:
    """The roofline of the same model as MHA, GQA and MQA over batch × context. Decode reads
    the whole KV cache per token, so fewer KV heads raise the arithmetic intensity at long
    context and large batch - the reason GQA exists."""
    gpu = _gpu(gpu)
    rows = []
    for kind, variant in attention_variants(cfg).items():
        weights = weight_bytes(variant, dtype)
        for batch in batches:
            for context in context_lens:
                r = roofline(variant, gpu, batch, context, dtype, phase)
                kv_total = kv_cache_bytes_per_token(variant, dtype) * batch * context
                rows.append({
                    "attention": kind.upper(), "n_kv_heads": variant.n_kv_heads,
                    "batch": batch, "context_len": context,
                    "kv_cache_bytes": kv_total,
                    "fits": weights + kv_total <= gpu.memory_bytes,
                    "arithmetic_intensity": r.arithmetic_intensity,
                    "ridge_point": r.ridge_point, "bound": r.bound,
                    "time_per_step_ms": r.time_per_step_s * 1e3,
                    "time_per_token_ms": r.time_per_token_s * 1e3,
                    "tokens_per_s": r.tokens_per_s,
                })
    return pd.DataFrame(rows)


# ==== the SPEC view ============================================================================
def analyze(cfg: ModelConfig, seq_len: int, batch: int = 1, dtype: str = "bf16") -> dict:
    """SPEC's ``analyze --json`` object (plain JSON types), plus extra keys."""
    _check_seq(seq_len, batch)
    _check_dtype(dtype)
    params = count_params(cfg)
    flops = count_flops(cfg, seq_len, batch)
    kv = kv_cache(cfg, seq_len, batch, dtype)
    training_dtype = dtype if dtype in TRAINING_DTYPES else "bf16"
    training = training_memory(cfg, seq_len, batch, training_dtype)
    inference = inference_memory(cfg, seq_len, batch, dtype)
    notes = []
    if seq_len > cfg.max_seq_len:
        notes.append(f"seq_len={seq_len} exceeds max_seq_len={cfg.max_seq_len}: counted as if "
                     f"the model allowed it")
    if cfg.pos_encoding == "learned":
        notes.append("params.by_component.embedding includes the learned positional table "
                     f"({params.by_component['positional']:,})")
    return {
        "inputs": {"seq_len": seq_len, "batch": batch, "dtype": dtype,
                   "attention_kind": cfg.attention_kind},
        "params": {
            "total": params.total,
            "by_component": params.spec_by_component(),
            "non_embedding": params.non_embedding,
            "per_layer": params.per_layer,
            "detail": params.detail,
        },
        "flops": {
            "forward": flops.forward,
            "by_component": flops.by_component,
            "training_step": flops.training_step,
            "per_token": flops.per_token,
            "training_per_token": flops.training_per_token,
            "attention_scores_causal": flops.attention_scores_causal,
            "forward_causal": flops.forward_causal,
            "palm_params": flops.palm_params,
            "palm_training_per_token": flops.palm_training_per_token,
            "elementwise": flops.elementwise,
            "elementwise_constants": flops.elementwise_constants,
            "conventions": flops.conventions,
        },
        "kv_cache": {
            "dtype": dtype,
            "bytes_per_token": kv.bytes_per_token,
            "bytes_per_sequence": kv.bytes_per_sequence,
            "bytes": kv.bytes,
            "compare": kv.compare,
            "compare_kv_heads": kv.compare_kv_heads,
            "by_dtype": kv.by_dtype,
            "max_context_by_gpu": {name: max_context_that_fits(cfg, gpu, batch, dtype)
                                   for name, gpu in GPUS.items()},
            "note": kv.note,
        },
        "memory": {
            "inference": {"components": inference.components, "total_bytes": inference.total_bytes},
            "training": {"dtype": training_dtype, "mixed_precision": training_dtype != "fp32",
                         "components": training.components, "total_bytes": training.total_bytes},
        },
        "notes": notes,
    }


# ==== plain-text table =========================================================================
def _table(title: str, rows: list[tuple[str, str, str]]) -> list[str]:
    width = max(len(r[0]) for r in rows)
    mid = max(len(r[1]) for r in rows)
    lines = [title, "-" * len(title)]
    lines += [f"  {name:<{width}}  {exact:>{mid}}  {readable}" for name, exact, readable in rows]
    return lines + [""]


def format_analysis(result: dict) -> str:
    """A readable plain-text report of an ``analyze`` result (the CLI's default output)."""
    inputs, params, flops, kv = result["inputs"], result["params"], result["flops"], result["kv_cache"]
    total = params["total"]
    lines = [f"LLaMA Lab analysis - seq_len {inputs['seq_len']}, batch {inputs['batch']}, "
             f"dtype {inputs['dtype']}, {inputs['attention_kind']}", ""]
    rows = [(name, f"{count:,}", f"{human_count(count):>10}  {100 * count / total:5.1f}%")
            for name, count in params["by_component"].items()]
    rows += [(name, f"{params[key]:,}", f"{human_count(params[key]):>10}") for name, key in
             (("total", "total"), ("non-embedding", "non_embedding"), ("per layer", "per_layer"))]
    lines += _table("Parameters", rows)
    forward = flops["forward"]
    rows = [(name, f"{value:,}", f"{human_count(value, 'FLOP'):>14}  {100 * value / forward:5.1f}%")
            for name, value in flops["by_component"].items()]
    summary = (("forward", flops["forward"]),
               ("  causal scores only", flops["forward_causal"]),
               ("per token", flops["per_token"]),
               ("training step (3x)", flops["training_step"]),
               ("training / token", flops["training_per_token"]),
               ("PaLM 6N+12LHQT / token", flops["palm_training_per_token"]),
               ("element-wise (not in fwd)", flops["elementwise"]["total"]))
    rows += [(name, f"{value:,.0f}", f"{human_count(value, 'FLOP'):>14}") for name, value in summary]
    lines += _table("FLOPs (2 per multiply-add; scores over the full T x T)", rows)
    rows = [("bytes / token", f"{kv['bytes_per_token']:,}", human_bytes(kv["bytes_per_token"])),
            ("bytes / sequence", f"{kv['bytes_per_sequence']:,}", human_bytes(kv["bytes_per_sequence"])),
            ("bytes (B x T)", f"{kv['bytes']:,}", human_bytes(kv["bytes"]))]
    rows += [(f"{kind.upper()} (n_kv_heads={kv['compare_kv_heads'][kind]}) / token", f"{value:,}",
              human_bytes(value)) for kind, value in kv["compare"].items()]
    lines += _table(f"KV cache ({kv['dtype']})", rows)
    memory = result["memory"]
    rows = [(f"inference: {name}", f"{value:,}", human_bytes(value))
            for name, value in memory["inference"]["components"].items()]
    rows.append(("inference total", f"{memory['inference']['total_bytes']:,}",
                 human_bytes(memory["inference"]["total_bytes"])))
    rows += [(f"training: {name}", f"{value:,}", human_bytes(value))
             for name, value in memory["training"]["components"].items()]
    rows.append(("training total (1 GPU)", f"{memory['training']['total_bytes']:,}",
                 human_bytes(memory["training"]["total_bytes"])))
    lines += _table("Memory", rows)
    lines += [f"note: {note}" for note in result.get("notes", [])]
    return "\n".join(lines).rstrip() + "\n"
