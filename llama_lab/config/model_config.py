"""ModelConfig: one frozen, validated dataclass, its bounds and choices.
Hugging Face ``config.json`` interop.

Attention kinds, selected by ``n_kv_heads`` (litgpt's sketch)::

    MHA (n_kv_heads = n_heads)   GQA (1 < n_kv_heads < n_heads)   MQA (n_kv_heads = 1)
    q  q  q  q  q  q  q  q       q  q  q  q  q  q  q  q           q  q  q  q  q  q  q  q
    |  |  |  |  |  |  |  |       └──┬──┘  └──┬──┘ ... (groups)    └─────────┬──────────┘
    k  k  k  k  k  k  k  k          k        k                              k
    v  v  v  v  v  v  v  v          v        v                              v
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, fields
from typing import Any, Mapping

from ..errors import ConfigError
from . import hf
from .bounds import CHOICES, LIMITS, MINIMUMS


@dataclass(frozen=True)
class ModelConfig:
    # Defaults are the seed tutorial's demo model (section 八): a 4-layer GQA LLaMA.
    vocab_size: int = 32000        # LLaMA-1/2 SentencePiece vocabulary
    d_model: int = 512
    n_layers: int = 4
    n_heads: int = 8
    n_kv_heads: int = 2            # 4 query heads share each KV head (GQA)
    ffn_hidden: int = 1365         # int(8/3 · 512): SwiGLU's three matrices ≈ a 4d ReLU FFN's two
    max_seq_len: int = 128
    norm_position: str = "pre"     # "post" = the 2017 recipe: norm after the residual add
    norm_type: str = "rmsnorm"
    pos_encoding: str = "rope"
    ffn_type: str = "swiglu"
    bias: bool = False
    final_norm: bool = True        # Pre-LN needs it: the last block's output is never normalised
    tie_embeddings: bool = False
    init: str = "normal"           # N(0, 0.02) as GPT-2 / LLaMA; "xavier" as the 2017 paper
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6         # the seed's RMSNorm; LLaMA-2 and later publish 1e-5

    def __post_init__(self) -> None:
        for name in LIMITS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name}={value!r} must be an integer")
            low = MINIMUMS.get(name, 1)
            if value < low:
                raise ConfigError(f"{name}={value} must be at least {low}")
            if value > LIMITS[name]:
                raise ConfigError(f"{name}={value} exceeds the upper bound {LIMITS[name]:,} "
                                  f"(beyond any published model; probably a typo)")
        for name, allowed in CHOICES.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(f"{name}={value!r} must be one of {', '.join(map(repr, allowed))}")
        for name in ("bias", "final_norm", "tie_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be true or false")
        for name in ("rope_theta", "norm_eps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{name}={value!r} must be a number")
            if not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{name}={value} must be a finite number > 0")
            if name == "norm_eps" and value >= 1:
                raise ConfigError(f"norm_eps={value} must be < 1 (it is a small stabiliser)")
            object.__setattr__(self, name, float(value))
        if self.n_heads > self.d_model:
            raise ConfigError(f"n_heads={self.n_heads} exceeds d_model={self.d_model} "
                              f"(each head needs at least one dimension)")
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads}")
        if self.pos_encoding == "rope" and self.head_dim % 2:
            raise ConfigError(f"head_dim={self.head_dim} (d_model/n_heads) must be even for "
                              f"pos_encoding='rope' (RoPE rotates pairs of dimensions)")

    # ---- derived sizes -------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def n_rep(self) -> int:
        """Query heads per KV head."""
        return self.n_heads // self.n_kv_heads

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    @property
    def attention_kind(self) -> str:
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def is_llama_style(self) -> bool:
        """True when transformers' LlamaForCausalLM can express this architecture."""
        return (self.norm_position == "pre" and self.norm_type == "rmsnorm"
                and self.pos_encoding == "rope" and self.ffn_type == "swiglu" and self.final_norm)

    def replace(self, **changes: Any) -> "ModelConfig":
        return dataclasses.replace(self, **changes)

    # ---- our JSON ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ModelConfig":
        if not isinstance(data, Mapping):
            raise ConfigError(f"a config must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config field(s) {', '.join(map(repr, unknown))}; "
                              f"known fields: {', '.join(sorted(known))}")
        return cls(**dict(data))

    # ---- Hugging Face config.json (llama_lab.config.hf) -------------------------------------
    @classmethod
    def from_hf_config(cls, data: Mapping[str, Any]) -> "ModelConfig":
        """Read a LlamaConfig-style dict; keys it cannot model are reported as HFConfigWarning."""
        cfg, notes = hf.read_hf_dict(data, cls)
        for note in notes:
            warnings.warn(note, hf.HFConfigWarning, stacklevel=2)
        return cfg

    def to_hf_config(self) -> dict:
        return hf.to_hf_config(self)
