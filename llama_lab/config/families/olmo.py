"""OLMo 2 and Olmo 3 (``olmo2``, ``olmo3``): a LLaMA whose blocks have no input norms — x +
post_attention_layernorm(attn(x)), then x + post_feedforward_layernorm(mlp(x)) — and whose
QK-norm normalises all of q (q_norm over H·head_dim) and of k (k_norm over G·head_dim) before
RoPE; attention_bias on q/k/v/o, an MLP without biases; head_dim only if given. Olmo 3 adds
sliding-window attention on the layers layer_types names (by default three of every four: every
block but each fourth), with a RoPE base per layer type. The sidebar's group for the QK-norm
scope, NoPE blocks, partial RoPE and fused keys (OLMo 2, SmolLM3, Phi-3, GLM) is declared here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError
from ..bounds import FAMILY_LIMITS
from ..fields import ModelFields
from ..hf.family import (
    LAYER_SET_HELP,
    Counts,
    Exact,
    Family,
    Feature,
    FieldGroup,
    FieldSpec,
    Note,
    Published,
    Rounded,
    failing,
    head_dim_always_read,
)
from ..hf.keys import ModelType, default_theta
from ..hf.read import rope_scaling_entry, scaling_by_layer_type
from ..hf.reader import LAYER_KINDS, Reader, all_but_every, number, windows
from ..hf.write import nested_truncate, rope_by_layer_type
from ..messages import name_keys, shown

OLMO2 = ModelType(
    "olmo2",
    "Olmo2ForCausalLM",
    keys=frozenset({"attention_bias"}),
    nullable=frozenset({"num_key_value_heads"}),
    null_why=head_dim_always_read("olmo2"),
    block="olmo2",
    holds=frozenset({"qk_norm_projection"}),
)
# Olmo3Config: OLMo 2's block, sliding_window (4096) on the layers layer_types names "sliding_
# attention" (by default every layer but each fourth), rope_parameters keyed by layer type
OLMO3 = ModelType(
    "olmo3",
    "Olmo3ForCausalLM",
    keys=frozenset({"attention_bias", "sliding_window", "layer_types"}),
    nullable=frozenset({"num_key_value_heads", "layer_types"}),
    null_why={
        **head_dim_always_read("olmo3"),
        "sliding_window": "Olmo3Model builds its sliding-window mask on every forward and raises "
        "without a window",
    },
    block="olmo2",
    holds=frozenset({"qk_norm_projection", "local_rope_base", "global_rope_scaling"}),
    rope_by_layer_type=True,
)


def _olmo3_local(r: Reader) -> list[int]:
    """The sliding layers: layer_types, else Olmo3Config's default (every layer but each fourth)."""
    layer_types = r.layer_types()
    if layer_types is None:  # Olmo3Config.__post_init__
        return [i for i in range(r.n_layers) if (i + 1) % 4]
    return [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]


def _olmo3_rope(r: Reader, local: list[int]) -> dict[str, Any]:
    """rope_theta and rope_local_theta, the full-attention and the sliding layers' RoPE bases, as
    Olmo3Config.convert_rope_params_to_dict builds rope_parameters (transformers 5): the file's
    rope_parameters (by default a plain entry per layer type), rope_scaling merged into its
    full_attention entry only, then each entry's missing rope_theta from the top-level
    rope_theta — which the class pops for the full-attention entry, so the sliding entry always
    gets the class's default_theta (500,000) — and each entry's scaling (Olmo 3's YaRN on the
    full-attention layers) as rope_scaling (``scaling_by_layer_type``)."""
    given, scaling = r.data.get("rope_parameters"), r.data.get("rope_scaling")
    for key, value in (("rope_parameters", given), ("rope_scaling", scaling)):
        if value is not None and not isinstance(value, Mapping):
            raise ConfigError(f"{key}={shown(value)} must be an object or null", field=key)
    params = dict(given) if given is not None else {kind: {"rope_type": "default"} for kind in LAYER_KINDS}
    ignored = [key for key in params if key not in LAYER_KINDS]
    if ignored:
        r.note(
            f"rope_parameters key(s) {name_keys(ignored)} are not read: Olmo3RotaryEmbedding reads "
            f"only rope_parameters['full_attention'] and ['sliding_attention']; ignored"
        )
    if scaling is not None:
        if not isinstance(params.get("full_attention"), Mapping):
            raise ConfigError(
                "rope_scaling is merged into rope_parameters['full_attention'], which this file's "
                "rope_parameters lacks (Olmo3Config raises)",
                field="rope_scaling",
            )
        params["full_attention"] = {**params["full_attention"], **scaling}
    default = default_theta(r.name)
    top = r.data.get("rope_theta", default)  # popped once: the full-attention entry's only
    used = {"sliding_attention": bool(local), "full_attention": len(local) < r.n_layers}
    thetas, scalings = {}, {}
    for kind, fallback in (("full_attention", top), ("sliding_attention", default)):
        entry = params.get(kind)
        if entry is not None and not isinstance(entry, Mapping):
            raise ConfigError(
                f"rope_parameters['{kind}']={shown(entry)} must be an object", field="rope_parameters"
            )
        entry = {"rope_type": "default", "rope_theta": fallback, **(entry or {})}
        theta, base = entry["rope_theta"], number(entry["rope_theta"])
        if not used[kind]:  # no layer of this kind: its base is never read
            thetas[kind] = base if base is not None and base > 0 else default
            continue
        if base is None or base <= 0:
            raise ConfigError(
                f"the {kind} layers' RoPE base {shown(theta)} must be a positive number "
                f"(rope_parameters['{kind}']['rope_theta'] or rope_theta)",
                field="rope_parameters" if "rope_theta" in (params.get(kind) or {}) else "rope_theta",
            )
        # (rope_scaling: merged into the full-attention entry, as Olmo3Config merges it)
        label = "rope_scaling" if kind == "full_attention" and scaling else f"rope_parameters['{kind}']"
        scalings[kind] = rope_scaling_entry(r, entry, label, nested=True)
        thetas[kind] = base
    return dict(
        rope_theta=thetas["full_attention"],
        rope_local_theta=thetas["sliding_attention"],
        **scaling_by_layer_type(scalings, used),
    )


def read(r: Reader) -> dict[str, Any]:
    attention = r.flag("attention_bias")
    out: dict[str, Any] = dict(
        norm_position="output",
        qk_norm=True,
        qk_norm_scope="projection",
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=False,
        **r.floor_head_dim(),
    )
    if r.name == "olmo3":
        local = _olmo3_local(r)
        # a window of 0 or none would break the sliding mask Olmo3Model builds on every forward
        window = r.count("sliding_window", 1, FAMILY_LIMITS["sliding_window"])
        out["sliding_window"], out["local_layers"] = windows(window, local, r.n_layers)
        out.update(_olmo3_rope(r, local))
    return out


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    out: dict[str, Any] = dict(attention_bias=cfg.qkv_bias)
    if model_type == "olmo3":
        out.update(
            # a window the model can build its sliding mask with, even with no sliding layer
            sliding_window=cfg.sliding_window or OLMO3.defaults["sliding_window"],
            layer_types=["sliding_attention" if flag else "full_attention" for flag in cfg.local_layer_flags],
            rope_parameters=rope_by_layer_type(cfg),
        )
    return out


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    """Olmo2Config: QK-norm over the projections always, attention_bias for q/k/v/o, no MLP
    biases, no experts, no window (Olmo3Config: a window on any layers)."""
    return failing(
        [
            (not (cfg.qk_norm and cfg.qk_norm_scope == "projection"), "no QK-norm over the projections"),
            (model_type == "olmo2" and any(cfg.local_layer_flags), "a sliding window"),
            (cfg.is_moe, "experts"),
            (cfg.qkv_bias != cfg.o_bias, "q/k/v and o biases differ"),
            (cfg.mlp_bias, "MLP biases"),
        ]
        + (nested_truncate(cfg) if model_type == "olmo3" else [])
    )


FEATURES = (
    Feature(
        "qk_norm_projection",
        "QK-norm over the whole projection",
        lambda cfg: cfg.qk_norm and cfg.qk_norm_scope == "projection",
    ),
)


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    if cfg.norm_position != "output":
        return []
    return [
        Note(
            "positions",
            "**Output norms** (OLMo 2): each sublayer reads the residual stream itself and its "
            "output is normalised before the add, x + norm(f(x)); no norm before attention or FFN.",
        )
    ]


# OLMo 2's block, which Olmo 3 keeps: norms on the sublayers' outputs, QK-norm over all of q and k,
# RoPE θ 5e5, ε 1e-6
_OLMO2_BLOCK: dict[str, Any] = dict(
    norm_position="output", qk_norm=True, qk_norm_scope="projection", rope_theta=500000.0, norm_eps=1e-6
)

# Olmo 3's YaRN on its full-attention layers (the sliding ones rotate plain): ×8 over 8,192
# positions, cos and sin × the files' attention_factor 1.2079 (= 0.1 · ln 8 + 1)
_OLMO3_YARN: dict[str, Any] = dict(
    rope_scaling=dict(
        rope_type="yarn",
        factor=8.0,
        original_max_position_embeddings=8192,
        beta_fast=32.0,
        beta_slow=1.0,
        attention_factor=1.2079441541679836,
    ),
    rope_scaling_local=False,
)

PRESETS: dict[str, dict[str, Any]] = {
    # allenai/OLMo-2-1124-7B config.json (tests/families/published_configs/olmo-2-1124-7b.json): norms on
    # the sublayers' outputs only (x + norm(f(x))), QK-norm over all of q and k, 32 heads of 128
    # (MHA), vocab 100352, RoPE θ 5e5. Olmo2ForCausalLM on the meta device: 7,298,617,344, the
    # Hub's safetensors total
    "olmo-2-7b": dict(
        vocab_size=100352,
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=32,
        ffn_hidden=11008,
        max_seq_len=4096,
        **_OLMO2_BLOCK,
    ),
    # allenai/Olmo-3-1025-7B, as its published facts give it (no verbatim config.json was found:
    # tests/families/published_configs/olmo-3-7b.json, composite, SOURCES.md names each field's source):
    # OLMo 2's block with a window of 4096 on three of every four blocks, 32 heads of 128 (MHA),
    # vocab 100,278, a 65,536-token context, RoPE θ 5e5 on both layer types (YaRN ×8 on the
    # full-attention layers). Olmo3ForCausalLM on the meta device: 7,298,011,136
    "olmo-3-7b": dict(
        vocab_size=100278,
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=32,
        ffn_hidden=11008,
        max_seq_len=65536,
        **_OLMO2_BLOCK,
        sliding_window=4096,
        local_layers=all_but_every(32),
        **_OLMO3_YARN,
    ),
    # allenai/Olmo-3-1125-32B (composite as above): 64 blocks of 40 heads on 8 KV heads, FFN
    # 27,648. Olmo3ForCausalLM on the meta device: 32,233,522,176
    "olmo-3-32b": dict(
        vocab_size=100278,
        d_model=5120,
        n_layers=64,
        n_heads=40,
        n_kv_heads=8,
        ffn_hidden=27648,
        max_seq_len=65536,
        **_OLMO2_BLOCK,
        sliding_window=4096,
        local_layers=all_but_every(64),
        **_OLMO3_YARN,
    ),
}

PUBLISHED: dict[str, Published] = {
    # the Hub's safetensors total (its API's safetensors.total; tests/families/published_configs/SOURCES.md)
    "olmo-2-7b": Exact(7_298_617_344),
    # the model cards' table (allenai/Olmo-3-1025-7B, allenai/Olmo-3-1125-32B): sizes in its names
    "olmo-3-7b": Rounded(7e9, 7e9, "OLMo 3 7B | 5.93 Trillion | 32 | 4096 | 32 | 32 | 65,536"),
    "olmo-3-32b": Rounded(32e9, 32e9, "OLMo 3 32B | 5.50 Trillion | 64 | 5120 | 40 | 8 | 65,536"),
}

# OLMo 2's projection-wide QK-norm, SmolLM3's NoPE blocks, Phi-3's and GLM's partial rotary,
# Phi-3's fused checkpoint keys (OLMo 2's output norms are a choice of the recipe)
FIELDS = FieldGroup(
    "OLMo 2, SmolLM3, Phi-3, GLM (QK-norm scope, NoPE, partial RoPE)",
    (
        FieldSpec(
            "qk_norm_scope",
            "QK-norm over",
            "choice",
            help="head: one norm of head_dim per q and k head (Qwen3, Gemma 3, GLM); projection: one "
            "norm over all of q (H·D) and of k (G·D) (OLMo 2); rope_l2: per head after RoPE, no γ, "
            "on the rotated blocks only (Llama 4).",
        ),
        FieldSpec(
            "nope_layers",
            "blocks without RoPE (NoPE)",
            "text",
            help="SmolLM3 leaves every fourth block unrotated ('every:4'). " + LAYER_SET_HELP,
        ),
        FieldSpec(
            "partial_rotary_factor",
            "share of each head RoPE rotates",
            "float",
            help="partial_rotary_factor: Phi-4-mini 0.75, GLM-4.5 0.5 (the first dimensions of each head).",
            minimum=0.0,
            maximum=1.0,
            step=0.05,
        ),
        FieldSpec(
            "fused_keys",
            "fused checkpoint keys (qkv_proj, gate_up_proj)",
            "toggle",
            help="Phi-3 stores q/k/v and gate/up as one matrix each; the maths is the same.",
        ),
    ),
)

FAMILY = Family(
    "OLMo",
    (OLMO2, OLMO3),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    features=FEATURES,
    presets=PRESETS,
    published=PUBLISHED,
    field_groups=(FIELDS,),
)
