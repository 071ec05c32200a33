"""Phi-3, Phi-3.5-mini and Phi-4-mini (``phi3``): one qkv_proj (q, then k, then v) and one
gate_up_proj (gate first), no biases anywhere (Phi3Attention and Phi3MLP take none: attention_bias
and mlp_bias are never read); RoPE on the first int(head_dim × partial_rotary_factor) dimensions
(rope_parameters, or the top-level key Phi3Config folds into it); every layer attends through
sliding_window unless it is null (Phi3Model builds the sliding mask for all layers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError
from ..bounds import FAMILY_LIMITS
from ..fields import ModelFields
from ..hf.family import Counts, Exact, Family, Feature, Note, failing, head_dim_always_read
from ..hf.keys import ModelType
from ..hf.read import rope_scaling_entry
from ..hf.reader import Reader, number
from ..messages import shown

PHI3 = ModelType(
    "phi3",
    "Phi3ForCausalLM",
    keys=frozenset(
        {"sliding_window", "partial_rotary_factor", "original_max_position_embeddings", "resid_pdrop"}
    ),
    nullable=frozenset({"num_key_value_heads", "sliding_window"}),
    null_why=head_dim_always_read("phi3"),
    holds=frozenset({"fused_keys", "partial_rope"}),
)


def _check_rope(r: Reader, factor: float) -> None:
    """Phi3Config.validate_rope: the RoPE type (rope_scaling's, else rope_parameters') must be
    'default' or 'longrope' ('su' and 'yarn' are renamed longrope), and a longrope short_factor
    or long_factor must hold one number per rotated pair of int(hidden_size /
    num_attention_heads × factor) dimensions; Phi3Config raises otherwise."""
    scaling, params = r.data.get("rope_scaling"), r.data.get("rope_parameters")
    source = scaling if scaling else params
    if not isinstance(source, Mapping):
        return
    field = "rope_scaling" if source is scaling else "rope_parameters"
    kind = source.get("rope_type", source.get("type", "default"))
    kind = "longrope" if kind in ("su", "yarn") else kind
    if kind not in ("default", "longrope"):
        raise ConfigError(
            f"{field} names RoPE type {shown(kind)}: Phi3Config takes only 'default' or 'longrope' "
            f"('su' and 'yarn' read as longrope) and raises on any other",
            field=field,
        )
    hidden, heads = r.get("hidden_size"), r.get("num_attention_heads")
    if kind != "longrope" or not all(isinstance(v, int) and not isinstance(v, bool) for v in (hidden, heads)):
        return
    pairs = int(hidden // max(heads, 1) * factor) // 2
    for name in ("short_factor", "long_factor"):
        value = source.get(name)
        if value is not None and (
            not isinstance(value, list) or len(value) != pairs or any(number(v) is None for v in value)
        ):
            raise ConfigError(
                f"{field}['{name}'] must be a list of {pairs} numbers (one per rotated pair of "
                f"dimensions); Phi3Config raises otherwise",
                field=field,
            )


def _longrope(r: Reader) -> dict[str, Any]:
    """Phi3Config's scaled RoPE (rope_scaling's, else rope_parameters'): 'su' and 'yarn' read as
    longrope, whose original_max_position_embeddings is the config's own (the top-level key,
    4096 by default), which ``standardize_rope_params`` puts over the entry's."""
    scaling, params = r.data.get("rope_scaling"), r.data.get("rope_parameters")
    source = scaling if scaling else params
    if not isinstance(source, Mapping) or source.get("rope_type", source.get("type")) in (None, "default"):
        return {}
    where = "rope_scaling" if source is scaling else "rope_parameters"
    original = r.get("original_max_position_embeddings")
    longrope = {**source, "rope_type": "longrope"}
    return {"rope_scaling": rope_scaling_entry(r, longrope, where, original=original)}


def read(r: Reader) -> dict[str, Any]:
    window = r.get("sliding_window")
    if window is not None:  # a window of 0 would mask every key (transformers keeps k > q - W)
        window = r.count("sliding_window", 1, FAMILY_LIMITS["sliding_window"])
    factor = r.partial_rotary()
    _check_rope(r, factor)
    return dict(
        fused_keys=True,
        qkv_bias=False,
        o_bias=False,
        mlp_bias=False,
        sliding_window=window or 0,
        partial_rotary_factor=factor,
        **r.floor_head_dim(),
        **_longrope(r),
    )


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    out = dict(
        sliding_window=cfg.sliding_window if any(cfg.local_layer_flags) else None,
        partial_rotary_factor=cfg.partial_rotary_factor,
    )
    if cfg.rope_scaling is not None:  # Phi3Config's own, which it puts over rope_parameters'
        out["original_max_position_embeddings"] = cfg.rope_scaling.original_max_position_embeddings
    return out


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    """Phi3Config: fused keys, no biases, a window on every layer or none."""
    local = cfg.local_layer_flags
    return failing(
        [
            (cfg.qk_norm, "QK-norm"),
            (any(local) and not all(local), "a window on some layers only"),
            (cfg.is_moe, "experts"),
            (cfg.qkv_bias or cfg.o_bias or cfg.mlp_bias, "biases"),
            (not cfg.fused_keys, "separate q/k/v and gate/up keys"),
            (
                cfg.rope_scaling is not None and cfg.rope_scaling.rope_type != "longrope",
                "a RoPE scaling other than longrope",
            ),
        ]
    )


FEATURES = (
    Feature("fused_keys", "fused qkv_proj / gate_up_proj keys", lambda cfg: cfg.fused_keys),
    Feature("partial_rope", "partial RoPE", lambda cfg: cfg.partial_rotary_factor != 1),
)


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    if cfg.pos_encoding != "rope" or cfg.is_mla or cfg.rope_dim >= cfg.head_dim:
        return []
    return [
        Note(
            "positions",
            f"**Partial RoPE**: only the first {cfg.rope_dim} of each head's {cfg.head_dim} "
            f"dimensions rotate (partial_rotary_factor {cfg.partial_rotary_factor:g}); the rest "
            f"carry content only.",
        )
    ]


PRESETS: dict[str, dict[str, Any]] = {
    # microsoft/Phi-4-mini-instruct config.json (tests/families/published_configs/phi-4-mini-instruct.json):
    # qkv_proj and gate_up_proj fused, RoPE on the first 96 of each head's 128 dimensions, 24 heads
    # on 8 KV heads, a tied head of vocab 200064, a window of 262144 on every layer (longer than
    # its 131072 positions), LongRoPE past 4096. Phi3ForCausalLM on the meta device:
    # 3,836,021,760, the Hub's safetensors total
    "phi-4-mini": dict(
        vocab_size=200064,
        d_model=3072,
        n_layers=32,
        n_heads=24,
        n_kv_heads=8,
        ffn_hidden=8192,
        max_seq_len=131072,
        tie_embeddings=True,
        sliding_window=262144,
        partial_rotary_factor=0.75,
        fused_keys=True,
        norm_eps=1e-5,
        # LongRoPE past its 4,096 pre-training positions: θ_i ÷ short_factor[i] (all 1) up to
        # them, ÷ long_factor[i] beyond, cos and sin × √(1 + ln 32 / ln 4096)
        rope_scaling=dict(
            rope_type="longrope",
            original_max_position_embeddings=4096,
            short_factor=(1.0,) * 48,
            long_factor=(
                1.0,
                1.118320672,
                1.250641126,
                1.398617824,
                1.564103225,
                1.74916897,
                1.956131817,
                2.187582649,
                2.446418898,
                2.735880826,
                3.059592084,
                3.421605075,
                3.826451687,
                4.279200023,
                4.785517845,
                5.351743533,
                5.984965424,
                6.693110555,
                7.485043894,
                8.370679318,
                9.36110372,
                10.4687158,
                11.70738129,
                13.09260651,
                14.64173252,
                16.37415215,
                18.31155283,
                20.47818807,
                22.90118105,
                25.61086418,
                28.64115884,
                32.03,
                32.1,
                32.13,
                32.23,
                32.6,
                32.61,
                32.64,
                32.66,
                32.7,
                32.71,
                32.93,
                32.97,
                33.28,
                33.49,
                33.5,
                44.16,
                47.77,
            ),
        ),
    ),
    # microsoft/Phi-3-mini-4k-instruct config.json
    # (tests/families/published_configs/phi-3-mini-4k-instruct.json):
    # fused projections, 32 heads of 96 (MHA), a window of 2047 on every layer, vocab 32064.
    # Phi3ForCausalLM on the meta device: 3,821,079,552, the Hub's safetensors total
    "phi-3-mini-4k": dict(
        vocab_size=32064,
        d_model=3072,
        n_layers=32,
        n_heads=32,
        n_kv_heads=32,
        ffn_hidden=8192,
        max_seq_len=4096,
        sliding_window=2047,
        fused_keys=True,
        norm_eps=1e-5,
    ),
}

# the Hub's safetensors totals (tests/families/published_configs/SOURCES.md)
PUBLISHED = {"phi-4-mini": Exact(3_836_021_760), "phi-3-mini-4k": Exact(3_821_079_552)}

FAMILY = Family(
    "Phi-3",
    (PHI3,),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    features=FEATURES,
    presets=PRESETS,
    published=PUBLISHED,
)
