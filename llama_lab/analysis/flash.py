"""What attention keeps for backward and what it moves, naive against fused (FlashAttention,
Dao et al. 2022).

Kept for backward, per layer, for B sequences of T tokens at b bytes per element:
- naive (``model.reference_attention``): Q (B·H·T·D), K and V repeated to the H query heads
  (2·B·H·T·D), the T × T probabilities P of every head (B·H·T·T; softmax's backward needs only
  its output, so the scores themselves are not kept) and the boolean causal mask (T·T bytes);
- fused (``scaled_dot_product_attention``): Q, K and V (K, V at the G KV heads when SDPA reads
  them grouped), the output O (B·H·T·D) and the log-sum-exp of every row (B·H·T, fp32).
The naive figure grows with T², the fused one with T. MLA attends with every head's K and V
rebuilt (G = H), q/k heads of D and value heads (and so O) of Dv.

HBM traffic of one head's forward, in elements (Dao et al. 2022, §3.2 and Theorem 2; N = T,
d = D): standard attention reads Q and K, writes S, reads S, writes P, reads P and V, writes O:
4·N·d + 4·N², Θ(N·d + N²). FlashAttention (Algorithm 1, SRAM of M elements) uses blocks of
B_c = ⌈M / 4d⌉ keys and B_r = min(B_c, d) queries; it reads K and V once (2·N·d) and, for each
of the T_c = ⌈N / B_c⌉ key blocks, reads Q, O, ℓ, m and writes O, ℓ, m: 2·N·d + T_c·(3·N·d +
4·N), Θ(N²·d² / M).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..config import ModelConfig
from ..runtime.hardware import GPU
from .common import STATS_BYTES, check_seq, checked_dtype_bytes, checked_gpu, first_true
from .quant import weights_bytes
from .shapes import Shapes


def naive_layer_bytes(cfg: ModelConfig, seq_len: int, batch: int, dtype: str) -> int:
    """What the naive path keeps for one layer's backward (see the module's docstring)."""
    b, s, T = checked_dtype_bytes(dtype), Shapes.of(cfg), seq_len
    elements = batch * s.H * (T * (2 * s.D + s.Dv) + T * T)  # Q, K and V at H heads, P
    return math.ceil(elements * b) + T * T  # + the bool mask


def flash_layer_bytes(cfg: ModelConfig, seq_len: int, batch: int, dtype: str) -> int:
    """What the fused kernel keeps for one layer's backward."""
    b, s, T = checked_dtype_bytes(dtype), Shapes.of(cfg), seq_len
    kv_heads = s.G  # SDPA with enable_gqa keeps the KV heads as they are
    elements = batch * T * (s.H * (s.D + s.Dv) + kv_heads * (s.D + s.Dv))  # Q, O; K, V
    return math.ceil(elements * b) + STATS_BYTES * batch * s.H * T


def hbm_elements(seq_len: int, head_dim: int, sram_elements: int) -> tuple[int, int, int, int]:
    """(standard, flash, B_c, B_r): one head's forward HBM accesses in elements."""
    N, d = seq_len, head_dim
    standard = 4 * N * d + 4 * N * N
    block_cols = max(1, math.ceil(sram_elements / (4 * d)))
    block_rows = min(block_cols, d)
    outer = math.ceil(N / block_cols)
    return standard, 2 * N * d + outer * (3 * N * d + 4 * N), block_cols, block_rows


@dataclass(frozen=True)
class AttentionMemory:
    dtype: str
    seq_len: int
    batch: int
    naive_bytes: int  # all layers, kept for backward in one forward
    flash_bytes: int
    naive_layer_bytes: int
    flash_layer_bytes: int
    gpu: str
    sram_bytes: int
    block_cols: int  # B_c keys per block
    block_rows: int  # B_r queries per block
    naive_hbm_bytes: int  # one forward, all layers and heads
    flash_hbm_bytes: int
    naive_fits_up_to: int  # the longest T whose weights + naive attention memory fit
    flash_fits_up_to: int

    def to_dict(self) -> dict:
        return asdict(self)


MAX_FIT_LEN = 1 << 24  # the longest context the search considers (ModelConfig's limit)


def attention_sublayers(cfg: ModelConfig) -> int:
    """Attentions that keep scores in a forward: every attending block's; an encoder-decoder's
    encoder blocks and decoder cross-attentions too, each over T × T with a source as long as the
    target (the convention of ``analysis.flops``)."""
    return cfg.full_attention_layers + (cfg.encoder_layers + cfg.n_layers if cfg.is_encoder_decoder else 0)


def longest_fitting(cfg: ModelConfig, batch: int, dtype: str, gpu: GPU, layer_bytes) -> int:
    """The longest T (up to 2²⁴) for which the weights at ``dtype`` and ``layer_bytes`` of
    every layer fit the GPU's memory (0: not even T = 1)."""
    room = gpu.usable_bytes - weights_bytes(cfg, dtype).total

    def too_long(T: int) -> bool:
        return attention_sublayers(cfg) * layer_bytes(cfg, T, batch, dtype) > room

    first = first_true(too_long, 1, MAX_FIT_LEN)
    return MAX_FIT_LEN if first is None else first - 1


def attention_memory(
    cfg: ModelConfig, seq_len: int, batch: int = 1, dtype: str = "bf16", gpu: GPU | str = "H100 80GB"
) -> AttentionMemory:
    """``analyze --json``'s ``attention_memory``: kept bytes and HBM traffic, naive and fused."""
    check_seq(seq_len, batch)
    b = checked_dtype_bytes(dtype, allowed=("fp32", "bf16", "fp16"))
    gpu = checked_gpu(gpu)
    s = Shapes.of(cfg)
    standard, flash, cols, rows = hbm_elements(seq_len, s.D, int(gpu.sram_bytes // b))
    L = attention_sublayers(cfg)  # the attentions (Gated DeltaNet blocks keep no scores)
    heads = L * batch * s.H
    naive_layer = naive_layer_bytes(cfg, seq_len, batch, dtype)
    flash_layer = flash_layer_bytes(cfg, seq_len, batch, dtype)
    return AttentionMemory(
        dtype=dtype,
        seq_len=seq_len,
        batch=batch,
        naive_bytes=L * naive_layer,
        flash_bytes=L * flash_layer,
        naive_layer_bytes=naive_layer,
        flash_layer_bytes=flash_layer,
        gpu=gpu.name,
        sram_bytes=gpu.sram_bytes,
        block_cols=cols,
        block_rows=rows,
        naive_hbm_bytes=math.ceil(heads * standard * b),
        flash_hbm_bytes=math.ceil(heads * flash * b),
        naive_fits_up_to=longest_fitting(cfg, batch, dtype, gpu, naive_layer_bytes),
        flash_fits_up_to=longest_fitting(cfg, batch, dtype, gpu, flash_layer_bytes),
    )
