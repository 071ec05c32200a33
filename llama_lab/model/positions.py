"""Positions: RoPE (rotate-half, as transformers) with its scalings (linear, dynamic NTK,
Llama 3.1's llama3, YaRN, LongRoPE: one function each, as transformers' ``ROPE_INIT_FUNCTIONS``
computes them) and the 2017 sinusoidal table, with the tables each forward needs built once per
device and length (``PositionTables``), not on every call: a decode step reads a slice of tables
built at prefill.
"""

from __future__ import annotations

import math

import torch

from ..config import ModelConfig
from ..config.fields import RopeScaling


def rope_inv_freq(head_dim: int, theta: float) -> torch.Tensor:
    """θ_i = theta^(-2i/D) for i < D/2, as transformers computes it."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))


def linear_inv_freq(dim: int, theta: float, factor: float) -> torch.Tensor:
    """θ_i / factor: positions interpolated by the factor (transformers'
    ``_compute_linear_scaling_rope_parameters``)."""
    return rope_inv_freq(dim, theta) / factor


def dynamic_inv_freq(dim: int, theta: float, factor: float, seq_len: int, max_len: int) -> torch.Tensor:
    """Dynamic NTK (transformers' ``_compute_dynamic_ntk_parameters``): the base grows to
    theta · (factor · L / L_max − (factor − 1))^(d / (d − 2)) for a sequence of L > L_max
    positions (L_max = max_position_embeddings); up to L_max it is plain RoPE."""
    if seq_len <= max_len:
        return rope_inv_freq(dim, theta)
    base = theta * (factor * seq_len / max_len - (factor - 1)) ** (dim / (dim - 2))
    return rope_inv_freq(dim, base)


def llama3_inv_freq(dim: int, theta: float, scaling: RopeScaling) -> torch.Tensor:
    """Llama 3.1's scaling (transformers' ``_compute_llama3_parameters``): wavelengths 2π/θ_i
    shorter than original / high_freq_factor are kept, those longer than original /
    low_freq_factor divided by factor, and the band between interpolated smoothly."""
    inv_freq = rope_inv_freq(dim, theta)
    factor, low, high = scaling.factor, scaling.low_freq_factor, scaling.high_freq_factor
    original = scaling.original_max_position_embeddings
    assert factor is not None and low is not None and high is not None and original  # (field_rules)
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < original / high) * ~(wavelen > original / low)
    return torch.where(medium, smoothed, scaled)


def yarn_get_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature (Peng et al. 2023, eq. 21): 0.1 · mscale · ln(s) + 1, 1 for s ≤ 1."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_attention_factor(scaling: RopeScaling, factor: float) -> float:
    """cos and sin × this under YaRN: attention_factor, else mscale(s, mscale) / mscale(s,
    mscale_all_dim) where both are set (DeepSeek), else mscale(s)."""
    if scaling.attention_factor is not None:
        return scaling.attention_factor
    if scaling.mscale and scaling.mscale_all_dim:
        return yarn_get_mscale(factor, scaling.mscale) / yarn_get_mscale(factor, scaling.mscale_all_dim)
    return yarn_get_mscale(factor)


def yarn_inv_freq(dim: int, theta: float, scaling: RopeScaling, factor: float) -> torch.Tensor:
    """YaRN (transformers' ``_compute_yarn_parameters``): frequencies that turn fewer than
    beta_slow times over the original context are interpolated (÷ factor), those that turn more
    than beta_fast times kept, with a linear ramp between over the dimension index."""
    original = scaling.original_max_position_embeddings
    assert original is not None  # (field_rules)
    beta_fast, beta_slow = scaling.beta_fast or 32, scaling.beta_slow or 1

    def correction_dim(rotations: float) -> float:  # the dimension that turns `rotations` times
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if scaling.truncate is not False:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # (transformers' guard against a zero-width ramp)
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    pos_freqs = theta ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation = 1 - ramp  # 1: the frequency kept, 0: interpolated
    return (1 / (factor * pos_freqs)) * (1 - extrapolation) + (1 / pos_freqs) * extrapolation


def longrope_inv_freq(dim: int, theta: float, scaling: RopeScaling, seq_len: int) -> torch.Tensor:
    """LongRoPE (transformers' ``_compute_longrope_parameters``): θ_i ÷ a factor per frequency,
    long_factor for a sequence longer than original_max_position_embeddings, else short_factor."""
    original = scaling.original_max_position_embeddings
    assert original is not None  # (field_rules)
    factors = torch.tensor(scaling.long_factor if seq_len > original else scaling.short_factor)
    # 1 / (f_i · θ^(2i/d)), in transformers' order of float32 operations (the same bits)
    return 1.0 / (factors.float() * theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def longrope_attention_factor(scaling: RopeScaling, factor: float) -> float:
    """cos and sin × this under LongRoPE: attention_factor, else √(1 + ln s / ln original)."""
    if scaling.attention_factor is not None:
        return scaling.attention_factor
    original = scaling.original_max_position_embeddings
    assert original is not None  # (field_rules)
    return 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))


def scaled_rope(
    dim: int, theta: float, scaling: RopeScaling | None, seq_len: int, max_len: int
) -> tuple[torch.Tensor, float]:
    """RoPE's frequencies θ_i over ``dim`` rotated dimensions and the factor cos and sin are
    multiplied by (transformers' ``attention_scaling``), for a forward whose last position is
    seq_len − 1 (max_len: max_position_embeddings). transformers recomputes them per forward
    (``dynamic_rope_update``) for two types: LongRoPE's long factors past the original context,
    and dynamic NTK past max_position_embeddings — which a lab forward never reaches."""
    if scaling is None:
        return rope_inv_freq(dim, theta), 1.0
    kind, original = scaling.rope_type, scaling.original_max_position_embeddings
    # yarn and longrope without a factor: the context's extension, max_len / original
    factor = scaling.factor if scaling.factor is not None or original is None else max_len / original
    assert factor is not None  # (field_rules: only yarn and longrope may leave it out)
    if kind == "linear":
        return linear_inv_freq(dim, theta, factor), 1.0
    if kind == "dynamic":
        return dynamic_inv_freq(dim, theta, factor, seq_len, max_len), 1.0
    if kind == "llama3":
        return llama3_inv_freq(dim, theta, scaling), 1.0
    if kind == "yarn":
        return yarn_inv_freq(dim, theta, scaling, factor), yarn_attention_factor(scaling, factor)
    return longrope_inv_freq(dim, theta, scaling, seq_len), longrope_attention_factor(scaling, factor)


def scores_mscale(scaling: RopeScaling | None) -> float:
    """What MLA's scores are × beyond 1/√d under a scaled RoPE (transformers'
    ``yarn_apply_mscale``, DeepSeek-V2/V3 and Mistral 4): mscale(factor, mscale_all_dim)²."""
    if scaling is None or not scaling.mscale_all_dim or scaling.factor is None:
        return 1.0
    return yarn_get_mscale(scaling.factor, scaling.mscale_all_dim) ** 2


def rope_cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor, scale: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the angles p · θ_i (T, D), each × ``scale`` (a scaled RoPE's attention factor)."""
    angles = torch.outer(positions.float(), inv_freq)  # (T, D/2)
    angles = torch.cat((angles, angles), dim=-1)  # (T, D) rotate-half layout
    if scale == 1.0:
        return angles.cos(), angles.sin()
    return angles.cos() * scale, angles.sin() * scale


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, heads, T, D); cos/sin: (T, D)."""
    return (x * cos.to(x.dtype)) + (rotate_half(x) * sin.to(x.dtype))


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on adjacent pairs (x0, x1), (x2, x3), … (DeepSeek's layout), as transformers'
    ``apply_rotary_pos_emb_interleave``: the rotated evens, then the rotated odds. q and k get
    the same permutation, so their dot products — the scores — are those of the pairs rotated
    in place (DeepSeek-V2's complex multiplication). x: (B, heads, T, D); cos/sin: (T, D)."""
    half = cos.shape[-1] // 2
    cos, sin = cos[..., :half].to(x.dtype), sin[..., :half].to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.cat((even * cos - odd * sin, odd * cos + even * sin), dim=-1)


def sinusoidal_table(n_positions: int, dim: int, device=None) -> torch.Tensor:
    """Vaswani et al. 2017, section 3.5: PE[p, 2i] = sin(p/10000^(2i/d)), PE[p, 2i+1] = cos(...)."""
    pos = torch.arange(n_positions, dtype=torch.float32, device=device)[:, None]
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / dim))
    table = torch.zeros(n_positions, dim, device=device)
    table[:, 0::2] = torch.sin(pos * div)
    table[:, 1::2] = torch.cos(pos * div)[:, : dim // 2]
    return table


class PositionTables:
    """float32 position tables of one model, per device: RoPE's (cos, sin) of shape (n, D) or
    the sinusoidal table (n, C), for positions 0..n-1. ``get(end)`` returns tables covering
    positions < end: built once for the longest length asked so far (exactly that length on
    the first call, so a training step at T holds T rows), grown at least 2× past it when a
    longer one comes (amortised decoding), never past max_seq_len. Plain attributes, not
    buffers: ``model.to(bf16)`` must not round them. A model whose windowed layers rotate with a
    base or a scaling of their own (Gemma 3's ``rope_local_theta``; its and Olmo 3's scaling of
    the full-attention layers only) has a second RoPE table for them (``get(..., local=True)``).
    LongRoPE keeps a table per factor set: a forward reaching past the original context rotates
    its new tokens with the long factors, as transformers' does (the cached keys keep theirs)."""

    def __init__(self, cfg: ModelConfig):
        self.cfg = cfg
        self._tables: dict[str, tuple[torch.Tensor, ...]] = {}

    def _build(self, n: int, device: torch.device, local: bool, seen: int) -> tuple[torch.Tensor, ...]:
        # ordinary tensors even under inference_mode: a later training forward saves them
        with torch.inference_mode(False), torch.no_grad():
            return self._tables_for(n, device, local, seen)

    @property
    def inv_freq(self) -> torch.Tensor:
        """RoPE's frequencies θ_i of this model (float32, on the CPU), over the rotated width
        (``cfg.rope_dim``: a head, its rotated share, or MLA's RoPE part)."""
        return self.frequencies()

    def scaling(self, local: bool = False) -> RopeScaling | None:
        """The RoPE scaling of the global layers, or with ``local`` of the windowed ones."""
        cfg = self.cfg
        return cfg.rope_scaling if cfg.rope_scaling_local or not local else None

    def rope(self, local: bool = False, seen: int | None = None) -> tuple[torch.Tensor, float]:
        """θ_i and the attention factor of the global layers (``local``: the windowed ones') for
        a forward over positions < seen (None: up to max_seq_len)."""
        cfg = self.cfg
        theta = cfg.rope_local_theta if local else cfg.rope_theta
        seen = cfg.max_seq_len if seen is None else seen
        return scaled_rope(cfg.rope_dim, theta, self.scaling(local), seen, cfg.max_seq_len)

    def frequencies(self, local: bool = False) -> torch.Tensor:
        """``inv_freq``, or with ``local`` the windowed layers' (their own base, if any)."""
        return self.rope(local)[0]

    @property
    def separate_local(self) -> bool:
        """Whether the windowed layers rotate with a base or a scaling of their own (Gemma 3)."""
        cfg = self.cfg
        return cfg.pos_encoding == "rope" and (
            cfg.rope_local_theta != cfg.rope_theta or self.scaling(True) != self.scaling()
        )

    def _tables_for(self, n: int, device: torch.device, local: bool, seen: int) -> tuple[torch.Tensor, ...]:
        cfg = self.cfg
        if cfg.pos_encoding == "rope":
            inv_freq, scale = self.rope(local, seen)
            return rope_cos_sin(torch.arange(n, device=device), inv_freq.to(device), scale)
        return (sinusoidal_table(n, cfg.d_model, device=device),)

    def long_factors(self, local: bool, seen: int) -> bool:
        """Whether a forward over positions < seen rotates with LongRoPE's long factors."""
        scaling = self.scaling(local)
        return (
            scaling is not None
            and scaling.rope_type == "longrope"
            and seen > (scaling.original_max_position_embeddings or 0)
        )

    def get(
        self, end: int, device: torch.device, local: bool = False, seen: int | None = None
    ) -> tuple[torch.Tensor, ...]:
        """Tables covering positions < end for a forward over positions < seen (None: end);
        ``local``: the windowed layers' (their own RoPE base or scaling, where they have one)."""
        seen = end if seen is None else seen
        local = local and self.separate_local
        key = f"{device}:local" if local else str(device)
        if self.long_factors(local, seen):
            key += ":long"
        tables = self._tables.get(key)
        if tables is None or tables[0].shape[0] < end:
            n = (
                end
                if tables is None
                else min(max(end, 2 * tables[0].shape[0]), max(end, self.cfg.max_seq_len))
            )
            tables = self._tables[key] = self._build(n, device, local, seen)
        return tables

    def rows(self) -> int:
        """The most positions a table holds on any device (0 before the first forward)."""
        return max((t[0].shape[0] for t in self._tables.values()), default=0)
