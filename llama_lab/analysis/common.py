"""Argument checks and byte arithmetic shared by every count."""

from __future__ import annotations

import math

from ..config import LIMITS, MAX_BATCH, ModelConfig
from ..errors import AnalysisError, LabError
from ..runtime.hardware import DTYPE_BYTES, GPU, get_gpu
from ..runtime.precision import DTYPES

TRAINING_DTYPES = tuple(DTYPES)  # what a training run computes in (runtime.precision)


def training_dtype(dtype: str) -> str:
    """What ``dtype`` computes in: itself, or bf16 for a storage-only format (fp8, int8, int4)."""
    return dtype if dtype in TRAINING_DTYPES else "bf16"


INT64_BYTES = 8  # token ids and position ids
STATS_BYTES = 4  # norm statistics (rstd, mean) and SDPA's logsumexp are kept in float32


def checked_dtype_bytes(dtype: str, allowed=tuple(DTYPE_BYTES)) -> float:
    if dtype not in allowed:
        raise AnalysisError(f"dtype={dtype!r} must be one of {', '.join(allowed)}")
    return DTYPE_BYTES[dtype]


def check_count(name: str, value, upper: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AnalysisError(f"{name}={value!r} must be an integer")
    if not 1 <= value <= upper:
        raise AnalysisError(f"{name}={value} must be between 1 and {upper:,}")
    return value


def check_seq(seq_len, batch) -> None:
    check_count("seq_len", seq_len, LIMITS["max_seq_len"])
    check_count("batch", batch, MAX_BATCH)


def check_source_len(cfg: ModelConfig, seq_len: int, source_len: int | None) -> int:
    """An encoder-decoder's source length (None: as long as the target, ``seq_len``); a model
    without an encoder takes none."""
    if source_len is None:
        return seq_len
    if not cfg.is_encoder_decoder:
        raise AnalysisError(f"source_len={source_len!r}: only an encoder-decoder reads a source")
    check_count("source_len", source_len, LIMITS["max_seq_len"])
    return source_len


def nbytes(n_elements: int, dtype_bytes: float) -> int:
    """Bytes of n elements; int4 packs two per byte."""
    return math.ceil(n_elements * dtype_bytes)


def first_true(holds, low: int, high: int) -> int | None:
    """The smallest n in [low, high] for which the monotone ``holds(n)`` is true (False below
    it, True from it on), by bisection; None when ``holds(high)`` is false."""
    if not holds(high):
        return None
    if holds(low):
        return low
    while high - low > 1:  # holds(high), not holds(low)
        middle = (low + high) // 2
        low, high = (low, middle) if holds(middle) else (middle, high)
    return high


def checked_gpu(gpu: GPU | str) -> GPU:
    try:
        return get_gpu(gpu)
    except LabError as exc:
        raise AnalysisError(str(exc)) from None


def refuse_indexer(cfg: ModelConfig, what: str) -> None:
    """One line for the surfaces whose counts do not follow DeepSeek Sparse Attention yet (the
    top-k's attention and reads, the indexer's own training and its tensors' split): ``what``
    refuses the model rather than give a wrong number."""
    if cfg.has_indexer:
        raise AnalysisError(
            f"{what} does not model DeepSeek Sparse Attention (index_n_heads={cfg.index_n_heads}: the "
            f"indexer's top-{cfg.index_topk} keys); analyze, the KV cache and the live model do"
        )
