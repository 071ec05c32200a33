"""DeepSeek-V2, DeepSeek-V3 (and Kimi K2, which runs V3's code) and Mistral Small 4
(``deepseek_v2``, ``deepseek_v3``, ``mistral4``): MLA — every head's K and V rebuilt from one
cached latent of kv_lora_rank values per token, plus one RoPE key of qk_rope_head_dim shared by
all heads (DeepSeek-V2 §2.1) — and DeepSeekMoE: dense blocks before first_k_dense_replace, then
routed experts (softmax scores, greedy or group-limited top-k for V2; sigmoid scores with a
correction bias choosing among the best topk_group of n_group groups, renormalised when
norm_topk_prob, × routed_scaling_factor for V3) beside shared experts. Mistral4Config keeps V3's
layout with a softmax router whose groups are ranked by their two best scores, and sharpens every
query by 1 + β · ln(1 + ⌊p / original_max_position_embeddings⌋)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError
from ...units import plural
from ..fields import ModelFields
from ..hf.family import Counts, Family, Feature, FieldGroup, FieldSpec, Note, Rounded, failing
from ..hf.keys import ModelType, default_rope
from ..hf.reader import Reader
from ..messages import shown

_DEEPSEEK_KEYS = frozenset(
    {
        "attention_bias",
        "q_lora_rank",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "qk_nope_head_dim",
        "v_head_dim",
        "moe_intermediate_size",
        "n_routed_experts",
        "n_shared_experts",
        "num_experts_per_tok",
        "routed_scaling_factor",
        "n_group",
        "topk_group",
        "first_k_dense_replace",
    }
)
# MLA and the DeepSeekMoE routing the three model types share (Mistral 4 adds its own two)
_HOLDS = frozenset(
    {
        "mla",
        "interleaved_rope",
        "value_width",
        "shared_experts",
        "sigmoid_scores",
        "expert_groups",
        "routed_scaling",
    }
)
DEEPSEEK_V2 = ModelType(
    "deepseek_v2",
    "DeepseekV2ForCausalLM",
    keys=_DEEPSEEK_KEYS | {"mlp_bias", "topk_method", "num_experts"},
    # n_group and topk_group are null in a greedy file transformers writes
    nullable=frozenset({"num_key_value_heads", "head_dim", "q_lora_rank", "n_group", "topk_group"}),
    holds=_HOLDS,
)
DEEPSEEK_V3 = ModelType(
    "deepseek_v3",
    "DeepseekV3ForCausalLM",
    keys=_DEEPSEEK_KEYS
    | {
        "norm_topk_prob",
        "rope_interleave",
        "num_local_experts",
        "num_nextn_predict_layers",
        "num_mtp_layers",
    },
    # null norm_topk_prob and rope_interleave read as false, as its model's `if` reads them
    nullable=frozenset(
        {
            "num_key_value_heads",
            "head_dim",
            "q_lora_rank",
            "norm_topk_prob",
            "rope_interleave",
            "num_nextn_predict_layers",
        }
    ),
    holds=_HOLDS,
)
MISTRAL4 = ModelType(
    "mistral4",
    "Mistral4ForCausalLM",
    keys=_DEEPSEEK_KEYS | {"norm_topk_prob", "rope_interleave", "num_local_experts"},
    # a null norm_topk_prob or rope_interleave reads as false (the model's `if`); head_dim
    # Mistral4Config sets from the q/k parts whatever the file says
    nullable=frozenset(
        {"num_key_value_heads", "head_dim", "q_lora_rank", "norm_topk_prob", "rope_interleave"}
    ),
    holds=_HOLDS | {"group_top2", "attention_temperature"},
)
MLA_TYPES = ("deepseek_v2", "deepseek_v3", "mistral4")


def _read_mla_and_experts(r: Reader) -> dict[str, Any]:
    """MLA and DeepSeekMoE of DeepSeek-V2 and V3. transformers' config sets head_dim to
    qk_rope_head_dim (the rotary width) whatever the file says; LLaMA Lab's head_dim is a q/k
    head's whole width, qk_nope_head_dim + qk_rope_head_dim."""
    v3 = r.name != "deepseek_v2"  # V3's keys: DeepSeek-V3, V3.2, Mistral 4 (softmax scores)
    for key in ("attention_bias",) + (() if v3 else ("mlp_bias",)):
        if r.flag(key):
            raise ConfigError(
                f"{key}=true is not modelled for {r.name} (no published DeepSeek "
                f"model sets it); LLaMA Lab refuses rather than count the model wrong",
                field=key,
            )
    nope = r.count("qk_nope_head_dim", 0, 1 << 20)
    rope = r.count("qk_rope_head_dim", 0, 1 << 20)
    experts = r.count("n_routed_experts", 0, 1 << 20)
    first_dense = r.count("first_k_dense_replace", 0, 1 << 62)
    top_k = r.get("num_experts_per_tok")
    if experts and first_dense < r.n_layers and top_k is None:
        raise ConfigError(
            f"num_experts_per_tok is null: {r.architecture}'s router needs it (how many of "
            f"the {experts} experts each token uses)",
            field="num_experts_per_tok",
        )
    groups, topk_groups = r.get("n_group"), r.get("topk_group")
    if not v3:
        method = r.get("topk_method")
        if method not in ("greedy", "group_limited_greedy"):
            raise ConfigError(
                f"topk_method={shown(method)} must be 'greedy' or 'group_limited_greedy' "
                f"(the two DeepseekV2TopkRouter runs)",
                field="topk_method",
            )
        if method == "greedy":
            groups = topk_groups = 1
        elif groups is None or topk_groups is None:
            raise ConfigError(
                "topk_method='group_limited_greedy' needs n_group and topk_group (DeepseekV2's "
                "router keeps the best topk_group of n_group expert groups)",
                field="n_group" if groups is None else "topk_group",
            )
    sparse = experts > 0 and first_dense < r.n_layers
    return dict(
        kv_lora_rank=r.get("kv_lora_rank"),
        q_lora_rank=r.get("q_lora_rank") or 0,
        qk_rope_head_dim=rope,
        head_dim=nope + rope,
        v_head_dim=r.get("v_head_dim"),
        rope_interleave=r.flag("rope_interleave") if v3 else True,
        n_experts=experts if sparse else 0,
        experts_per_token=top_k if sparse else 0,
        expert_ffn_hidden=r.get("moe_intermediate_size"),
        n_shared_experts=r.get("n_shared_experts") if sparse else 0,
        moe_layers=f"from:{first_dense}" if sparse else "all",
        moe_renormalize=r.flag("norm_topk_prob") if v3 else False,
        moe_scoring="sigmoid" if v3 else "softmax",
        moe_groups=1 if groups is None else groups,
        moe_topk_groups=1 if topk_groups is None else topk_groups,
        routed_scaling=r.get("routed_scaling_factor"),
    )


def _rope_number(rope: Mapping[str, Any], key: str, rule: str, whole: bool) -> float:
    """rope_parameters' ``key`` for Mistral 4's temperature, a number (``whole``: an integer ≥ 1)."""
    value = rope.get(key)
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if number is None or (whole and (number < 1 or number != int(number))):
        raise ConfigError(
            f"rope_parameters.{key}={shown(value)} must be {rule}: Mistral4Attention scales every "
            f"query by 1 + β · ln(1 + ⌊position / original_max_position_embeddings⌋)",
            field="rope_parameters",
        )
    return number


def _read_mistral4(r: Reader, out: dict[str, Any]) -> None:
    """Mistral4Config / Mistral4ForCausalLM (Mistral Small 4): DeepSeek-V3's MLA and expert
    layout with a softmax router (no correction bias) whose groups are ranked by their two best
    scores, and every query × 1 + β · ln(1 + ⌊p / original_max_position_embeddings⌋)
    (``get_llama_4_attn_scale``, β = rope_parameters' llama_4_scaling_beta)."""
    groups = out["moe_groups"]  # checked by ModelConfig: top-2 ranking only of a whole count > 1
    grouped = isinstance(groups, int) and not isinstance(groups, bool) and groups > 1
    out.update(moe_scoring="softmax", moe_group_top2=grouped and out["n_experts"] > 0)
    rope = r.data.get("rope_parameters") or r.data.get("rope_scaling")
    if rope is None:  # absent or null: Mistral4Config.__post_init__'s YaRN
        rope = dict(default_rope(r.name))
    if not isinstance(rope, Mapping):
        raise ConfigError(f"rope_parameters={shown(rope)} must be an object", field="rope_parameters")
    beta = _rope_number(rope, "llama_4_scaling_beta", "a number", whole=False)
    floor = _rope_number(rope, "original_max_position_embeddings", "a whole number ≥ 1", whole=True)
    out.update(
        attn_temperature_layers="all",
        attn_temperature_scale=beta,
        attn_floor_scale=int(floor),  # (a whole number, checked)
        attn_temperature_offset=0,  # ⌊p / floor⌋
    )


def read(r: Reader) -> dict[str, Any]:
    out = _read_mla_and_experts(r)
    if r.name == "mistral4":
        _read_mistral4(r, out)
    return out


def key_notes(r: Reader) -> None:
    mtp = r.data.get("num_nextn_predict_layers", r.data.get("num_mtp_layers"))
    if r.name == "deepseek_v3" and mtp:
        r.note(
            f"num_nextn_predict_layers={shown(mtp)}: the multi-token-prediction module(s) are "
            f"not part of {r.architecture} (its loader skips them): not counted. DeepSeek-V3's "
            f"685B on the Hub = 671B main model + 14B MTP module"
        )


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    flags = cfg.moe_layer_flags
    out: dict[str, Any] = dict(
        q_lora_rank=cfg.q_lora_rank or None,
        kv_lora_rank=cfg.kv_lora_rank,
        qk_rope_head_dim=cfg.qk_rope_head_dim,
        qk_nope_head_dim=cfg.qk_nope_head_dim,
        v_head_dim=cfg.v_head_dim,
        head_dim=cfg.qk_rope_head_dim,  # transformers' config sets it so (the rotary width)
        attention_bias=False,
        n_routed_experts=cfg.n_experts,
        num_experts_per_tok=cfg.experts_per_token or None,
        moe_intermediate_size=cfg.expert_ffn_hidden,
        n_shared_experts=cfg.n_shared_experts,
        first_k_dense_replace=flags.index(True) if any(flags) else cfg.n_layers,
        routed_scaling_factor=cfg.routed_scaling,
        n_group=cfg.moe_groups,
        topk_group=cfg.moe_topk_groups,
    )
    if model_type == "deepseek_v2":
        out.update(topk_method="group_limited_greedy" if cfg.moe_groups > 1 else "greedy", mlp_bias=False)
    else:
        out.update(norm_topk_prob=cfg.moe_renormalize, rope_interleave=cfg.rope_interleave)
    if model_type == "mistral4":  # the temperature lives in rope_parameters; RoPE on qk_rope_head_dim
        sharpened = any(cfg.temperature_layer_flags)
        out["rope_parameters"] = {
            # plain RoPE as linear at factor 1 over the rotated part (Mistral4RotaryEmbedding's
            # default rotates whole heads, which MLA's q/k split cannot take), or the scaling
            **(cfg.rope_scaling.as_dict() if cfg.rope_scaling else {"rope_type": "linear", "factor": 1.0}),
            "rope_theta": cfg.rope_theta,
            "partial_rotary_factor": cfg.qk_rope_head_dim / cfg.head_dim,
            "llama_4_scaling_beta": cfg.attn_temperature_scale if sharpened else 0.0,
            "original_max_position_embeddings": cfg.attn_floor_scale,
        }
    return out


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    flags = cfg.moe_layer_flags
    first_sparse = flags.index(True) if any(flags) else cfg.n_layers  # dense blocks first
    shared = [
        (not cfg.is_mla, "no MLA"),
        (cfg.qk_norm, "QK-norm"),
        (any(cfg.local_layer_flags), "a sliding window"),
        (cfg.qkv_bias or cfg.o_bias or cfg.mlp_bias, "biases"),
        (not all(flags[first_sparse:]), "sparse blocks that are not the last ones"),
        (cfg.is_moe and not cfg.n_shared_experts, "no shared expert"),
    ]
    if model_type == "deepseek_v2":
        return failing(
            shared
            + [
                (cfg.is_moe and cfg.moe_scoring != "softmax", "sigmoid router scores"),
                (cfg.is_moe and cfg.moe_renormalize, "renormalised top-k"),
                (not cfg.rope_interleave, "RoPE on halves"),
            ]
        )
    if model_type == "deepseek_v3":
        return failing(shared + [(cfg.is_moe and cfg.moe_scoring != "sigmoid", "softmax router scores")])
    # Mistral4Config: DeepSeek-V3's layout with softmax scores (groups by their two best), and
    # the temperature on every block at ⌊p / original_max_position_embeddings⌋ (or none: β 0)
    temperature = cfg.temperature_layer_flags
    return failing(
        shared
        + [
            (cfg.is_moe and cfg.moe_scoring != "softmax", "sigmoid router scores"),
            (
                cfg.is_moe and cfg.moe_groups > 1 and not cfg.moe_group_top2,
                "groups ranked by their best score",
            ),
            (any(temperature) and not all(temperature), "an attention temperature on some blocks only"),
            (any(temperature) and cfg.attn_temperature_offset != 0, "a temperature offset of 1"),
            (
                cfg.rope_scaling is not None
                and cfg.rope_scaling.original_max_position_embeddings not in (None, cfg.attn_floor_scale),
                "a RoPE scaling whose original context is not the temperature's floor (one key holds both)",
            ),
        ]
    )


# What only MLA's and DeepSeekMoE's model types (and, for some, Llama 4's, Qwen's hybrids' or
# GLM-4.5's: their ModelType.holds) can write
FEATURES = (
    Feature("mla", "MLA", lambda cfg: cfg.is_mla),
    Feature("interleaved_rope", "interleaved RoPE", lambda cfg: cfg.rope_interleave),
    Feature("value_width", "a value head width apart", lambda cfg: cfg.v_head_dim != cfg.head_dim),
    Feature("group_top2", "softmax groups ranked by their two best scores", lambda cfg: cfg.moe_group_top2),
    Feature("shared_experts", "shared experts", lambda cfg: cfg.n_shared_experts > 0),
    Feature("sigmoid_scores", "sigmoid router scores", lambda cfg: cfg.moe_scoring != "softmax"),
    Feature("expert_groups", "expert groups", lambda cfg: cfg.moe_groups > 1),
    Feature("routed_scaling", "routed_scaling", lambda cfg: cfg.routed_scaling != 1.0),
)


def _mla_note(cfg: ModelFields) -> str:
    """MLA's cache and projections, with the plain-attention cache it replaces."""
    H, Dv, R, Dr = cfg.n_heads, cfg.v_head_dim, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    mha = 2 * H * Dv
    q = f"q goes through a rank-{cfg.q_lora_rank} bottleneck" if cfg.q_lora_rank else "q from one q_proj"
    return (
        f"**MLA** (multi-head latent attention, DeepSeek-V2 §2.1): a token caches a latent of "
        f"{R} values and one RoPE key of {Dr} shared by all {H} heads, {R + Dr} values per "
        f"layer, where multi-head attention with heads of {Dv} would cache {mha:,} "
        f"({mha / (R + Dr):.1f}× more); every head's K and V are rebuilt from the latent by "
        f"kv_b_proj ({R} → {H}×({cfg.qk_nope_head_dim} + {Dv})); {q}; a q/k head is "
        f"{cfg.head_dim} wide ({cfg.qk_nope_head_dim} without RoPE + {Dr} rotated)."
    )


def _moe_note(cfg: ModelFields, counts: Counts) -> str:
    """DeepSeekMoE: shared experts, grouped routing, the scores and their scaling."""
    flags = cfg.moe_layer_flags
    dense_first = flags.index(True)
    groups = (
        f", chosen within its best {cfg.moe_topk_groups} of {cfg.moe_groups} expert groups"
        if cfg.moe_groups > 1
        else ""
    )
    scores = (
        "sigmoid scores; a learned per-expert bias steers the choice but not the weights"
        if cfg.moe_scoring == "sigmoid"
        else "softmax scores"
    )
    renorm = ", renormalised" if cfg.moe_renormalize else ""
    shared = (
        f" plus {cfg.n_shared_experts} shared expert{'s' if cfg.n_shared_experts > 1 else ''} "
        f"every token passes"
        if cfg.n_shared_experts
        else ""
    )
    return (
        f"**DeepSeekMoE**: {plural(sum(flags), 'sparse block')}"
        + (f" after {dense_first} dense {'one' if dense_first == 1 else 'ones'}" if dense_first else "")
        + f"; {cfg.n_experts} routed experts of width {cfg.expert_ffn_hidden}, "
        f"{cfg.experts_per_token} per token{groups},{shared}; {scores}{renorm}, × "
        f"{cfg.routed_scaling:g}. A token uses {counts.active:,} of the {counts.total:,} "
        f"parameters ({counts.active / counts.total:.1%})."
    )


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    """MLA, and DeepSeekMoE-style experts in any family (shared experts, sigmoid scores or
    groups, with the standard expert block and no gated shared expert)."""
    out = [Note("attention", _mla_note(cfg))] if cfg.is_mla else []
    deepseek_style = cfg.n_shared_experts > 0 or cfg.moe_scoring != "softmax" or cfg.moe_groups > 1
    if cfg.is_moe and cfg.moe_style == "standard" and not cfg.shared_expert_gate and deepseek_style:
        out.append(Note("experts", _moe_note(cfg, counts)))
    return out


# DeepSeek-V2/V3's MLA: q LoRA 1536, latent 512, q/k heads of 128 + 64 rotated (interleaved
# pairs), value heads of 128
_MLA: dict[str, Any] = dict(
    head_dim=192,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    v_head_dim=128,
    rope_interleave=True,
)
_DEEPSEEK_V3: dict[str, Any] = dict(
    vocab_size=129280,
    d_model=7168,
    n_layers=61,
    n_heads=128,
    n_kv_heads=128,
    ffn_hidden=18432,
    max_seq_len=163840,
    norm_eps=1e-6,
    **_MLA,
    n_experts=256,
    experts_per_token=8,
    expert_ffn_hidden=2048,
    n_shared_experts=1,
    moe_layers="from:3",
    moe_scoring="sigmoid",
    moe_groups=8,
    moe_topk_groups=4,
    routed_scaling=2.5,
    # YaRN ×40 over the 4,096 positions it was pre-trained on; mscale = mscale_all_dim = 1, so
    # cos and sin are unscaled and the scores × (0.1 · ln 40 + 1)²
    rope_scaling=dict(
        rope_type="yarn",
        factor=40.0,
        original_max_position_embeddings=4096,
        beta_fast=32.0,
        beta_slow=1.0,
        mscale=1.0,
        mscale_all_dim=1.0,
    ),
)
# DeepSeek-V2's YaRN (both V2 files): as V3's with mscale = mscale_all_dim = 0.707
_V2_YARN: dict[str, Any] = dict(_DEEPSEEK_V3["rope_scaling"], mscale=0.707, mscale_all_dim=0.707)

PRESETS: dict[str, dict[str, Any]] = {
    # deepseek-ai/DeepSeek-V3 config.json (DeepSeek-R1 and V3-0324 share it): MLA (q LoRA 1536,
    # latent 512, RoPE key 64, heads 128 + 64 wide, values 128), 3 dense blocks then DeepSeekMoE
    # (256 routed experts of 2048 in 8 groups, top-4 groups, top-8 experts, sigmoid scores with
    # the correction bias, renormalised, × 2.5, one shared expert). Its MTP module is not part
    # of DeepseekV3ForCausalLM: the 671B of the main model, not the 685B on the Hub.
    "deepseek-v3": _DEEPSEEK_V3,
    # moonshotai/Kimi-K2-Instruct config.json (model_type kimi_k2: DeepseekV3ForCausalLM): 384
    # experts in one group, 64 heads, one dense block, × 2.827, vocab 163840, no MTP module
    "kimi-k2": {
        **_DEEPSEEK_V3,
        "vocab_size": 163840,
        "n_heads": 64,
        "n_kv_heads": 64,
        "n_experts": 384,
        "moe_groups": 1,
        "moe_topk_groups": 1,
        "moe_layers": "from:1",
        "routed_scaling": 2.827,
        "max_seq_len": 131072,
        "rope_theta": 50000.0,
        # YaRN ×32 over 4,096 positions, beta_fast 1
        "rope_scaling": {**_DEEPSEEK_V3["rope_scaling"], "factor": 32.0, "beta_fast": 1.0},
    },
    # deepseek-ai/DeepSeek-V2-Lite config.json: q from one q_proj, 64 experts of 1408, top-6
    # greedy, 2 shared, one dense block
    "deepseek-v2-lite": dict(
        vocab_size=102400,
        d_model=2048,
        n_layers=27,
        n_heads=16,
        n_kv_heads=16,
        ffn_hidden=10944,
        max_seq_len=163840,
        norm_eps=1e-6,
        **{**_MLA, "q_lora_rank": 0},
        n_experts=64,
        experts_per_token=6,
        expert_ffn_hidden=1408,
        n_shared_experts=2,
        moe_layers="from:1",
        moe_renormalize=False,
        rope_scaling=_V2_YARN,
    ),
    # deepseek-ai/DeepSeek-V2 config.json: MLA as V3's, 160 experts of 1536 in 8 groups (top-3
    # groups by their best expert, then top-6, softmax, not renormalised, × 16), 2 shared
    "deepseek-v2": dict(
        vocab_size=102400,
        d_model=5120,
        n_layers=60,
        n_heads=128,
        n_kv_heads=128,
        ffn_hidden=12288,
        max_seq_len=163840,
        norm_eps=1e-6,
        **_MLA,
        n_experts=160,
        experts_per_token=6,
        expert_ffn_hidden=1536,
        n_shared_experts=2,
        moe_layers="from:1",
        moe_renormalize=False,
        moe_groups=8,
        moe_topk_groups=3,
        routed_scaling=16.0,
        rope_scaling=_V2_YARN,
    ),
    # mistralai/Mistral-Small-4-119B-2603's text decoder as transformers' Mistral4Config defaults
    # it (the class's documented checkpoint; no published config.json was found, SOURCES.md):
    # MLA (q LoRA 1,024, latent 256 + a RoPE key of 64), 128 experts of 2,048 (top-4) with one
    # shared expert on all 36 blocks, softmax routing, every query × 1 + 0.1 · ln(1 + ⌊p / 8,192⌋).
    # 118,972,826,624 on the meta device (the docs: "119B with 6.5B activated parameters per
    # token"; here 6.63B with the embedding and head, 6.10B without the embedding)
    "mistral-small-4": dict(
        vocab_size=131072,
        d_model=4096,
        n_layers=36,
        n_heads=32,
        n_kv_heads=32,
        ffn_hidden=12288,
        max_seq_len=1048576,
        kv_lora_rank=256,
        q_lora_rank=1024,
        qk_rope_head_dim=64,
        rope_interleave=True,
        n_experts=128,
        experts_per_token=4,
        expert_ffn_hidden=2048,
        n_shared_experts=1,
        moe_layers="from:0",
        attn_temperature_layers="all",
        attn_temperature_offset=0,
        # Mistral4Config's default YaRN: ×128 over 8,192 positions, mscale = mscale_all_dim = 1
        rope_scaling={
            **_DEEPSEEK_V3["rope_scaling"],
            "factor": 128.0,
            "original_max_position_embeddings": 8192,
        },
    ),
}

# Counts published only rounded (no safetensors total of the model itself): the repositories'
# READMEs deepseek-ai/DeepSeek-V3 @9b4e978, deepseek-ai/DeepSeek-V2 @ec98ee3 (and its technical
# report, Appendix B.1), MoonshotAI/Kimi-K2 @c6157be
PUBLISHED = {
    "deepseek-v3": Rounded(
        671e9,
        37e9,
        "671B total parameters with 37B activated for each token; the total size of DeepSeek-V3 "
        "models on Hugging Face is 685B, which includes 671B of the Main Model weights and 14B of "
        "the Multi-Token Prediction (MTP) Module weights",
    ),
    "deepseek-v2": Rounded(236e9, 21e9, "236B total parameters, of which 21B are activated for each token"),
    "deepseek-v2-lite": Rounded(
        15.7e9, 2.4e9, "15.7B total parameters, of which 2.4B are activated for each token"
    ),
    "kimi-k2": Rounded(1e12, 32e9, "32 billion activated parameters and 1 trillion total parameters"),
    # transformers' docs/source/en/model_doc/mistral4.md @162e3fa (the config class's checkpoint,
    # mistralai/Mistral-Small-4-119B-2603): the text decoder counts 118.97B, 6.63B active with the
    # embedding and head (6.10B without the embedding): the published 6.5B lies between
    "mistral-small-4": Rounded(119e9, 6.5e9, "119B with 6.5B activated parameters per token"),
}

FIELDS = FieldGroup(
    "MLA and DeepSeekMoE (DeepSeek, Kimi)",
    (
        FieldSpec(
            "kv_lora_rank",
            "MLA latent width (kv_lora_rank; 0 = no MLA)",
            "int",
            help="DeepSeek-V2/V3: each token caches one latent of this width (and one RoPE key); "
            "every head's K and V are rebuilt from it. head_dim is then a q/k head's width.",
            minimum=0,
        ),
        FieldSpec("q_lora_rank", "q bottleneck (q_lora_rank; 0 = one q_proj)", "int", minimum=0),
        FieldSpec("qk_rope_head_dim", "rotated part of a q/k head (qk_rope_head_dim)", "int", minimum=0),
        FieldSpec("v_head_dim", "value head width (0 = head_dim)", "int", minimum=0),
        FieldSpec("rope_interleave", "RoPE on adjacent pairs (DeepSeek)", "toggle"),
        FieldSpec(
            "n_shared_experts",
            "shared experts (every token)",
            "int",
            help="DeepSeekMoE: experts every token passes besides its k routed ones.",
            minimum=0,
        ),
        FieldSpec(
            "moe_scoring",
            "router scores",
            "choice",
            help="softmax (Mixtral, DeepSeek-V2) or sigmoid with a correction bias (DeepSeek-V3).",
        ),
        FieldSpec("moe_groups", "expert groups (n_group)", "int"),
        FieldSpec("moe_topk_groups", "groups a token picks from (topk_group)", "int"),
        FieldSpec(
            "moe_group_top2",
            "softmax groups ranked by their two best",
            "toggle",
            help="Mistral 4: a group's rank is the sum of its two best softmax scores (DeepSeek-V2: its "
            "best; sigmoid routing always sums the two best).",
        ),
        FieldSpec(
            "routed_scaling", "routed experts' scale (routed_scaling_factor)", "float", minimum=0.0, step=0.5
        ),
    ),
)

FAMILY = Family(
    "DeepSeek",
    (DEEPSEEK_V2, DEEPSEEK_V3, MISTRAL4),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    key_notes=key_notes,
    features=FEATURES,
    presets=PRESETS,
    published=PUBLISHED,
    aliases={"kimi_k2": "deepseek_v3"},
    field_groups=(FIELDS,),
)
