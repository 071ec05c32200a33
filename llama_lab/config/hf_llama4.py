"""The config.json of Llama 4's text decoder (``llama4_text``; the ``llama4`` wrapper through its
text_config), read as Llama4TextConfig and its model read them (transformers 5.24):
``no_rope_layers`` (1: the block rotates, 0: NoPE; by default every no_rope_layer_interval-th
block NoPE), ``layer_types`` (by default "chunked_attention" on the rotated blocks when
attention_chunk_size is set: a query sees its own chunk only), QK-norm after RoPE on the rotated
blocks (use_qk_norm: Llama4TextL2Norm, no weight), the attention temperature of the NoPE blocks
(attn_temperature_tuning, floor_scale, attn_scale), RoPE as complex multiplication of adjacent
pairs, and the experts: num_local_experts of intermediate_size with one shared expert as wide,
σ of each token's top-k router logits scaling the expert's input, on the ``moe_layers`` (by
default every interleave_moe_layer_step-th block); the dense blocks' width intermediate_size_mlp.
Called by ``hf_families.family_fields``; the keys written back: ``llama4_keys`` (``hf_export``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ..errors import ConfigError
from ..units import each_of, plural
from .bounds import FAMILY_LIMITS
from .hf_read import Family, _bool, _count, _get, _list
from .messages import shown

if TYPE_CHECKING:
    from .model_config import ModelConfig

CHUNK_KINDS = ("chunked_attention", "full_attention")


def _rotated(data: Mapping[str, Any], family: Family, n_layers: int, notes: list[str]) -> list[bool]:
    """Per block: whether it rotates (``no_rope_layers[i]`` non-zero); an absent, null or empty
    list is derived from no_rope_layer_interval, as Llama4TextConfig.__post_init__ does."""
    flags = _list(data, family, "no_rope_layers", int)
    if not flags:
        interval = _count(data, family, "no_rope_layer_interval", 1, 1 << 62)  # 0: ZeroDivisionError
        return [(i + 1) % interval != 0 for i in range(n_layers)]
    if len(flags) < n_layers:
        raise ConfigError(
            f"no_rope_layers has {plural(len(flags), 'entry', 'entries')} for "
            f"{plural(n_layers, 'layer')}: Llama4TextAttention "
            f"reads no_rope_layers[layer_idx] for every layer (IndexError)",
            field="no_rope_layers",
        )
    if len(flags) > n_layers:
        notes.append(
            f"no_rope_layers has {plural(len(flags), 'entry', 'entries')} for {plural(n_layers, 'layer')}: "
            f"the rest are never read"
        )
    return [bool(flag) for flag in flags[:n_layers]]


def _chunked(data: Mapping[str, Any], family: Family, rotated: list[bool]) -> tuple[int, list[int]]:
    """(chunk size, the chunked blocks): layer_types' "chunked_attention" entries, or the
    rotated blocks when attention_chunk_size is set (none when it is null)."""
    chunk = _get(data, family, "attention_chunk_size")
    layer_types = _list(data, family, "layer_types", str)
    n_layers = len(rotated)
    if layer_types is None:
        return (chunk or 0), ([i for i, rope in enumerate(rotated) if rope] if chunk is not None else [])
    if set(layer_types) - set(CHUNK_KINDS) or len(layer_types) != n_layers:
        raise ConfigError(
            f"layer_types must name 'chunked_attention' or 'full_attention' for "
            f"{each_of(n_layers, 'layer')} (the two masks Llama4TextModel builds)",
            field="layer_types",
        )
    chunked = [i for i, kind in enumerate(layer_types) if kind == "chunked_attention"]
    if chunked and chunk is None:
        raise ConfigError(
            "layer_types names chunked_attention layers but attention_chunk_size is null: "
            "create_chunked_causal_mask raises without a chunk size",
            field="attention_chunk_size",
        )
    return (chunk or 0), chunked


def _temperature(data: Mapping[str, Any], family: Family, nope: str, notes: list[str]) -> dict:
    """The NoPE blocks' attention temperature: on when attn_temperature_tuning is truthy (the
    model tests its truth: Meta's converted files wrote 4), q × (1 + attn_scale ·
    ln(1 + ⌊(p + 1) / floor_scale⌋))."""
    tuning = _get(data, family, "attn_temperature_tuning")
    if isinstance(tuning, int) and not isinstance(tuning, bool):
        notes.append(f"attn_temperature_tuning={tuning} is read as {str(bool(tuning)).lower()} (its truth)")
        tuning = bool(tuning)
    elif not isinstance(tuning, bool):
        raise ConfigError(
            f"attn_temperature_tuning={shown(tuning)} must be true or false", field="attn_temperature_tuning"
        )
    floor = _get(data, family, "floor_scale")
    if isinstance(floor, float) and floor.is_integer():
        floor = int(floor)
    return dict(
        attn_temperature_layers=nope if tuning else "none",  # the NoPE blocks
        attn_floor_scale=floor,
        attn_temperature_scale=_get(data, family, "attn_scale"),
        attn_temperature_offset=1,  # ⌊(p + 1) / floor_scale⌋
    )


def _moe_blocks(data: Mapping[str, Any], family: Family, n_layers: int) -> str:
    """The sparse blocks as a layer set: ``moe_layers``, or every interleave_moe_layer_step-th."""
    listed = _list(data, family, "moe_layers", int)
    if listed is None:
        step = _count(data, family, "interleave_moe_layer_step", 1, 1 << 62)
        return "all" if step == 1 else f"every:{step}"
    sparse = sorted({i for i in listed if 0 <= i < n_layers})
    if len(sparse) == n_layers:
        return "all"
    step = sparse[0] + 1 if sparse else 0
    if step > 1 and sparse == list(range(step - 1, n_layers, step)):  # as the default writes it
        return f"every:{step}"
    return ",".join(map(str, sparse)) or "none"


def llama4(data: Mapping[str, Any], family: Family, n_layers: int, notes: list[str]) -> dict:
    """Llama4TextConfig's fields (the docstring above)."""
    rotated = _rotated(data, family, n_layers, notes)
    chunk, chunked = _chunked(data, family, rotated)
    if chunked:  # a chunk of 0 would divide by zero in the mask
        _count(data, family, "attention_chunk_size", 1, FAMILY_LIMITS["sliding_window"])
    attention = _bool(data, family, "attention_bias")
    experts = _count(data, family, "num_local_experts", 0, FAMILY_LIMITS["n_experts"])
    sparse = _moe_blocks(data, family, n_layers)
    if sparse != "none" and experts < 1:
        raise ConfigError(
            "num_local_experts=0 cannot route the moe_layers' tokens (Llama4Router's top-k of no experts)",
            field="num_local_experts",
        )
    nope = ",".join(str(i) for i, rope in enumerate(rotated) if not rope) or "none"
    qk_norm = _bool(data, family, "use_qk_norm")
    return dict(
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=False,
        rope_interleave=True,  # complex multiplication of adjacent pairs (apply_rotary_emb)
        nope_layers=nope,
        sliding_window=chunk if chunked else 0,
        local_layers="all" if len(chunked) == n_layers else ",".join(map(str, chunked)) or "all",
        chunked_attention=bool(chunked),
        qk_norm=qk_norm,
        qk_norm_scope="rope_l2" if qk_norm else "head",
        ffn_hidden=_get(data, family, "intermediate_size_mlp"),
        n_experts=experts,
        experts_per_token=_get(data, family, "num_experts_per_tok"),
        expert_ffn_hidden=_get(data, family, "intermediate_size"),
        n_shared_experts=1,
        moe_layers=sparse,
        moe_style="llama4",
        moe_scoring="sigmoid",
        moe_renormalize=False,
        **_temperature(data, family, nope, notes),
    )


def llama4_keys(cfg: "ModelConfig") -> dict:
    """The Llama4TextConfig keys of ``cfg`` (``hf_export.to_hf_config``)."""
    local = cfg.local_layer_flags
    # layer_types only where it departs from the default, the rotated blocks chunked
    derived = any(local) and local == cfg.rope_layer_flags
    return dict(
        attention_bias=cfg.qkv_bias,
        intermediate_size=cfg.expert_ffn_hidden,
        intermediate_size_mlp=cfg.ffn_hidden,
        num_local_experts=cfg.n_experts,
        num_experts_per_tok=cfg.experts_per_token,
        moe_layers=[i for i, sparse in enumerate(cfg.moe_layer_flags) if sparse],
        use_qk_norm=cfg.qk_norm,
        no_rope_layers=[int(rope) for rope in cfg.rope_layer_flags],
        attention_chunk_size=cfg.sliding_window if any(local) else None,
        layer_types=None
        if derived
        else ["chunked_attention" if flag else "full_attention" for flag in local],
        attn_temperature_tuning=any(cfg.temperature_layer_flags),
        floor_scale=cfg.attn_floor_scale,
        attn_scale=cfg.attn_temperature_scale,
    )
