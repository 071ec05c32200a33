"""Llama 4's text decoder (``llama4_text``; the ``llama4`` wrapper through its text_config), read as
Llama4TextConfig and its model read them (transformers 5.24): ``no_rope_layers`` (1: the block
rotates, 0: NoPE; by default every no_rope_layer_interval-th block NoPE), ``layer_types`` (by
default "chunked_attention" on the rotated blocks when attention_chunk_size is set: a query sees
its own chunk only), QK-norm after RoPE on the rotated blocks (use_qk_norm: Llama4TextL2Norm, no
weight), the attention temperature of the NoPE blocks (attn_temperature_tuning, floor_scale,
attn_scale), RoPE as complex multiplication of adjacent pairs, and the experts: num_local_experts
of intermediate_size with one shared expert as wide, σ of each token's top-k router logits
scaling the expert's input, on the ``moe_layers`` (by default every interleave_moe_layer_step-th
block); the dense blocks' width intermediate_size_mlp."""

from __future__ import annotations

import math
from typing import Any

from ...errors import ConfigError
from ...units import each_of, plural
from ..bounds import FAMILY_LIMITS
from ..fields import ModelFields
from ..hf.family import (
    LAYER_SET_HELP,
    Counts,
    Family,
    Feature,
    FieldGroup,
    FieldSpec,
    Note,
    Rounded,
    Wrapper,
    failing,
)
from ..hf.keys import ModelType
from ..hf.reader import Reader, all_but_every
from ..hf.write import rope_parameters
from ..messages import shown

LLAMA4_TEXT = ModelType(
    "llama4_text",
    "Llama4ForCausalLM",
    keys=frozenset(
        {
            "attention_bias",
            "attention_chunk_size",
            "layer_types",
            "no_rope_layers",
            "no_rope_layer_interval",
            "use_qk_norm",
            "attn_temperature_tuning",
            "floor_scale",
            "attn_scale",
            "intermediate_size_mlp",
            "num_local_experts",
            "num_experts_per_tok",
            "moe_layers",
            "interleave_moe_layer_step",
        }
    ),
    # (a null head_dim or num_key_value_heads Llama4TextConfig refuses: strict int)
    nullable=frozenset({"no_rope_layers", "moe_layers", "layer_types", "attention_chunk_size"}),
    holds=frozenset(
        {
            "interleaved_rope",
            "shared_experts",
            "sigmoid_scores",
            "chunked_attention",
            "qk_norm_after_rope",
            "attention_temperature",
            "llama4_experts",
            "nope_blocks",
        }
    ),
    module="llama4",
)

CHUNK_KINDS = ("chunked_attention", "full_attention")


def _rotated(r: Reader) -> list[bool]:
    """Per block: whether it rotates (``no_rope_layers[i]`` non-zero); an absent, null or empty
    list is derived from no_rope_layer_interval, as Llama4TextConfig.__post_init__ does."""
    flags = r.int_list("no_rope_layers")
    if not flags:
        interval = r.count("no_rope_layer_interval", 1, 1 << 62)  # 0: ZeroDivisionError
        return [(i + 1) % interval != 0 for i in range(r.n_layers)]
    if len(flags) < r.n_layers:
        raise ConfigError(
            f"no_rope_layers has {plural(len(flags), 'entry', 'entries')} for "
            f"{plural(r.n_layers, 'layer')}: Llama4TextAttention "
            f"reads no_rope_layers[layer_idx] for every layer (IndexError)",
            field="no_rope_layers",
        )
    if len(flags) > r.n_layers:
        r.note(
            f"no_rope_layers has {plural(len(flags), 'entry', 'entries')} for {plural(r.n_layers, 'layer')}: "
            f"the rest are never read"
        )
    return [bool(flag) for flag in flags[: r.n_layers]]


def _chunked(r: Reader, rotated: list[bool]) -> tuple[int, list[int]]:
    """(chunk size, the chunked blocks): layer_types' "chunked_attention" entries, or the
    rotated blocks when attention_chunk_size is set (none when it is null)."""
    chunk = r.get("attention_chunk_size")
    layer_types = r.str_list("layer_types")
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


def _temperature(r: Reader, nope: str) -> dict[str, Any]:
    """The NoPE blocks' attention temperature: on when attn_temperature_tuning is truthy (the
    model tests its truth: Meta's converted files wrote 4), q × (1 + attn_scale ·
    ln(1 + ⌊(p + 1) / floor_scale⌋))."""
    tuning = r.get("attn_temperature_tuning")
    if isinstance(tuning, int) and not isinstance(tuning, bool):
        r.note(f"attn_temperature_tuning={tuning} is read as {str(bool(tuning)).lower()} (its truth)")
        tuning = bool(tuning)
    elif not isinstance(tuning, bool):
        raise ConfigError(
            f"attn_temperature_tuning={shown(tuning)} must be true or false", field="attn_temperature_tuning"
        )
    floor = r.get("floor_scale")
    if isinstance(floor, float) and floor.is_integer():
        floor = int(floor)
    return dict(
        attn_temperature_layers=nope if tuning else "none",  # the NoPE blocks
        attn_floor_scale=floor,
        attn_temperature_scale=r.get("attn_scale"),
        attn_temperature_offset=1,  # ⌊(p + 1) / floor_scale⌋
    )


def _moe_blocks(r: Reader) -> str:
    """The sparse blocks as a layer set: ``moe_layers``, or every interleave_moe_layer_step-th."""
    n_layers = r.n_layers
    listed = r.int_list("moe_layers")
    if listed is None:
        step = r.count("interleave_moe_layer_step", 1, 1 << 62)
        return "all" if step == 1 else f"every:{step}"
    sparse = sorted({i for i in listed if 0 <= i < n_layers})
    if len(sparse) == n_layers:
        return "all"
    step = sparse[0] + 1 if sparse else 0
    if step > 1 and sparse == list(range(step - 1, n_layers, step)):  # as the default writes it
        return f"every:{step}"
    return ",".join(map(str, sparse)) or "none"


def read(r: Reader) -> dict[str, Any]:
    """Llama4TextConfig's fields (the docstring above)."""
    n_layers = r.n_layers
    rotated = _rotated(r)
    chunk, chunked = _chunked(r, rotated)
    if chunked:  # a chunk of 0 would divide by zero in the mask
        r.count("attention_chunk_size", 1, FAMILY_LIMITS["sliding_window"])
    attention = r.flag("attention_bias")
    experts = r.count("num_local_experts", 0, FAMILY_LIMITS["n_experts"])
    sparse = _moe_blocks(r)
    if sparse != "none" and experts < 1:
        raise ConfigError(
            "num_local_experts=0 cannot route the moe_layers' tokens (Llama4Router's top-k of no experts)",
            field="num_local_experts",
        )
    nope = ",".join(str(i) for i, rope in enumerate(rotated) if not rope) or "none"
    qk_norm = r.flag("use_qk_norm")
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
        ffn_hidden=r.get("intermediate_size_mlp"),
        n_experts=experts,
        experts_per_token=r.get("num_experts_per_tok"),
        expert_ffn_hidden=r.get("intermediate_size"),
        n_shared_experts=1,
        moe_layers=sparse,
        moe_style="llama4",
        moe_scoring="sigmoid",
        moe_renormalize=False,
        **_temperature(r, nope),
    )


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
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
        rope_parameters=rope_parameters(cfg.rope_theta, cfg.rope_scaling),
    )


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    """Llama4TextConfig: RoPE on adjacent pairs, no window but chunks, QK-norm after RoPE or
    none, Llama 4's expert block (one shared expert as wide as an expert), one attention_bias
    for q/k/v/o, no MLP biases."""
    temperature = cfg.temperature_layer_flags
    return failing(
        [
            (not cfg.rope_interleave, "RoPE on halves"),
            (any(cfg.local_layer_flags) and not cfg.chunked_attention, "a sliding window"),
            (cfg.qk_norm and cfg.qk_norm_scope != "rope_l2", "QK-norm before RoPE"),
            (cfg.moe_style != "llama4", "no Llama 4 expert block (moe_style='llama4')"),
            (
                any(temperature) and temperature != tuple(not rope for rope in cfg.rope_layer_flags),
                "an attention temperature on blocks other than the NoPE ones",
            ),
            (any(temperature) and cfg.attn_temperature_offset != 1, "a temperature offset of 0"),
            (cfg.qkv_bias != cfg.o_bias, "q/k/v and o biases differ"),
        ]
    )


FEATURES = (
    Feature("chunked_attention", "chunked attention", lambda cfg: cfg.chunked_attention),
    Feature(
        "qk_norm_after_rope", "QK-norm after RoPE", lambda cfg: cfg.qk_norm and cfg.qk_norm_scope == "rope_l2"
    ),
    Feature("attention_temperature", "attention temperature", lambda cfg: any(cfg.temperature_layer_flags)),
    Feature("llama4_experts", "Llama 4 experts", lambda cfg: cfg.moe_style == "llama4"),
)


def _temperature_note(cfg: ModelFields) -> str:
    sharpened = sum(cfg.temperature_layer_flags)
    floor, scale, offset = cfg.attn_floor_scale, cfg.attn_temperature_scale, cfg.attn_temperature_offset
    first = floor - offset  # the first position whose factor is above 1
    at = [(p, 1 + scale * math.log1p((p + offset) // floor)) for p in (first, 8 * floor - offset)]
    which = (
        (f"the {sharpened} NoPE blocks (Llama 4)" if sharpened > 1 else "the one NoPE block (Llama 4)")
        if cfg.temperature_layer_flags == tuple(not r for r in cfg.rope_layer_flags)
        else "every block (Mistral 4)"
        if sharpened == cfg.n_layers
        else f"{sharpened} of {plural(cfg.n_layers, 'block')}"
    )
    multiply = "multiplies" if sharpened == 1 else "multiply"
    return (
        f"**Attention temperature**: {which} {multiply} q at position p by 1 + {scale:g}·ln(1 + "
        f"⌊{'(p + 1)' if offset else 'p'} / {floor:,}⌋): 1 before position {first:,}, then "
        f"{at[0][1]:.3f} at {at[0][0]:,}, {at[1][1]:.3f} at {at[1][0]:,} (sharper attention far "
        f"into a long context; no parameters, no FLOPs counted)."
    )


def _experts_note(cfg: ModelFields, counts: Counts) -> str:
    sparse = sum(cfg.moe_layer_flags)
    dense = cfg.n_layers - sparse
    return (
        f"**Experts and a shared expert** (Llama 4): {plural(sparse, 'sparse block')} of {cfg.n_experts} "
        f"experts of {cfg.expert_ffn_hidden:,}; the router picks {cfg.experts_per_token} per token "
        f"and σ(its logit) scales the expert's input (not its output), beside one shared expert "
        f"as wide that every token passes"
        + (
            f"; the {plural(dense, 'dense block')} {'has' if dense == 1 else 'have'} an FFN of "
            f"{cfg.ffn_hidden:,}"
            if dense
            else ""
        )
        + f". A token uses {counts.active:,} of {counts.total:,} parameters "
        f"({counts.active / counts.total:.1%})."
    )


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    """QK-norm after RoPE, chunked attention, the attention temperature (Mistral 4's too) and
    Llama 4's expert block, in any family that has them."""
    out = []
    if cfg.qk_norm and cfg.qk_norm_scope == "rope_l2":
        out.append(
            Note(
                "attention",
                f"**QK-norm after RoPE** (Llama 4): q and k of the {sum(cfg.rope_layer_flags)} rotated "
                f"blocks are scaled to unit RMS over each head's {cfg.head_dim} dimensions after "
                f"rotation, with no γ (0 parameters); the NoPE blocks are not normalised.",
            )
        )
    local = sum(cfg.local_layer_flags)
    if local and cfg.chunked_attention:
        rest = cfg.n_layers - local
        out.append(
            Note(
                "window",
                f"**Chunked attention** (Llama 4): {local} of {plural(cfg.n_layers, 'block')} "
                f"{'cuts' if local == 1 else 'cut'} the sequence "
                f"into chunks of {cfg.sliding_window:,} positions; a query sees only the earlier keys "
                f"of its own chunk, so their scores cost at most T·W and their cache holds at most W "
                f"tokens"
                + (
                    f"; the other {rest} {'attends' if rest == 1 else 'attend'} every earlier token."
                    if rest
                    else "."
                ),
            )
        )
    if any(cfg.temperature_layer_flags):
        out.append(Note("temperature", _temperature_note(cfg)))
    if cfg.is_moe and cfg.moe_style == "llama4":
        out.append(Note("experts", _experts_note(cfg, counts)))
    return out


# What Scout and Maverick share: 48 blocks of 40 heads (128 wide) on 8 KV heads, every 4th block
# NoPE (with the attention temperature), the others rotated (base 500,000, adjacent pairs) and
# chunked (8,192), experts of 8,192 with one shared expert as wide, top-1, dense blocks of
# 16,384, a 202,048-token vocabulary
_LLAMA4: dict[str, Any] = dict(
    vocab_size=202048,
    d_model=5120,
    n_layers=48,
    n_heads=40,
    n_kv_heads=8,
    ffn_hidden=16384,
    rope_theta=500000.0,
    norm_eps=1e-5,
    rope_interleave=True,
    nope_layers=",".join(str(i) for i in range(3, 48, 4)),  # as the reader writes it
    sliding_window=8192,
    local_layers=all_but_every(48),
    chunked_attention=True,
    attn_temperature_layers=",".join(str(i) for i in range(3, 48, 4)),  # the NoPE blocks
    n_experts=16,
    experts_per_token=1,
    expert_ffn_hidden=8192,
    n_shared_experts=1,
    moe_style="llama4",
    moe_scoring="sigmoid",
    moe_renormalize=False,
)

PRESETS: dict[str, dict[str, Any]] = {
    # meta-llama/Llama-4-Scout-17B-16E text_config (the base model's 262,144-token context):
    # 16 experts on every block, QK-norm after RoPE. 107,769,861,120 on the meta device, 17.17B
    # active (the card: 17B activated, 109B total with the vision tower)
    # Its RoPE: Llama 3.1's scaling, ×16 over 8,192 positions, both frequency factors 1
    "llama-4-scout": dict(
        **_LLAMA4,
        max_seq_len=262144,
        qk_norm=True,
        qk_norm_scope="rope_l2",
        rope_scaling=dict(
            rope_type="llama3",
            factor=16.0,
            original_max_position_embeddings=8192,
            low_freq_factor=1.0,
            high_freq_factor=1.0,
        ),
    ),
    # meta-llama/Llama-4-Maverick-17B-128E-Instruct text_config: 128 experts on every 2nd block
    # (dense blocks between), no QK-norm, a 1,048,576-token context. 400,711,848,960 on the meta
    # device, 17.18B active (the card: 17B activated, 400B total)
    "llama-4-maverick": dict(**{**_LLAMA4, "n_experts": 128}, max_seq_len=1048576, moe_layers="every:2"),
}

# Meta's model card (meta-llama/llama-models models/llama4/MODEL_CARD.md @038acb9): the totals
# count the whole checkpoint, Scout's with its vision tower (the text decoder: 107.77B)
PUBLISHED = {
    "llama-4-scout": Rounded(109e9, 17e9, "Llama 4 Scout (17Bx16E): 17B (Activated) 109B (Total)"),
    "llama-4-maverick": Rounded(400e9, 17e9, "Llama 4 Maverick (17Bx128E): 17B (Activated) 400B (Total)"),
}

# Llama 4's chunked attention and the attention temperature (its NoPE blocks', every Mistral 4
# block's); its QK-norm after RoPE is a QK-norm scope, its expert block an expert block
FIELDS = FieldGroup(
    "Llama 4, Mistral 4 (chunks, attention temperature)",
    (
        FieldSpec(
            "chunked_attention",
            "the window is fixed chunks",
            "toggle",
            help="Llama 4: the windowed blocks (local_layers, sliding_window = the chunk size, 8,192) "
            "attend within fixed chunks: a query sees the earlier keys of its own chunk only.",
        ),
        FieldSpec(
            "attn_temperature_layers",
            "blocks with the attention temperature",
            "text",
            help="q at position p × (1 + scale · ln(1 + ⌊(p + offset) / floor⌋)): Llama 4 on its NoPE "
            "blocks (offset 1), Mistral 4 on every block (offset 0). " + LAYER_SET_HELP,
        ),
        FieldSpec(
            "attn_floor_scale", "temperature floor (positions)", "int", help="Llama 4 and Mistral 4: 8,192."
        ),
        FieldSpec("attn_temperature_scale", "temperature scale", "float", minimum=0.0, step=0.05),
        FieldSpec("attn_temperature_offset", "temperature offset (0 or 1)", "int", minimum=0),
    ),
)

FAMILY = Family(
    "Llama 4",
    (LLAMA4_TEXT,),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    features=FEATURES,
    presets=PRESETS,
    published=PUBLISHED,
    wrappers=(Wrapper("llama4", "llama4_text", "Llama4Config", tie_default=False, vision="llama4"),),
    field_groups=(FIELDS,),
)
