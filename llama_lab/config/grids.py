"""The sidebar sliders' grids: for each shape field and the workload, the values a slider offers —
log-spaced where sizes span decades, in steps that keep the head arithmetic valid — of which
the caller keeps those its config accepts (``slider_options``), the current value always among
them (an exact entry beside the slider sets values off the grid).
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

from .bounds import LIMITS, MAX_BATCH

SLIDER_FIELDS = ("d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_hidden", "vocab_size", "max_seq_len")
PER_OCTAVE = 4  # log-spaced grids: 2^(k/4), so neighbours differ by ≈19%
# vocabularies of published tokenizers, on the vocabulary slider beside the log grid
PUBLISHED_VOCABS = (32_000, 32_768, 50_257, 65_536, 100_352, 128_256, 131_072, 151_936, 152_064, 256_000)


def geometric(low: int, high: int, per_octave: int = PER_OCTAVE) -> list[int]:
    """Integers from ``low`` to ``high`` (both kept), about ``per_octave`` per doubling."""
    if high < low:
        return []
    steps = math.ceil(per_octave * math.log2(high / low)) if low > 0 else 0
    values = {low, high} | {round(low * 2 ** (k / per_octave)) for k in range(steps + 1)}
    return sorted(v for v in values if low <= v <= high)


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def field_candidates(name: str, fields: dict) -> list[int]:
    """What the slider of config field ``name`` may offer, before the config's own check.
    ``fields``: the builder's current d_model, n_heads, n_kv_heads, head_dim (None: it follows
    d_model / n_heads) and pos_encoding."""
    heads, explicit = fields["n_heads"], fields.get("head_dim")
    if name == "d_model":  # multiples of the heads (×2: RoPE needs an even head_dim)
        step = 64 if explicit else heads * (2 if fields.get("pos_encoding") == "rope" else 1)
        step = max(1, min(step, LIMITS["d_model"]))
        return [step * k for k in geometric(1, LIMITS["d_model"] // step)]
    if name == "n_heads":
        return divisors(fields["d_model"]) if not explicit else geometric(1, 1024)
    if name == "n_kv_heads":
        return divisors(heads) if heads >= 1 else [1]
    if name == "n_layers":
        return list(range(1, 129)) + geometric(128, LIMITS["n_layers"])
    if name == "vocab_size":
        return sorted(set(geometric(2, LIMITS["vocab_size"])) | set(PUBLISHED_VOCABS))
    if name == "max_seq_len":
        return [2**k for k in range(int(math.log2(LIMITS["max_seq_len"])) + 1)]
    if name == "ffn_hidden":
        return geometric(1, LIMITS["ffn_hidden"], per_octave=8)
    raise KeyError(name)


def workload_candidates(name: str, upper: int) -> list[int]:
    """The sequence length T (powers of two up to max_seq_len, and it) and the batch B."""
    top = min(upper, MAX_BATCH) if name == "batch" else upper
    powers = [2**k for k in range(int(math.log2(max(1, top))) + 1)]
    return sorted(set(powers) | {top})


def slider_options(
    candidates: Iterable[int], current: int, valid: Callable[[int], bool] | None = None
) -> list[int]:
    """The candidates ``valid`` accepts, and the current value wherever it is."""
    kept = {c for c in candidates if valid is None or valid(c)}
    if isinstance(current, int) and not isinstance(current, bool):
        kept.add(current)
    return sorted(kept)
