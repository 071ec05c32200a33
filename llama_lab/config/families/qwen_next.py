"""Qwen3-Next and Qwen3.5 (``qwen3_next``, ``qwen3_5_text``, ``qwen3_5_moe_text``; the
``qwen3_5`` / ``qwen3_5_moe`` wrappers through their text_config), read as their config classes
and models read them (transformers 5.24): layer_types (by default every
full_attention_interval-th block full attention, the others Gated DeltaNet), the linear layers'
heads and convolution, gated attention (q_proj emits each head's output gate; QK-norm per head),
(1 + γ) RMSNorms, partial RoPE (0.25 unless given), and the experts: Qwen3-Next's per
decoder_sparse_step and mlp_only_layers, Qwen3.5-MoE's on every block, each with one shared
expert gated by σ(shared_expert_gate(x)). Gated DeltaNet (Yang et al. 2024) keeps a fixed-size
state per sequence instead of a growing KV cache."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError
from ...units import each_of, plural
from ..fields import ModelFields
from ..hf.family import (
    LAYER_SET_HELP,
    Counts,
    Family,
    Feature,
    FieldGroup,
    FieldSpec,
    Note,
    Wrapper,
    failing,
)
from ..hf.keys import ModelType
from ..hf.reader import Reader, all_but_every, layer_list
from ..messages import shown

# Qwen3-Next's and Qwen3.5's keys; a null layer_types is derived, a null partial_rotary_factor
# rotates whole heads (never folded into rope_parameters)
_KEYS = frozenset(
    {
        "attention_bias",
        "layer_types",
        "full_attention_interval",
        "partial_rotary_factor",
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_conv_kernel_dim",
    }
)
_NULLABLE = frozenset({"layer_types", "partial_rotary_factor", "full_attention_interval"})
_EXPERT_KEYS = frozenset(
    {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"}
)
_HOLDS = frozenset(
    {"gated_deltanet", "gated_attention", "gated_shared_expert", "shared_experts", "partial_rope"}
)
# Qwen3NextConfig (Qwen3-Next-80B-A3B): experts every decoder_sparse_step-th block except
# mlp_only_layers, each with a gated shared expert; in_proj_qkvz / in_proj_ba grouped per key head
QWEN3_NEXT = ModelType(
    "qwen3_next",
    "Qwen3NextForCausalLM",
    keys=_KEYS | _EXPERT_KEYS | {"decoder_sparse_step", "mlp_only_layers", "norm_topk_prob"},
    nullable=_NULLABLE | {"mlp_only_layers"},
    block="qwen_hybrid",
    holds=_HOLDS,
)
# Qwen3_5TextConfig (Qwen3.5 dense): the same blocks with Qwen3.5's separate projections
# (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a) and a dense SwiGLU everywhere
QWEN3_5_TEXT = ModelType(
    "qwen3_5_text",
    "Qwen3_5ForCausalLM",
    keys=_KEYS,
    nullable=_NULLABLE,
    block="qwen_hybrid",
    holds=_HOLDS,
    module="qwen3_5",
)
# Qwen3_5MoeTextConfig (Qwen3.5-MoE): experts with a gated shared expert on every block
QWEN3_5_MOE_TEXT = ModelType(
    "qwen3_5_moe_text",
    "Qwen3_5MoeForCausalLM",
    keys=_KEYS | _EXPERT_KEYS,
    nullable=_NULLABLE | {"intermediate_size"},  # no such field: any value kept, never read
    block="qwen_hybrid",
    holds=_HOLDS,
    module="qwen3_5_moe",
)

LINEAR_KINDS = ("linear_attention", "full_attention")


def _linear_layers(r: Reader) -> list[int]:
    """The Gated DeltaNet blocks: layer_types' "linear_attention" entries, or (the config class's
    __post_init__ when layer_types is absent or null) every block but each
    full_attention_interval-th."""
    layer_types = r.str_list("layer_types")
    if layer_types is None:
        interval = r.data.get("full_attention_interval", 4)  # (a null: used only without layer_types)
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ConfigError(
                f"full_attention_interval={shown(interval)} must be a whole number ≥ 1: "
                f"{r.architecture}'s config makes every interval-th block full attention",
                field="full_attention_interval",
            )
        return [i for i in range(r.n_layers) if (i + 1) % interval]
    if set(layer_types) - set(LINEAR_KINDS) or len(layer_types) != r.n_layers:
        raise ConfigError(
            f"layer_types must name 'linear_attention' or 'full_attention' for "
            f"{each_of(r.n_layers, 'layer')} ({r.architecture} builds a Gated DeltaNet or a "
            f"gated attention block from each)",
            field="layer_types",
        )
    return [i for i, kind in enumerate(layer_types) if kind == "linear_attention"]


def _experts(r: Reader) -> dict[str, Any]:
    """Qwen3-Next's sparse blocks (num_experts > 0, every decoder_sparse_step-th, not in
    mlp_only_layers) or Qwen3.5-MoE's (every block), each with a shared expert as wide as
    shared_expert_intermediate_size; softmax routing, renormalised when norm_topk_prob (always in
    Qwen3.5-MoE's router)."""
    experts = r.count("num_experts", 0, 1 << 20)
    if r.name == "qwen3_next":
        step = r.count("decoder_sparse_step", 1, 1 << 62)
        dense = set(r.int_list("mlp_only_layers") or [])
        sparse = [i for i in range(r.n_layers) if experts and i not in dense and (i + 1) % step == 0]
        renormalize = r.flag("norm_topk_prob")
    else:
        if not experts:
            raise ConfigError(
                "num_experts=0: Qwen3_5MoeSparseMoeBlock on every block cannot route over no experts",
                field="num_experts",
            )
        sparse, renormalize = list(range(r.n_layers)), True
    if not sparse:
        return {}
    width = r.get("moe_intermediate_size")
    shared = r.get("shared_expert_intermediate_size")
    if shared != width:
        raise ConfigError(
            f"shared_expert_intermediate_size={shown(shared)} differs from moe_intermediate_size="
            f"{shown(width)}: LLaMA Lab models the shared expert as wide as a routed one (as every "
            f"published Qwen3-Next and Qwen3.5 model has it)",
            field="shared_expert_intermediate_size",
        )
    return dict(
        n_experts=experts,
        experts_per_token=r.get("num_experts_per_tok"),
        expert_ffn_hidden=width,
        n_shared_experts=1,
        shared_expert_gate=True,
        moe_layers=layer_list(sparse, r.n_layers),
        moe_renormalize=renormalize,
    )


def read(r: Reader) -> dict[str, Any]:
    """Qwen3NextConfig / Qwen3_5TextConfig / Qwen3_5MoeTextConfig and their CausalLM: Pre-LN
    blocks of Gated DeltaNet (Qwen3-Next's fused in_proj_qkvz / in_proj_ba, grouped per key
    head; Qwen3.5's in_proj_qkv, in_proj_z, in_proj_b, in_proj_a) or gated attention
    (attention_bias on q/k/v/o), every RMSNorm × (1 + γ), RoPE on the first
    int(head_dim × partial_rotary_factor) dimensions of each head."""
    attention = r.flag("attention_bias")
    out: dict[str, Any] = dict(
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=False,
        qk_norm=True,
        norm_plus_one=True,
        attn_output_gate=True,
        partial_rotary_factor=r.partial_rotary(setdefault=0.25),  # the config classes' setdefault
        linear_layers=layer_list(_linear_layers(r), r.n_layers),
        linear_k_heads=r.get("linear_num_key_heads"),
        linear_v_heads=r.get("linear_num_value_heads"),
        linear_k_head_dim=r.get("linear_key_head_dim"),
        linear_v_head_dim=r.get("linear_value_head_dim"),
        linear_conv_kernel=r.get("linear_conv_kernel_dim"),
        linear_grouped_proj=r.name == "qwen3_next",
    )
    if r.name != "qwen3_5_text":
        out.update(_experts(r))
    if r.name == "qwen3_5_moe_text":  # no dense FFN anywhere: intermediate_size is not a field
        out["ffn_hidden"] = r.get("moe_intermediate_size")
    params = r.data.get("rope_parameters")
    if isinstance(params, Mapping) and ("mrope_section" in params or "mrope_interleaved" in params):
        r.note(
            "rope_parameters' mrope_section / mrope_interleaved split the rotated pairs between "
            "the text, height and width positions of images and video; a text sequence's three "
            "positions are equal, so its RoPE is plain partial RoPE"
        )
    return out


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    """The config.json keys of ``model_type`` (Qwen3-Next's or Qwen3.5's) for ``cfg`` (what
    ``hf.write.to_hf_config`` writes beyond the common ones): layer_types, the linear layers'
    sizes, partial RoPE (folded into rope_parameters by the config class) and the experts."""
    out: dict[str, Any] = dict(
        attention_bias=cfg.qkv_bias,
        layer_types=["linear_attention" if flag else "full_attention" for flag in cfg.linear_layer_flags],
        linear_num_key_heads=cfg.linear_k_heads,
        linear_num_value_heads=cfg.linear_v_heads,
        linear_key_head_dim=cfg.linear_k_head_dim,
        linear_value_head_dim=cfg.linear_v_head_dim,
        linear_conv_kernel_dim=cfg.linear_conv_kernel,
        partial_rotary_factor=cfg.partial_rotary_factor,
    )
    if cfg.is_moe:
        out.update(
            num_experts=cfg.n_experts,
            num_experts_per_tok=cfg.experts_per_token,
            moe_intermediate_size=cfg.expert_ffn_hidden,
            shared_expert_intermediate_size=cfg.expert_ffn_hidden,
        )
    if model_type == "qwen3_next":  # its own keys: sparse blocks but mlp_only_layers, or none
        flags = cfg.moe_layer_flags
        out.update(
            num_experts=cfg.n_experts if cfg.is_moe else 0,  # the class's default is 512 experts
            decoder_sparse_step=1,
            mlp_only_layers=[i for i, sparse in enumerate(flags) if not sparse] if cfg.is_moe else [],
            norm_topk_prob=cfg.moe_renormalize,
        )
    return out


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    """Gated attention with per-head QK-norm, Gated DeltaNet blocks with the model type's
    projections, the gated shared expert; Qwen3.5 dense: no experts; Qwen3.5-MoE: experts on
    every block, the router always renormalised."""
    flags = cfg.moe_layer_flags
    hybrid = [
        (not cfg.attn_output_gate, "no gated attention output"),
        (not (cfg.qk_norm and cfg.qk_norm_scope == "head"), "no per-head QK-norm"),
        (any(cfg.local_layer_flags), "a sliding window"),
        (cfg.qkv_bias != cfg.o_bias, "q/k/v and o biases differ"),
        (cfg.mlp_bias, "MLP biases"),
        (cfg.is_moe and not cfg.shared_expert_gate, "experts without a gated shared expert"),
        (
            cfg.has_linear_attention and cfg.linear_grouped_proj != (model_type == "qwen3_next"),
            "Qwen3-Next's grouped in_proj_qkvz" if cfg.linear_grouped_proj else "Qwen3.5's split in_proj_*",
        ),
    ]
    if model_type == "qwen3_5_text":
        hybrid.append((cfg.is_moe, "experts"))
    if model_type == "qwen3_5_moe_text":
        hybrid += [
            (not cfg.is_moe or not all(flags), "experts on every block"),
            (not cfg.moe_renormalize, "unnormalised top-k"),
        ]
    return failing(hybrid)


FEATURES = (
    Feature("gated_deltanet", "Gated DeltaNet layers", lambda cfg: cfg.has_linear_attention),
    Feature("gated_attention", "a gated attention output", lambda cfg: cfg.attn_output_gate),
    Feature("gated_shared_expert", "a gated shared expert", lambda cfg: cfg.shared_expert_gate),
)


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    """Gated DeltaNet blocks, gated attention and the gated shared expert, in any family."""
    out = []
    n_linear = sum(cfg.linear_layer_flags)
    if n_linear:
        per_block = counts.state_bytes // n_linear
        attending = cfg.full_attention_layers
        out.append(
            Note(
                "mixer",
                f"**Gated DeltaNet** (linear attention, Qwen3-Next / Qwen3.5): {n_linear} of "
                f"{plural(cfg.n_layers, 'block')} {'mixes' if n_linear == 1 else 'mix'} tokens with the "
                f"gated delta rule instead of softmax attention: per value "
                f"head a {cfg.linear_k_head_dim}×{cfg.linear_v_head_dim} state (×{cfg.linear_v_heads} "
                f"heads) updated per token after a {cfg.linear_conv_kernel}-tap causal convolution, so "
                f"they cache no K or V: {per_block:,} bytes of state per block and sequence at any "
                f"length (bf16 conv inputs, float32 state); the other {attending} "
                f"{'attends' if attending == 1 else 'attend'} over the whole context.",
            )
        )
    if cfg.attn_output_gate:
        out.append(
            Note(
                "mixer",
                f"**Gated attention**: q_proj also emits a gate for each head and dimension; the "
                f"attention output is multiplied by σ(gate) before o_proj "
                f"({cfg.n_heads * cfg.head_dim * cfg.d_model:,} more parameters per attention block).",
            )
        )
    if cfg.is_moe and cfg.moe_style == "standard" and cfg.shared_expert_gate:
        out.append(
            Note(
                "experts",
                f"**Gated shared expert** (Qwen3-Next / Qwen3.5): "
                f"{plural(sum(cfg.moe_layer_flags), 'sparse block')} of {cfg.n_experts} experts of "
                f"{cfg.expert_ffn_hidden:,}, {cfg.experts_per_token} per "
                f"token, plus one shared expert as wide that every token passes, scaled by "
                f"σ(w·x) (shared_expert_gate, {cfg.d_model:,} parameters per block); a token uses "
                f"{counts.active:,} of {counts.total:,} parameters ({counts.active / counts.total:.1%}).",
            )
        )
    return out


# What Qwen3-Next and Qwen3.5 share: head_dim 256 with a quarter rotated, (1 + γ) norms, per-head
# QK-norm, gated attention, 16 q/k heads of 128 and value heads of 128 in the linear blocks,
# a 4-tap convolution, RoPE base 10⁷, eps 1e-6, a 262,144-token context
_QWEN_HYBRID: dict[str, Any] = dict(
    head_dim=256,
    max_seq_len=262144,
    rope_theta=1e7,
    norm_eps=1e-6,
    partial_rotary_factor=0.25,
    qk_norm=True,
    norm_plus_one=True,
    attn_output_gate=True,
    linear_k_heads=16,
    linear_k_head_dim=128,
    linear_v_head_dim=128,
    linear_conv_kernel=4,
)
# The experts of Qwen3-Next and Qwen3.5-MoE: on every block, 512-wide, renormalised top-k, and
# one gated shared expert as wide
_QWEN_EXPERTS: dict[str, Any] = dict(
    expert_ffn_hidden=512, n_shared_experts=1, shared_expert_gate=True, moe_renormalize=True
)

PRESETS: dict[str, dict[str, Any]] = {
    # Qwen/Qwen3-Next-80B-A3B-Instruct config.json: 12 × (3 Gated DeltaNet blocks (32 value heads)
    # then one gated attention block (16 heads on 2 KV heads)), every block 512 experts (top-10)
    # with a shared one; in_proj_qkvz / in_proj_ba grouped per key head. On the meta device
    # 79,674,391,296 (the card: 80B in total, 3B activated; 79B non-embedding); its MTP layer
    # (mtp.*, which Qwen3NextForCausalLM skips when loading) is not counted.
    "qwen3-next-80b-a3b": dict(
        **_QWEN_HYBRID,
        **_QWEN_EXPERTS,
        vocab_size=151936,
        d_model=2048,
        n_layers=48,
        n_heads=16,
        n_kv_heads=2,
        ffn_hidden=5120,
        linear_layers=all_but_every(48),
        linear_v_heads=32,
        linear_grouped_proj=True,
        n_experts=512,
        experts_per_token=10,
    ),
    # Qwen/Qwen3.5-35B-A3B text_config (the text decoder; the vision tower and the MTP layer not
    # counted): 10 × (3 Gated DeltaNet + 1 gated attention), 256 experts (top-8) with a shared
    # one on every block, Qwen3.5's separate in_proj_qkv / z / b / a. 34,660,610,688 on the meta
    # device (the card: 35B total / 3B active, with the vision tower)
    "qwen3.5-35b-a3b": dict(
        **_QWEN_HYBRID,
        **_QWEN_EXPERTS,
        vocab_size=248320,
        d_model=2048,
        n_layers=40,
        n_heads=16,
        n_kv_heads=2,
        ffn_hidden=512,
        linear_layers=all_but_every(40),
        linear_v_heads=32,
        n_experts=256,
        experts_per_token=8,
    ),
    # Qwen/Qwen3.5-27B text_config (composite, SOURCES.md): a dense 27B, 16 × (3 Gated DeltaNet
    # (48 value heads) + 1 gated attention (24 heads on 4 KV heads)), SwiGLU 17,408 wide.
    # 26,895,998,464 on the meta device (the Hub: 27.78B with the vision tower and MTP)
    "qwen3.5-27b": dict(
        **_QWEN_HYBRID,
        vocab_size=248320,
        d_model=5120,
        n_layers=64,
        n_heads=24,
        n_kv_heads=4,
        ffn_hidden=17408,
        linear_layers=all_but_every(64),
        linear_v_heads=48,
    ),
}

FIELDS = FieldGroup(
    "Qwen3-Next, Qwen3.5 (Gated DeltaNet)",
    (
        FieldSpec(
            "linear_layers",
            "Gated DeltaNet blocks (linear attention)",
            "text",
            help="Qwen3-Next and Qwen3.5: three of every four blocks ('0,1,2,4,5,6,…'); the others "
            "attend. " + LAYER_SET_HELP,
        ),
        *(
            FieldSpec(name, label, "int", help="Qwen3-Next-80B: 16 q/k and 32 value heads of 128, 4 taps.")
            for name, label in (
                ("linear_k_heads", "q/k heads"),
                ("linear_v_heads", "value heads (states)"),
                ("linear_k_head_dim", "q/k head dim"),
                ("linear_v_head_dim", "value head dim"),
                ("linear_conv_kernel", "convolution taps"),
            )
        ),
        FieldSpec(
            "linear_grouped_proj",
            "grouped in_proj_qkvz / in_proj_ba",
            "toggle",
            help="Qwen3-Next's checkpoint layout; Qwen3.5 keeps in_proj_qkv, _z, _b, _a apart.",
        ),
        FieldSpec(
            "attn_output_gate",
            "gated attention output",
            "toggle",
            help="q_proj also emits a gate; the output × σ(gate) before o_proj.",
        ),
        FieldSpec(
            "shared_expert_gate",
            "gated shared expert",
            "toggle",
            help="Qwen: the one shared expert × σ(w·x).",
        ),
    ),
)

FAMILY = Family(
    "Qwen3-Next",
    (QWEN3_NEXT, QWEN3_5_TEXT, QWEN3_5_MOE_TEXT),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    features=FEATURES,
    presets=PRESETS,
    wrappers=(
        Wrapper("qwen3_5", "qwen3_5_text", "Qwen3_5Config", tie_default=False, vision="qwen3_5"),
        Wrapper("qwen3_5_moe", "qwen3_5_moe_text", "Qwen3_5MoeConfig", tie_default=False, vision="qwen3_5"),
    ),
    field_groups=(FIELDS,),
)
