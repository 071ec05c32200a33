"""Model configuration: one frozen, validated dataclass, the presets, FFN sizing rules and
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
import json
import math
import warnings
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping


class ConfigError(ValueError):
    """An invalid configuration; the message names the field, the value and the rule."""


class HFConfigWarning(UserWarning):
    """A key of a Hugging Face config.json that LLaMA Lab does not model."""


# Upper bounds well beyond any published model, so a typo cannot hang or exhaust the machine.
LIMITS = {
    "vocab_size": 4_194_304,
    "d_model": 131_072,
    "n_layers": 4_096,
    "n_heads": 131_072,
    "n_kv_heads": 131_072,
    "ffn_hidden": 1_048_576,
    "max_seq_len": 16_777_216,
}
MINIMUMS = {"vocab_size": 2}

CHOICES = {
    "norm_position": ("pre", "post"),
    "norm_type": ("rmsnorm", "layernorm"),
    "pos_encoding": ("rope", "sinusoidal", "learned", "none"),
    "ffn_type": ("swiglu", "relu", "gelu"),
    "init": ("normal", "xavier"),
}


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
        return dataclasses.asdict(self)

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

    # ---- Hugging Face config.json ----------------------------------------------------------
    @classmethod
    def from_hf_config(cls, data: Mapping[str, Any]) -> "ModelConfig":
        """Read a LlamaConfig-style dict; keys it cannot model are reported as HFConfigWarning."""
        cfg, notes = read_hf_config(data)
        for note in notes:
            warnings.warn(note, HFConfigWarning, stacklevel=2)
        return cfg

    def to_hf_config(self) -> dict:
        if not self.is_llama_style:
            raise ConfigError(
                "to_hf_config needs a LLaMA-style config (pre-norm, rmsnorm, rope, swiglu, "
                f"final norm); this one has norm_position={self.norm_position!r}, "
                f"norm_type={self.norm_type!r}, pos_encoding={self.pos_encoding!r}, "
                f"ffn_type={self.ffn_type!r}, final_norm={self.final_norm}")
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab_size,
            "hidden_size": self.d_model,
            "intermediate_size": self.ffn_hidden,
            "num_hidden_layers": self.n_layers,
            "num_attention_heads": self.n_heads,
            "num_key_value_heads": self.n_kv_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": self.max_seq_len,
            "rms_norm_eps": self.norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": None,
            "tie_word_embeddings": self.tie_embeddings,
            "attention_bias": self.bias,
            "mlp_bias": self.bias,
            "initializer_range": 0.02,
        }


# HF keys that describe tokenisation, serving or bookkeeping, not the architecture: read quietly.
_HF_METADATA_KEYS = {
    "architectures", "model_type", "torch_dtype", "dtype", "transformers_version",
    "bos_token_id", "eos_token_id", "pad_token_id", "use_cache", "_name_or_path",
    "initializer_range", "attention_dropout", "pretraining_tp", "tokenizer_class",
}
_HF_FIELD_MAP = {
    "vocab_size": "vocab_size",
    "hidden_size": "d_model",
    "num_hidden_layers": "n_layers",
    "num_attention_heads": "n_heads",
    "num_key_value_heads": "n_kv_heads",
    "intermediate_size": "ffn_hidden",
    "max_position_embeddings": "max_seq_len",
    "rms_norm_eps": "norm_eps",
    "rope_theta": "rope_theta",
    "tie_word_embeddings": "tie_embeddings",
}
_HF_REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size")


def read_hf_config(data: Mapping[str, Any]) -> tuple[ModelConfig, list[str]]:
    """Translate a HF config.json dict into a ModelConfig plus human-readable notes about every
    key that was not modelled (rope scaling, unknown keys, a different head_dim, ...)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"a config.json must be a JSON object, got {type(data).__name__}")
    missing = [k for k in _HF_REQUIRED if k not in data]
    if missing:
        raise ConfigError(f"HF config.json lacks required key(s) {', '.join(missing)}")
    notes: list[str] = []
    kwargs: dict[str, Any] = dict(norm_position="pre", norm_type="rmsnorm", pos_encoding="rope",
                                  ffn_type="swiglu", final_norm=True, init="normal",
                                  tie_embeddings=False, norm_eps=1e-6, rope_theta=10000.0)
    for hf_key, field in _HF_FIELD_MAP.items():
        if hf_key in data and data[hf_key] is not None:
            kwargs[field] = data[hf_key]
    kwargs.setdefault("n_kv_heads", kwargs["n_heads"])
    kwargs.setdefault("max_seq_len", 2048)
    attention_bias, mlp_bias = data.get("attention_bias", False), data.get("mlp_bias", False)
    for key, value in (("attention_bias", attention_bias), ("mlp_bias", mlp_bias)):
        if not isinstance(value, bool):
            raise ConfigError(f"{key}={value!r} must be true or false")
    if attention_bias != mlp_bias:
        notes.append(f"attention_bias={attention_bias} and mlp_bias={mlp_bias} differ; LLaMA Lab "
                     f"has one 'bias' switch and uses {bool(attention_bias or mlp_bias)}")
    kwargs["bias"] = bool(attention_bias or mlp_bias)

    model_type = data.get("model_type", "llama")
    if model_type not in ("llama", "mistral"):
        notes.append(f"model_type={model_type!r} is read as a LLaMA-style decoder")
    act = data.get("hidden_act", "silu")
    if act != "silu":
        notes.append(f"hidden_act={act!r} is not modelled; the FFN uses SwiGLU (SiLU gate)")
    # transformers ≥ 5 writes {"rope_parameters": {"rope_theta": ..., "rope_type": ...}}
    rope_parameters = data.get("rope_parameters")
    rope_scaling = data.get("rope_scaling")
    if isinstance(rope_parameters, Mapping):
        if rope_parameters.get("rope_theta") is not None:
            kwargs["rope_theta"] = rope_parameters["rope_theta"]
        extra = {k: v for k, v in rope_parameters.items() if k != "rope_theta"}
        if extra.get("rope_type", "default") != "default":
            rope_scaling = extra
    elif rope_parameters is not None:
        notes.append(f"rope_parameters={rope_parameters!r} is not an object; ignored")
    if rope_scaling:
        notes.append(f"rope_scaling={json.dumps(rope_scaling, sort_keys=True)} is not modelled: "
                     f"positions use plain RoPE; parameter, FLOP and memory counts are unaffected")
    for key in ("attention_dropout",):
        if data.get(key) not in (None, 0, 0.0):
            notes.append(f"{key}={data[key]} is not modelled (no dropout)")
    if data.get("pretraining_tp") not in (None, 1):
        notes.append(f"pretraining_tp={data['pretraining_tp']} only changes how Meta sharded "
                     f"the matmuls; the maths is the same")
    handled = set(_HF_FIELD_MAP) | _HF_METADATA_KEYS | {
        "attention_bias", "mlp_bias", "hidden_act", "rope_scaling", "rope_parameters", "head_dim"}
    for key in sorted(set(data) - handled):
        notes.append(f"unknown key {key!r} ignored")
    cfg = ModelConfig(**kwargs)                     # validates every value first
    if data.get("head_dim") not in (None, cfg.head_dim):
        notes.append(f"head_dim={data['head_dim']!r} differs from hidden_size/num_attention_heads="
                     f"{cfg.head_dim}; LLaMA Lab uses the latter")
    return cfg, notes


def read_bounded(path: str | Path, max_bytes: int, what: str) -> bytes:
    """Read at most ``max_bytes`` of a file (regular, or a pipe such as ``<(...)``), one byte
    more to tell an oversized one apart, so /dev/zero or a huge file cannot fill memory."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{what} {str(path)!r} does not exist")
    if path.is_dir():
        raise ConfigError(f"{what} {str(path)!r} is a folder, not a file")
    try:
        with path.open("rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        raise ConfigError(f"{what} {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise ConfigError(f"{what} {str(path)!r} is larger than the limit of {max_bytes:,} bytes")
    return raw


def load_config_file(path: str | Path) -> tuple[ModelConfig, list[str]]:
    """Load our ModelConfig JSON or a HF config.json (told apart by 'hidden_size')."""
    raw = read_bounded(path, MAX_CONFIG_BYTES, "config file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(path)!r} is not UTF-8 text") from None
    return parse_config_json(text, source=str(path))


MAX_CONFIG_BYTES = 1_000_000     # a real config.json is about 1 KB


def parse_config_json(text: str, source: str = "config") -> tuple[ModelConfig, list[str]]:
    """Parse our JSON or a HF config.json, as data only (json.loads: nothing is executed)."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source} is {len(text):,} characters; a config file may hold at most "
                          f"{MAX_CONFIG_BYTES:,}")
    if not text.strip():
        raise ConfigError(f"{source} is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} "
                          f"column {exc.colno}") from None
    except RecursionError:
        raise ConfigError(f"{source} is nested too deeply to be a config") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must hold a JSON object, got {type(data).__name__}")
    if "hidden_size" in data:
        return read_hf_config(data)
    return ModelConfig.from_dict(data), []


# ---- FFN sizing rules -------------------------------------------------------------------------
def seed_ffn_hidden(d_model: int, *, multiple_of: int = 1) -> int:
    """The seed's rule: 8/3·d (so SwiGLU's 3·d·h equals a 4d FFN's 8·d²), rounded down to a
    multiple. ``multiple_of=1`` gives the demo's 1365 for d=512; the seed's code uses 64."""
    return int(8 * d_model / 3 / multiple_of) * multiple_of


def llama_ffn_hidden(d_model: int, *, multiple_of: int = 256,
                     ffn_dim_multiplier: float | None = None) -> int:
    """Meta's rule (llama/model.py FeedForward): 2/3 of 4d, optional multiplier, round up."""
    hidden = int(2 * (4 * d_model) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


# ---- presets ------------------------------------------------------------------------------------
_LLAMA = dict(vocab_size=32000, norm_eps=1e-5, rope_theta=10000.0)
_LLAMA3 = dict(vocab_size=128256, norm_eps=1e-5, rope_theta=500000.0)

PRESETS: dict[str, ModelConfig] = {
    # Tiny model for tests and quick demos.
    "debug": ModelConfig(vocab_size=256, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2,
                         ffn_hidden=172, max_seq_len=64),
    # Seed tutorial 000, section 八: LlamaModel(vocab=32000, d=512, n_layers=4, n_heads=8,
    # n_kv_heads=2, max_seq=128, ffn_hidden=1365).
    "seed-demo": ModelConfig(),
    "seed-demo-mha": ModelConfig(n_kv_heads=8),
    # Vaswani et al. 2017 recipe as a decoder-only model at the seed's size: Post-LN, LayerNorm,
    # sinusoidal positions, ReLU FFN of 4d, biases, Xavier init, no final norm.
    "transformer-2017": ModelConfig(n_kv_heads=8, ffn_hidden=2048, norm_position="post",
                                    norm_type="layernorm", pos_encoding="sinusoidal",
                                    ffn_type="relu", bias=True, final_norm=False, init="xavier",
                                    norm_eps=1e-5),
    # huggyllama/llama-7b config.json (Touvron et al. 2023, Table 2)
    "llama-7b": ModelConfig(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32,
                            ffn_hidden=11008, max_seq_len=2048, **{**_LLAMA, "norm_eps": 1e-6}),
    # meta-llama/Llama-2-7b-hf config.json
    "llama-2-7b": ModelConfig(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32,
                              ffn_hidden=11008, max_seq_len=4096, **_LLAMA),
    # meta-llama/Llama-2-13b-hf config.json
    "llama-2-13b": ModelConfig(d_model=5120, n_layers=40, n_heads=40, n_kv_heads=40,
                               ffn_hidden=13824, max_seq_len=4096, **_LLAMA),
    # meta-llama/Llama-2-70b-hf config.json (GQA, 8 KV heads)
    "llama-2-70b": ModelConfig(d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                               ffn_hidden=28672, max_seq_len=4096, **_LLAMA),
    # meta-llama/Meta-Llama-3-8B config.json
    "llama-3-8b": ModelConfig(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8,
                              ffn_hidden=14336, max_seq_len=8192, **_LLAMA3),
    # meta-llama/Meta-Llama-3-70B config.json
    "llama-3-70b": ModelConfig(d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                               ffn_hidden=28672, max_seq_len=8192, **_LLAMA3),
    # meta-llama/Llama-3.1-405B config.json (rope_scaling "llama3" not modelled)
    "llama-3.1-405b": ModelConfig(d_model=16384, n_layers=126, n_heads=128, n_kv_heads=8,
                                  ffn_hidden=53248, max_seq_len=131072, **_LLAMA3),
    # TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json
    "tinyllama-1.1b": ModelConfig(d_model=2048, n_layers=22, n_heads=32, n_kv_heads=4,
                                  ffn_hidden=5632, max_seq_len=2048, **_LLAMA),
}

# Parameter counts published for the released checkpoints (model cards / safetensors metadata).
PUBLISHED_PARAMS = {
    "seed-demo": 43_780_608,        # seed 000, section 八, "总参数"
    "seed-demo-mha": 45_353_472,    # seed 000, section 八, "MHA"
    "llama-7b": 6_738_415_616,
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "tinyllama-1.1b": 1_100_048_384,
}


def get_preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}") from None


_FIELD_TYPES = {f.name: f.type for f in fields(ModelConfig)}


def parse_override(text: str) -> tuple[str, Any]:
    """Parse a ``field=value`` override (CLI ``--set``, URL query) into a typed pair."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like field=value")
    name, raw = (part.strip() for part in text.split("=", 1))
    if name not in _FIELD_TYPES:
        raise ConfigError(f"unknown config field {name!r}; known fields: "
                          f"{', '.join(sorted(_FIELD_TYPES))}")
    return name, coerce_field(name, raw)


def coerce_field(name: str, raw: str) -> Any:
    kind = _FIELD_TYPES[name]
    if kind == "int":
        try:
            return int(raw.replace("_", ""))
        except ValueError:
            raise ConfigError(f"{name}={raw!r} must be an integer") from None
    if kind == "float":
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} must be a number") from None
    if kind == "bool":
        lowered = raw.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}={raw!r} must be true or false")
    return raw


def apply_overrides(cfg: ModelConfig, overrides: list[str] | tuple[str, ...]) -> ModelConfig:
    changes = dict(parse_override(text) for text in overrides)
    return cfg.replace(**changes) if changes else cfg
