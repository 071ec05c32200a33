"""The config.json of OLMo 2, SmolLM3, Phi-3 / Phi-4-mini and GLM-4.5, read as their config
classes and models read it (transformers 5.24): OLMo 2's output norms and QK-norm over the
projection, SmolLM3's NoPE layers, Phi-3's fused projections and partial RoPE, GLM-4.5's partial
RoPE and DeepSeekMoE-style experts; head_dim floored as their attention sizes it (called by
``hf_families.family_fields``)."""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import ConfigError
from ..units import plural
from .bounds import FAMILY_LIMITS
from .hf_read import (
    Family,
    _bool,
    _count,
    _get,
    _layer_types,
    _list,
    _number,
    _windows,
)
from .messages import shown


def _floor_head_dim(data: Mapping[str, Any], family: Family) -> dict:
    """OLMo 2's, SmolLM3's, Phi-3's and GLM-4.5's attention take ``getattr(config, "head_dim",
    hidden_size // num_attention_heads)`` (their config classes have no head_dim field): a file
    without one gets the floor, which ModelConfig's own rule (d_model / n_heads, exact) derives
    only where it divides."""
    if "head_dim" in data:
        return {}
    hidden, heads = _get(data, family, "hidden_size"), _get(data, family, "num_attention_heads")
    numbers = all(isinstance(v, int) and not isinstance(v, bool) for v in (hidden, heads))
    if not numbers or heads < 1 or hidden < heads or hidden % heads == 0:
        return {}  # ModelConfig names what is wrong, or derives the same width
    return dict(head_dim=hidden // heads)


# The config classes that kwargs.setdefault("partial_rotary_factor", x) before folding it into
# rope_parameters: Glm4MoeConfig's 0.5, Qwen3NextConfig's and Qwen3.5's 0.25
ROTARY_SETDEFAULT = {"glm4_moe": 0.5, "qwen3_next": 0.25, "qwen3_5_text": 0.25, "qwen3_5_moe_text": 0.25}


def _partial_rotary(data: Mapping[str, Any], family: Family) -> float:
    """The share of each head RoPE rotates, as Phi3RotaryEmbedding and Glm4MoeRotaryEmbedding
    read it: ``rope_parameters.get("partial_rotary_factor", 1.0)`` after the config class built
    rope_parameters (``rope_scaling or rope_parameters``, then ``setdefault`` of the top-level
    key: Phi3Config.convert_rope_params_to_dict's ``kwargs.get(..., 1.0)``, Glm4MoeConfig's
    ``kwargs.setdefault(..., 0.5)``, Qwen3-Next's and Qwen3.5's 0.25, which PreTrainedConfig
    folds in only when it is not null)."""
    scaling, params = data.get("rope_scaling"), data.get("rope_parameters")
    source = scaling if scaling else params
    if isinstance(source, Mapping) and "partial_rotary_factor" in source:
        where = "rope_scaling" if source is scaling else "rope_parameters"
        key, value = f"{where}['partial_rotary_factor']", source["partial_rotary_factor"]
    else:
        key = "partial_rotary_factor"
        setdefault = ROTARY_SETDEFAULT.get(family.model_type)
        value = data.get(key, 1.0 if setdefault is None else setdefault)
        if value is None and setdefault is not None:
            return 1.0  # not folded in: the rotary embedding's .get(..., 1.0)
    number = _number(value)
    if number is None or not 0 < number <= 1:
        raise ConfigError(
            f"{key}={shown(value)} must be a number in (0, 1]: {family.architecture}'s RoPE rotates "
            f"int(head_dim × it) dimensions of each head",
            field="partial_rotary_factor",
        )
    return number


def _layer_list(indices: list[int], n_layers: int) -> str:
    """A layer-set string of ``indices``: "none", "all" or the comma list."""
    if not indices:
        return "none"
    return "all" if len(indices) == n_layers else ",".join(map(str, indices))


def _olmo2(data: Mapping[str, Any], family: Family) -> dict:
    """Olmo2Config / Olmo2ForCausalLM: Olmo2DecoderLayer has no input norms, x +
    post_attention_layernorm(attn(x)) then x + post_feedforward_layernorm(mlp(x)); Olmo2Attention
    normalises all of q (q_norm over H·head_dim) and of k (k_norm over G·head_dim) before RoPE;
    attention_bias on q/k/v/o, an MLP without biases."""
    attention = _bool(data, family, "attention_bias")
    return dict(
        norm_position="output",
        qk_norm=True,
        qk_norm_scope="projection",
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=False,
        **_floor_head_dim(data, family),
    )


def _smollm3(data: Mapping[str, Any], family: Family, n_layers: int, notes: list[str]) -> dict:
    """SmolLM3Config / SmolLM3ForCausalLM: SmolLM3Attention rotates q and k only where
    ``no_rope_layers[layer]`` is non-zero (SmolLM3Config.__post_init__: 0 on every
    no_rope_layer_interval-th layer when the list is null); the layers layer_types marks
    "sliding_attention" get the sliding-window mask (SmolLM3Config: the NoPE layers, when
    use_sliding_window and sliding_window is set); attention_bias on q/k/v/o, mlp_bias on the MLP."""
    attention, mlp = _bool(data, family, "attention_bias"), _bool(data, family, "mlp_bias")
    rope = _list(data, family, "no_rope_layers", int)
    if rope is None:
        interval = _count(data, family, "no_rope_layer_interval", 1, 1 << 62)  # 0: ZeroDivisionError
        rope = [int((i + 1) % interval != 0) for i in range(n_layers)]
    else:
        if len(rope) < n_layers:
            raise ConfigError(
                f"no_rope_layers has {plural(len(rope), 'entry', 'entries')} for "
                f"{plural(n_layers, 'layer')}: SmolLM3Attention "
                f"reads no_rope_layers[layer_idx] for every layer (IndexError)",
                field="no_rope_layers",
            )
        if len(rope) > n_layers:
            notes.append(
                f"no_rope_layers has {plural(len(rope), 'entry', 'entries')} for "
                f"{plural(n_layers, 'layer')}: the entries after "
                f"the last layer are never read; ignored"
            )
        given = data.get("no_rope_layer_interval")
        if isinstance(given, int) and given > 0 and not isinstance(given, bool):
            derived = [int((i + 1) % given != 0) for i in range(n_layers)]
            if [bool(r) for r in rope[:n_layers]] != [bool(r) for r in derived]:
                notes.append(
                    f"no_rope_layer_interval={given} is not used: no_rope_layers names each "
                    f"layer (SmolLM3Config derives it from the interval only when it is absent)"
                )
    nope = [i for i in range(n_layers) if not rope[i]]
    window = _get(data, family, "sliding_window")
    use_window = _bool(data, family, "use_sliding_window")
    layer_types = _layer_types(data, family, n_layers)
    if layer_types is None:  # SmolLM3Config.__post_init__
        local = nope if use_window and window is not None else []
    else:
        local = [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]
        if local and window is None:
            raise ConfigError(
                "layer_types names sliding layers but sliding_window is null: SmolLM3Model "
                "builds their sliding-window mask from it",
                field="sliding_window",
            )
        if local and not use_window:
            notes.append(
                "layer_types names sliding layers while use_sliding_window is false: SmolLM3Model "
                "still gives them the sliding-window mask (eager and SDPA attention window them; "
                "only flash attention reads use_sliding_window): read as windowed"
            )
    if local:
        window = _count(data, family, "sliding_window", 1, FAMILY_LIMITS["sliding_window"])
    sliding_window, local_layers = _windows(window, local, n_layers)
    return dict(
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=mlp,
        nope_layers=_layer_list(nope, n_layers),
        sliding_window=sliding_window,
        local_layers=local_layers,
        **_floor_head_dim(data, family),
    )


def _phi3_rope(data: Mapping[str, Any], family: Family, factor: float) -> None:
    """Phi3Config.validate_rope: the RoPE type (rope_scaling's, else rope_parameters') must be
    'default' or 'longrope' ('su' and 'yarn' are renamed longrope), and a longrope short_factor
    or long_factor must hold one number per rotated pair of int(hidden_size /
    num_attention_heads × factor) dimensions; Phi3Config raises otherwise."""
    scaling, params = data.get("rope_scaling"), data.get("rope_parameters")
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
    hidden, heads = _get(data, family, "hidden_size"), _get(data, family, "num_attention_heads")
    if kind != "longrope" or not all(isinstance(v, int) and not isinstance(v, bool) for v in (hidden, heads)):
        return
    pairs = int(hidden // max(heads, 1) * factor) // 2
    for name in ("short_factor", "long_factor"):
        value = source.get(name)
        if value is not None and (
            not isinstance(value, list) or len(value) != pairs or any(_number(v) is None for v in value)
        ):
            raise ConfigError(
                f"{field}['{name}'] must be a list of {pairs} numbers (one per rotated pair of "
                f"dimensions); Phi3Config raises otherwise",
                field=field,
            )


def _phi3(data: Mapping[str, Any], family: Family) -> dict:
    """Phi3Config / Phi3ForCausalLM: one qkv_proj (q, then k, then v) and one gate_up_proj (gate
    first), no biases anywhere (Phi3Attention and Phi3MLP take none: attention_bias and mlp_bias
    are never read); RoPE on the first int(head_dim × partial_rotary_factor) dimensions; every
    layer attends through sliding_window unless it is null (Phi3Model builds the sliding mask for
    all layers)."""
    window = _get(data, family, "sliding_window")
    if window is not None:  # a window of 0 would mask every key (transformers keeps k > q - W)
        window = _count(data, family, "sliding_window", 1, FAMILY_LIMITS["sliding_window"])
    factor = _partial_rotary(data, family)
    _phi3_rope(data, family, factor)
    return dict(
        fused_keys=True,
        qkv_bias=False,
        o_bias=False,
        mlp_bias=False,
        sliding_window=window or 0,
        partial_rotary_factor=factor,
        **_floor_head_dim(data, family),
    )


def _glm4_moe(data: Mapping[str, Any], family: Family, n_layers: int) -> dict:
    """Glm4MoeConfig / Glm4MoeForCausalLM: q/k/v carry attention_bias and o_proj never has one;
    q_norm and k_norm per head when use_qk_norm; RoPE on the first int(head_dim ×
    partial_rotary_factor) dimensions; blocks from first_k_dense_replace on are Glm4MoeMoE:
    Glm4MoeTopkRouter (sigmoid scores plus e_score_correction_bias choose the top-k among the
    best topk_group of n_group groups, renormalised when norm_topk_prob, × routed_scaling_factor)
    over n_routed_experts experts of moe_intermediate_size, plus one shared MLP of
    moe_intermediate_size × n_shared_experts; the blocks before are dense (intermediate_size)."""
    experts = _count(data, family, "n_routed_experts", 0, 1 << 20)
    first_dense = _count(data, family, "first_k_dense_replace", 0, 1 << 62)
    sparse = first_dense < n_layers
    if sparse and not experts:
        raise ConfigError(
            f"n_routed_experts=0 with sparse blocks from first_k_dense_replace={first_dense} on: "
            f"Glm4MoeTopkRouter cannot route over no experts",
            field="n_routed_experts",
        )
    out: dict[str, Any] = dict(
        qkv_bias=_bool(data, family, "attention_bias"),
        o_bias=False,
        mlp_bias=False,
        qk_norm=_bool(data, family, "use_qk_norm"),
        partial_rotary_factor=_partial_rotary(data, family),
        **_floor_head_dim(data, family),
    )
    if sparse:
        out.update(
            n_experts=experts,
            experts_per_token=_get(data, family, "num_experts_per_tok"),
            expert_ffn_hidden=_get(data, family, "moe_intermediate_size"),
            n_shared_experts=_get(data, family, "n_shared_experts"),
            moe_layers=f"from:{first_dense}",
            moe_renormalize=_bool(data, family, "norm_topk_prob"),
            moe_scoring="sigmoid",
            moe_groups=_get(data, family, "n_group"),
            moe_topk_groups=_get(data, family, "topk_group"),
            routed_scaling=_get(data, family, "routed_scaling_factor"),
        )
    return out
