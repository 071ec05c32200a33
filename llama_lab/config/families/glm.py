"""GLM-4.5 (``glm4_moe``: GLM-4.5, GLM-4.5-Air, GLM-4.6/4.7): q/k/v carry attention_bias and
o_proj never has one; q_norm and k_norm per head when use_qk_norm; RoPE on the first
int(head_dim × partial_rotary_factor) dimensions (0.5 unless given); blocks from
first_k_dense_replace on are Glm4MoeMoE: DeepSeek-V3's routing (sigmoid scores plus
e_score_correction_bias choose the top-k among the best topk_group of n_group groups,
renormalised when norm_topk_prob, × routed_scaling_factor) over n_routed_experts experts of
moe_intermediate_size, plus one shared MLP of moe_intermediate_size × n_shared_experts; the blocks
before are dense. The MTP layer is not part of Glm4MoeForCausalLM."""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from ..fields import ModelFields
from ..hf.family import Family, Rounded, failing, head_dim_always_read
from ..hf.keys import ModelType
from ..hf.reader import Reader
from ..messages import shown

GLM4_MOE = ModelType(
    "glm4_moe",
    "Glm4MoeForCausalLM",
    keys=frozenset(
        {
            "attention_bias",
            "partial_rotary_factor",
            "use_qk_norm",
            "moe_intermediate_size",
            "n_routed_experts",
            "num_local_experts",
            "n_shared_experts",
            "num_experts_per_tok",
            "routed_scaling_factor",
            "n_group",
            "topk_group",
            "first_k_dense_replace",
            "norm_topk_prob",
            "num_nextn_predict_layers",
            "num_mtp_layers",
        }
    ),
    # a null partial_rotary_factor is never folded into rope_parameters: Glm4MoeRotaryEmbedding
    # rotates whole heads (its .get(..., 1.0)); the MTP count nothing reads
    nullable=frozenset({"partial_rotary_factor", "num_nextn_predict_layers"}),
    null_why={
        **head_dim_always_read("glm4_moe"),
        "num_local_experts": "Glm4MoeConfig's alias of n_routed_experts: its router and experts "
        "cannot be built for no expert count",
    },
    holds=frozenset({"partial_rope", "shared_experts", "sigmoid_scores", "expert_groups", "routed_scaling"}),
)


def read(r: Reader) -> dict[str, Any]:
    experts = r.count("n_routed_experts", 0, 1 << 20)
    first_dense = r.count("first_k_dense_replace", 0, 1 << 62)
    sparse = first_dense < r.n_layers
    if sparse and not experts:
        raise ConfigError(
            f"n_routed_experts=0 with sparse blocks from first_k_dense_replace={first_dense} on: "
            f"Glm4MoeTopkRouter cannot route over no experts",
            field="n_routed_experts",
        )
    out: dict[str, Any] = dict(
        qkv_bias=r.flag("attention_bias"),
        o_bias=False,
        mlp_bias=False,
        qk_norm=r.flag("use_qk_norm"),
        partial_rotary_factor=r.partial_rotary(setdefault=0.5),  # Glm4MoeConfig's setdefault
        **r.floor_head_dim(),
    )
    if sparse:
        out.update(
            n_experts=experts,
            experts_per_token=r.get("num_experts_per_tok"),
            expert_ffn_hidden=r.get("moe_intermediate_size"),
            n_shared_experts=r.get("n_shared_experts"),
            moe_layers=f"from:{first_dense}",
            moe_renormalize=r.flag("norm_topk_prob"),
            moe_scoring="sigmoid",
            moe_groups=r.get("n_group"),
            moe_topk_groups=r.get("topk_group"),
            routed_scaling=r.get("routed_scaling_factor"),
        )
    return out


def key_notes(r: Reader) -> None:
    mtp = r.data.get("num_nextn_predict_layers", r.data.get("num_mtp_layers"))
    if mtp:
        r.note(
            f"num_nextn_predict_layers={shown(mtp)}: the multi-token-prediction layer(s) are not "
            f"part of {r.architecture} (its loader skips model.layers.46 / 92, the MTP layer "
            f"of GLM-4.5-Air / GLM-4.5): not counted"
        )


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    flags = cfg.moe_layer_flags
    return dict(
        attention_bias=cfg.qkv_bias,
        use_qk_norm=cfg.qk_norm,
        partial_rotary_factor=cfg.partial_rotary_factor,
        n_routed_experts=cfg.n_experts,
        num_experts_per_tok=cfg.experts_per_token,
        moe_intermediate_size=cfg.expert_ffn_hidden,
        n_shared_experts=cfg.n_shared_experts,
        first_k_dense_replace=flags.index(True) if any(flags) else cfg.n_layers,
        norm_topk_prob=cfg.moe_renormalize,
        routed_scaling_factor=cfg.routed_scaling,
        n_group=cfg.moe_groups,
        topk_group=cfg.moe_topk_groups,
        num_nextn_predict_layers=0,  # LLaMA Lab models no MTP layer
    )


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    """Glm4MoeConfig: q/k/v biases only, per-head QK-norm or none, dense blocks first, then
    sigmoid-routed experts with shared ones."""
    flags = cfg.moe_layer_flags
    first_sparse = flags.index(True) if any(flags) else cfg.n_layers
    return failing(
        [
            (any(cfg.local_layer_flags), "a sliding window"),
            (cfg.o_bias, "an o_proj bias"),
            (cfg.mlp_bias, "MLP biases"),
            (not all(flags[first_sparse:]), "sparse blocks that are not the last ones"),
            (cfg.is_moe and not cfg.n_shared_experts, "no shared expert"),
            (cfg.is_moe and cfg.moe_scoring != "sigmoid", "softmax router scores"),
        ]
    )


PRESETS: dict[str, dict[str, Any]] = {
    # zai-org/GLM-4.5-Air config.json (tests/families/published_configs/glm-4.5-air.json): 96 heads of 128
    # on 8 KV heads with q/k/v biases (none on o_proj), half of each head rotated, one dense block
    # then 128 experts of 1408 (top-8, sigmoid scores with the correction bias, renormalised) and a
    # shared one; its MTP layer is not part of Glm4MoeForCausalLM. On the meta device:
    # 106,852,245,504 (the card: 106B total, 12B active)
    "glm-4.5-air": dict(
        vocab_size=151552,
        d_model=4096,
        n_layers=46,
        n_heads=96,
        n_kv_heads=8,
        head_dim=128,
        ffn_hidden=10944,
        max_seq_len=131072,
        qkv_bias=True,
        o_bias=False,
        partial_rotary_factor=0.5,
        n_experts=128,
        experts_per_token=8,
        expert_ffn_hidden=1408,
        n_shared_experts=1,
        moe_layers="from:1",
        moe_scoring="sigmoid",
        rope_theta=1e6,
        norm_eps=1e-5,
    ),
}

# transformers' Glm4Moe model doc: 106,852,245,504 is "106 billion" truncated (rounded it is
# 107); the 12B active leave out the embedding table and the head (12.18B; with both, 13.42B)
PUBLISHED = {
    "glm-4.5-air": Rounded(
        106e9,
        12e9,
        "GLM-4.5-Air adopts a more compact design with 106 billion total parameters and 12 billion "
        "active parameters",
    ),
}

FAMILY = Family(
    "GLM",
    (GLM4_MOE,),
    read=read,
    write=write,
    lacks=lacks,
    key_notes=key_notes,
    presets=PRESETS,
    published=PUBLISHED,
)
