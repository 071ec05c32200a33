"""Gemma 2 and Gemma 3 (``gemma2``, ``gemma3_text``; the ``gemma3`` wrapper through its
text_config), read as Gemma2Config / Gemma3TextConfig and their models read them: every block is
x + post_norm(f(pre_norm(x))) for attention and MLP (input_layernorm, post_attention_layernorm,
pre_feedforward_layernorm, post_feedforward_layernorm), every RMSNorm scales by (1 + weight),
the embeddings are × √hidden_size, the MLP gates through tanh-approximated GELU (GeGLU), the
scores are × query_pre_attn_scalar^-½, q/k/v/o carry attention_bias; Gemma 2 soft-caps its scores
and logits and keeps one RoPE base, Gemma 3 adds QK-norm and a RoPE base per layer type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError
from ...units import plural
from ..bounds import FAMILY_LIMITS
from ..fields import ModelFields
from ..hf.family import Counts, Family, Feature, FieldGroup, FieldSpec, Note, Split, Wrapper, failing
from ..hf.keys import KEY_TABLE, ModelType, default_theta
from ..hf.read import rope_scaling_entry, scaling_by_layer_type
from ..hf.reader import LAYER_KINDS, Reader, number, windows
from ..hf.write import nested_truncate, rope_by_layer_type
from ..messages import check_int, name_keys, shown

# Gemma2Config and Gemma3TextConfig: the keys both read (their model's hidden_activation, not
# hidden_act; attention_bias on q/k/v/o; the scale of the scores; the window and layer_types;
# the soft caps; use_bidirectional_attention)
_KEYS = frozenset(
    {
        "hidden_activation",
        "attention_bias",
        "query_pre_attn_scalar",
        "sliding_window",
        "layer_types",
        "attn_logit_softcapping",
        "final_logit_softcapping",
        "use_bidirectional_attention",
    }
)
# nulls the Gemma classes take: layer_types (derived), the soft caps (none), the bidirectional
# switch (off); Gemma3TextConfig's keyword arguments (sliding_window_pattern, rope_local_base_freq)
# are checked where they are used; sliding_window: null_why
_NULLABLE = frozenset(
    {"layer_types", "attn_logit_softcapping", "final_logit_softcapping", "use_bidirectional_attention"}
)


def _no_window(model: str) -> dict[str, str]:
    return {
        "sliding_window": f"{model} builds its sliding-window mask on every forward and raises "
        "without a window"
    }


# Gemma2Config: sandwich norms, RMSNorm × (1 + weight), embeddings × √hidden_size, the GeGLU of
# hidden_activation, scores × query_pre_attn_scalar^-½ soft-capped by attn_logit_softcapping,
# logits by final_logit_softcapping; sliding on even layers unless layer_types says; one RoPE
GEMMA2 = ModelType(
    "gemma2",
    "Gemma2ForCausalLM",
    keys=_KEYS,
    nullable=_NULLABLE,
    null_why=_no_window("Gemma2Model"),
    block="gemma",
)
# Gemma3TextConfig: Gemma 2's layer plus QK-norm, sliding unless (i + 1) % pattern == 0 (the
# sliding_window_pattern keyword, 6), RoPE per layer type (rope_parameters keyed by
# full_attention / sliding_attention, or rope_theta and rope_local_base_freq)
GEMMA3_TEXT = ModelType(
    "gemma3_text",
    "Gemma3ForCausalLM",
    keys=_KEYS | {"sliding_window_pattern", "rope_local_base_freq"},
    nullable=_NULLABLE | {"sliding_window_pattern", "rope_local_base_freq"},
    null_why=_no_window("Gemma3TextModel"),
    block="gemma",
    holds=frozenset({"local_rope_base", "global_rope_scaling"}),
    rope_by_layer_type=True,
    module="gemma3",
)

GELU_TANH = "gelu_pytorch_tanh"  # transformers' tanh-approximated GELU: the gate of Gemma's GeGLU
GEMMA3_PATTERN = 6  # Gemma3TextConfig.__post_init__: kwargs.get("sliding_window_pattern", 6)


def _softcap(r: Reader, key: str) -> float:
    """A soft cap, ``cap · tanh(x / cap)``: a positive number; null is none (0)."""
    value = r.get(key)
    if value is None:
        return 0.0
    cap = number(value)
    if cap is None or cap <= 0:
        what = "scores" if key.startswith("attn") else "logits"
        raise ConfigError(
            f"{key}={shown(value)} must be a positive number or null (no cap): "
            f"{r.architecture} divides the {what} by it",
            field=key,
        )
    return cap


def _local(r: Reader) -> list[int]:
    """The sliding layers: layer_types when given, else the config class's pattern (Gemma2Config:
    sliding when (i + 1) % 2; Gemma3TextConfig: when (i + 1) % sliding_window_pattern, 6)."""
    gemma3 = r.name == "gemma3_text"
    layer_types = r.layer_types()
    if layer_types is not None:
        if gemma3 and "sliding_window_pattern" in r.data:
            r.note(
                f"sliding_window_pattern={shown(r.data['sliding_window_pattern'])} is not used: "
                f"layer_types names each layer's kind (Gemma3TextConfig derives them from the "
                f"pattern only when layer_types is absent)"
            )
        return [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]
    if not gemma3:
        return [i for i in range(r.n_layers) if (i + 1) % 2]
    pattern = r.data.get("sliding_window_pattern", GEMMA3_PATTERN)
    check_int("sliding_window_pattern", pattern, 1, 1 << 62)  # null, 0: Gemma3TextConfig raises
    return [i for i in range(r.n_layers) if (i + 1) % pattern]


_ROPE_SOURCES = (
    ("full_attention", "rope_theta", "global"),
    ("sliding_attention", "rope_local_base_freq", "local"),
)


def _gemma3_rope(r: Reader, local: list[int]) -> dict[str, Any]:
    """rope_theta and rope_local_theta, the full-attention and the sliding layers' RoPE bases, as
    Gemma3TextConfig.convert_rope_params_to_dict builds rope_parameters (transformers 5): the
    file's rope_parameters keyed by layer type, rope_scaling merged into its full_attention
    entry, then an entry's missing rope_theta from rope_theta (full) or rope_local_base_freq
    (sliding), else default_theta (global 1e6, local 1e4); each entry's scaling (Gemma 3 4B+:
    linear × 8 on the full-attention layers) as rope_scaling (``scaling_by_layer_type``); a base
    no layer uses is not checked (Gemma3RotaryEmbedding builds only the layer types layer_types
    names)."""
    given = r.data.get("rope_parameters")
    if given is not None and not isinstance(given, Mapping):
        raise ConfigError(
            f"rope_parameters={shown(given)} must be an object keyed by layer type "
            f"('full_attention', 'sliding_attention')",
            field="rope_parameters",
        )
    params = dict(given or {})
    scaling = r.data.get("rope_scaling")
    if scaling is not None and not isinstance(scaling, Mapping):
        raise ConfigError(f"rope_scaling={shown(scaling)} must be an object or null", field="rope_scaling")
    ignored = [key for key in params if key not in LAYER_KINDS]
    if ignored:
        r.note(
            f"rope_parameters key(s) {name_keys(ignored)} are not read: {r.model_type.config_class} "
            f"keeps RoPE per layer type and Gemma3RotaryEmbedding reads only 'full_attention' and "
            f"'sliding_attention'; ignored"
        )
    defaults = default_theta(r.name)
    used = {"sliding_attention": bool(local), "full_attention": len(local) < r.n_layers}
    thetas, scalings = {}, {}
    for kind, legacy, scope in _ROPE_SOURCES:
        entry = params.get(kind)
        if entry is not None and not isinstance(entry, Mapping):
            raise ConfigError(
                f"rope_parameters['{kind}']={shown(entry)} must be an object (its rope_type and "
                f"rope_theta) or null",
                field="rope_parameters",
            )
        # an entry left out or null is {"rope_type": "default"}, as Gemma3TextConfig fills it (so a
        # legacy rope_scaling {"type": ...} merged into it keeps rope_type "default", as there)
        entry = {"rope_type": "default"} if entry is None else dict(entry)
        field, source = "rope_parameters", f"rope_parameters['{kind}']['rope_theta']"
        if kind == "full_attention" and scaling is not None:
            if given is not None and params.get(kind) is None:
                raise ConfigError(
                    "rope_scaling is merged into rope_parameters['full_attention'], which this "
                    "file's rope_parameters lacks (Gemma3TextConfig raises)",
                    field="rope_scaling",
                )
            entry.update(scaling)
            if "rope_theta" in scaling:
                field, source = "rope_scaling", "rope_scaling['rope_theta']"
        if "rope_theta" not in entry:
            entry["rope_theta"] = r.data.get(legacy, defaults[scope])
            field = source = legacy
        elif r.data.get(legacy) not in (None, entry["rope_theta"]):
            r.note(f"{legacy}={shown(r.data[legacy])} is not used: {source} gives the base")
        theta, base = entry["rope_theta"], number(entry["rope_theta"])
        if not used[kind]:  # no layer of this kind: its base is never read
            thetas[kind] = base if base is not None and base > 0 else defaults[scope]
            continue
        if theta is None:
            raise ConfigError(
                f"{source} is null: {r.model_type.config_class} keeps it as the {kind} "
                f"layers' RoPE base, and Gemma3RotaryEmbedding cannot rotate with none",
                field=field,
            )
        if base is None or base <= 0:
            raise ConfigError(
                f"{source}={shown(theta)} must be a positive number (the {kind} layers' RoPE base)",
                field=field,
            )
        # (rope_scaling: merged into the full-attention entry, as Gemma3TextConfig merges it)
        label = "rope_scaling" if kind == "full_attention" and scaling else f"rope_parameters['{kind}']"
        scalings[kind] = rope_scaling_entry(r, entry, label, nested=True)
        thetas[kind] = base
    return dict(
        rope_theta=thetas["full_attention"],
        rope_local_theta=thetas["sliding_attention"],
        **scaling_by_layer_type(scalings, used),
    )


def read(r: Reader) -> dict[str, Any]:
    """Gemma2Config / Gemma3TextConfig and their CausalLM (transformers 5): every block is
    x + post_norm(f(pre_norm(x))) for attention and MLP (input_layernorm, post_attention_layernorm,
    pre_feedforward_layernorm, post_feedforward_layernorm), every RMSNorm scales by (1 + weight)
    (Gemma3 also on q and k: q_norm, k_norm), the embeddings are × √hidden_size, the MLP gates
    through ACT2FN[hidden_activation] (GeGLU, no biases), the scores are ×
    query_pre_attn_scalar^-½, q/k/v/o carry attention_bias. Gemma2Attention soft-caps the scores
    (softcap=attn_logit_softcapping); Gemma3Attention keeps attn_logit_softcapping but never
    passes it to the attention function (transformers 5.24): a note. Both ForCausalLM soft-cap
    the logits (final_logit_softcapping). Gemma 3's RoPE: ``_gemma3_rope``."""
    gemma3 = r.name == "gemma3_text"
    act = r.get("hidden_activation")
    if act != GELU_TANH:
        raise ConfigError(
            f"hidden_activation={shown(act)} is not modelled: LLaMA Lab's GeGLU gates through "
            f"tanh-approximated GELU, {GELU_TANH!r} (every Gemma 2/3 checkpoint's; "
            f"{r.architecture}'s MLP runs ACT2FN[hidden_activation])",
            field="hidden_activation",
        )
    if r.flag("use_bidirectional_attention"):  # null: off (the model's `not`)
        raise ConfigError(
            f"use_bidirectional_attention=true is not modelled: LLaMA Lab's decoders are causal "
            f"({r.architecture} would let every token attend to the later ones too)",
            field="use_bidirectional_attention",
        )
    local = _local(r)
    # a window of 0 would mask every key of a sliding layer (transformers keeps k > q - W)
    window = r.count("sliding_window", 1, FAMILY_LIMITS["sliding_window"]) if local else None
    sliding_window, local_layers = windows(window, local, r.n_layers)
    attention = r.flag("attention_bias")
    attn_softcap = _softcap(r, "attn_logit_softcapping")
    if gemma3 and attn_softcap:
        r.note(
            f"attn_logit_softcapping={shown(r.get('attn_logit_softcapping'))} is not "
            f"applied by Gemma3Attention in transformers {KEY_TABLE['transformers']} (it keeps the "
            f"value and never passes it to the attention function): ignored"
        )
        attn_softcap = 0.0
    out: dict[str, Any] = dict(
        norm_position="sandwich",
        norm_type="rmsnorm",
        norm_plus_one=True,
        ffn_type="geglu",
        embed_scale=True,
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=False,
        qk_norm=gemma3,
        query_pre_attn_scalar=r.count("query_pre_attn_scalar", 1, FAMILY_LIMITS["query_pre_attn_scalar"]),
        sliding_window=sliding_window,
        local_layers=local_layers,
        attn_softcap=attn_softcap,
        logit_softcap=_softcap(r, "final_logit_softcapping"),
    )
    if gemma3:
        out.update(_gemma3_rope(r, local))
    return out


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    defaults = GEMMA2.defaults if model_type == "gemma2" else GEMMA3_TEXT.defaults
    out: dict[str, Any] = dict(
        hidden_activation=GELU_TANH,
        attention_bias=cfg.qkv_bias,
        query_pre_attn_scalar=cfg.query_pre_attn_scalar,
        # a window the model can build its sliding mask with, even with no sliding layer
        sliding_window=cfg.sliding_window or defaults["sliding_window"],
        layer_types=["sliding_attention" if flag else "full_attention" for flag in cfg.local_layer_flags],
        attn_logit_softcapping=cfg.attn_softcap or None,
        final_logit_softcapping=cfg.logit_softcap or None,
    )
    if model_type == "gemma3_text":  # a RoPE base per layer type
        out["rope_parameters"] = rope_by_layer_type(cfg)
    return out


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    shared = [
        (cfg.is_moe, "experts"),
        (cfg.qkv_bias != cfg.o_bias, "q/k/v and o biases differ"),
        (cfg.mlp_bias, "MLP biases"),
    ]
    if model_type == "gemma2":  # attention_bias for q/k/v/o, no MLP biases, no QK-norm
        return failing(shared + [(cfg.qk_norm, "QK-norm")])
    # Gemma3TextConfig: QK-norm on every layer; Gemma3Attention never applies a score cap
    return failing(
        shared
        + [
            (not cfg.qk_norm, "no QK-norm"),
            (
                cfg.attn_softcap > 0,
                "attention soft-capping (Gemma3Attention does not apply attn_logit_softcapping in "
                "transformers 5.24)",
            ),
            *nested_truncate(cfg),
        ]
    )


# Gemma 3's (and Olmo 3's) RoPE per layer type: the sliding layers' base of their own, and a
# scaling of the full-attention layers only
FEATURES = (
    Feature(
        "local_rope_base",
        "a RoPE base of its own on the sliding layers",
        lambda cfg: cfg.rope_local_theta != cfg.rope_theta,
    ),
    Feature(
        "global_rope_scaling",
        "a RoPE scaling of the full-attention layers only",
        lambda cfg: (
            cfg.rope_scaling is not None and not cfg.rope_scaling_local and any(cfg.local_layer_flags)
        ),
    ),
)


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    """Gemma 2/3's departures from LLaMA, each with its figure, in any family that has them."""
    out = []
    if cfg.norm_position == "sandwich":
        out.append(
            f"**Sandwich norms** (Gemma 2/3): each sublayer's output is normalised too before the "
            f"residual add, x + norm(f(norm(x))): 4 norms per block instead of 2 "
            f"({counts.sandwich_norms:,} more parameters)"
            + (", each scaling by 1 + γ (γ stored from 0)." if cfg.norm_plus_one else ".")
        )
    if cfg.ffn_type == "geglu":
        out.append(
            f"**GeGLU**: the gate goes through tanh-approximated GELU, not SiLU; the same three "
            f"matrices of {cfg.d_model:,}×{cfg.ffn_hidden:,} as SwiGLU."
        )
    if cfg.query_pre_attn_scalar != cfg.head_dim:
        out.append(
            f"**Score scale 1/√{cfg.query_pre_attn_scalar}** (query_pre_attn_scalar), not "
            f"1/√head_dim = 1/√{cfg.head_dim}: same FLOPs, softer or sharper attention."
        )
    local = sum(cfg.local_layer_flags)
    if local and cfg.pos_encoding == "rope" and cfg.rope_local_theta != cfg.rope_theta:
        out.append(
            f"**Two RoPE bases**: the {plural(local, 'windowed block')} "
            f"{'rotates' if local == 1 else 'rotate'} with base "
            f"{cfg.rope_local_theta:,.0f}, the {cfg.n_layers - local} global "
            f"{'one' if cfg.n_layers - local == 1 else 'ones'} with "
            f"{cfg.rope_theta:,.0f} (Gemma 3's local:global pattern)."
        )
    caps = [f"scores at ±{cfg.attn_softcap:g}"] * bool(cfg.attn_softcap)
    caps += [f"final logits at ±{cfg.logit_softcap:g}"] * bool(cfg.logit_softcap)
    if caps:
        out.append(
            f"**Soft-capping** (Gemma 2): x → cap · tanh(x / cap) bounds the {' and the '.join(caps)}; "
            f"element-wise work only (capped scores run as plain matmuls: SDPA takes no cap)."
        )
    return [Note("block", text) for text in out]


def _even_layers(n_layers: int) -> str:
    return ",".join(map(str, range(0, n_layers, 2)))


def _gemma3_local(n_layers: int, pattern: int = GEMMA3_PATTERN) -> str:
    """Gemma3TextConfig's sliding layers: every layer but each ``pattern``-th."""
    return ",".join(str(i) for i in range(n_layers) if (i + 1) % pattern)


# Gemma 2/3: sandwich norms with RMSNorm × (1 + γ), GeGLU (tanh GELU), embeddings × √d, a tied
# head, a window on the local layers, RMSNorm eps 1e-6
_GEMMA: dict[str, Any] = dict(
    norm_position="sandwich",
    norm_plus_one=True,
    ffn_type="geglu",
    embed_scale=True,
    tie_embeddings=True,
    norm_eps=1e-6,
)
# Gemma 3: QK-norm, five local layers to one global (sliding_window_pattern 6), RoPE θ 1e6 on the
# global layers and 1e4 on the local ones
_GEMMA3: dict[str, Any] = dict(**_GEMMA, qk_norm=True, rope_theta=1e6, rope_local_theta=1e4)

PRESETS: dict[str, dict[str, Any]] = {
    # google/gemma-3-1b-it config.json (tests/families/published_configs/gemma-3-1b-it.json, gemma3_text):
    # 4 heads of 256 (one KV head) on d 1152, window 512. Gemma3ForCausalLM on the meta device
    # (transformers 5.24): 999,885,952 = 301,989,888 embedding + 697,896,064 non-embedding; the
    # Gemma 3 report's Table 1: 302M + 698M
    "gemma-3-1b": dict(
        **_GEMMA3,
        vocab_size=262144,
        d_model=1152,
        n_layers=26,
        n_heads=4,
        n_kv_heads=1,
        head_dim=256,
        ffn_hidden=6912,
        max_seq_len=32768,
        sliding_window=512,
        local_layers=_gemma3_local(26),
        query_pre_attn_scalar=256,
    ),
    # google/gemma-3-27b-it config.json (tests/families/published_configs/gemma-3-27b-it.json): the text
    # decoder of the gemma3 wrapper (Gemma3TextConfig's defaults for the keys its text_config
    # leaves out: vocab 262208, 128k positions), scores × 168^-½, window 1024, linear ×8 RoPE
    # scaling on the global layers. Gemma3ForCausalLM on the meta device: 27,009,346,304
    # = 1,409,630,208 embedding + 25,599,716,096 non-embedding (the report: 1,416M + 25,600M; its
    # vision tower of 417M not counted)
    "gemma-3-27b": dict(
        **_GEMMA3,
        vocab_size=262208,
        d_model=5376,
        n_layers=62,
        n_heads=32,
        n_kv_heads=16,
        head_dim=128,
        ffn_hidden=21504,
        max_seq_len=131072,
        sliding_window=1024,
        local_layers=_gemma3_local(62),
        query_pre_attn_scalar=168,
        rope_scaling=dict(rope_type="linear", factor=8.0),  # the global layers' positions ÷ 8
        rope_scaling_local=False,
    ),
    # google/gemma-2-9b config.json (tests/families/published_configs/gemma-2-9b.json): window 4096 on the
    # even layers, scores soft-capped at 50 and logits at 30, RoPE θ 1e4. Gemma2ForCausalLM on the
    # meta device: 9,241,705,984 = 917,504,000 embedding + 8,324,201,984 non-embedding (the Gemma 2
    # report: 917,962,752 + 8,324,201,984; its embedding counts 256,128 rows, the file 256,000)
    "gemma-2-9b": dict(
        **_GEMMA,
        vocab_size=256000,
        d_model=3584,
        n_layers=42,
        n_heads=16,
        n_kv_heads=8,
        head_dim=256,
        ffn_hidden=14336,
        max_seq_len=8192,
        sliding_window=4096,
        local_layers=_even_layers(42),
        query_pre_attn_scalar=256,
        attn_softcap=50.0,
        logit_softcap=30.0,
    ),
}

# Counts published as embedding and non-embedding parameters (no total of the model itself):
# the Gemma 3 report (arXiv 2503.19786) Table 1, in millions; the Gemma 2 report (arXiv
# 2408.00118) Table 2, exact. transformers' embedding of the 27B text decoder is 1,409.6M (the
# report's 1,416M is 6.2M more: the multimodal projector's 6,194,304, 1,152 × 5,376 + 1,152, would
# make it 1,415.8M) and of Gemma 2 9B 917,504,000 (the report's is 256,128 × 3,584: 128 rows more
# than the file's vocab).
PUBLISHED = {
    "gemma-3-1b": Split(
        302e6, 698e6, 1e6, "1B: Vision Encoder 0, Embedding Parameters 302M, Non-embedding 698M"
    ),
    "gemma-3-27b": Split(
        1416e6,
        25600e6,
        1e6,
        "27B: Vision Encoder 417M, Embedding Parameters 1,416M, Non-embedding Parameters 25,600M",
    ),
    "gemma-2-9b": Split(
        917_962_752,
        8_324_201_984,
        1,
        "9B: Embedding Parameters 917,962,752, Non-embedding Parameters 8,324,201,984",
    ),
}

# The sandwich norms and GeGLU are choices of the recipe; these are Gemma's own fields
FIELDS = FieldGroup(
    "Gemma 2/3 (1 + γ norms, score scale, local RoPE, soft caps)",
    (
        FieldSpec(
            "norm_plus_one",
            "RMSNorm scales by 1 + γ",
            "toggle",
            help="Gemma: the stored γ starts at 0, so a norm starts as the identity scale.",
        ),
        FieldSpec(
            "query_pre_attn_scalar",
            "score scale s: scores / √s (0 = head_dim)",
            "int",
            help="Gemma's query_pre_attn_scalar: Gemma 3 27B scales by d_model / n_heads = 168, not by "
            "head_dim = 128.",
            minimum=0,
        ),
        FieldSpec(
            "rope_local_theta",
            "RoPE base of the windowed layers (0 = rope_theta)",
            "float",
            help="Gemma 3: 10,000 on its local layers, 1,000,000 on the global ones.",
            minimum=0.0,
            step=1000.0,
        ),
        FieldSpec(
            "attn_softcap",
            "attention-score soft cap (0 = none)",
            "float",
            help="Gemma 2: x → cap · tanh(x / cap) (50 on the scores, 30 on the logits).",
            minimum=0.0,
            step=1.0,
        ),
        FieldSpec(
            "logit_softcap",
            "final-logit soft cap (0 = none)",
            "float",
            help="Gemma 2: x → cap · tanh(x / cap) (50 on the scores, 30 on the logits).",
            minimum=0.0,
            step=1.0,
        ),
    ),
)

FAMILY = Family(
    "Gemma",
    (GEMMA2, GEMMA3_TEXT),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    features=FEATURES,
    presets=PRESETS,
    published=PUBLISHED,
    wrappers=(Wrapper("gemma3", "gemma3_text", "Gemma3Config", tie_default=True, vision="siglip"),),
    field_groups=(FIELDS,),
)
