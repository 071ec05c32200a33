"""Parameters: the closed form by tensor kind and component, and the same count read from the
module built on the meta device (so the formulas are checked against the code that runs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from ..config import ModelConfig, decoder_stack, encoder_stack
from ..model import BLOCK_NORMS, EncoderDecoderLM, build_encoder_decoder, build_model, part_tensors
from .shapes import Shapes
from .vision import projector_params, vision_params

# One key per kind of parameter tensor, named after the module that owns it.
DETAIL_KEYS = (
    "embed_tokens",
    "embed_positions",
    "embed_token_types",
    "embed_norm",
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "q_a_proj",
    "q_b_proj",
    "kv_a_proj_with_mqa",
    "kv_b_proj",
    "latent_norms",
    "indexer_wq_b",
    "indexer_wk",
    "indexer_weights_proj",
    "indexer_norm",
    "linear_in_proj",
    "linear_conv",
    "linear_decay",
    "linear_norm",
    "linear_out_proj",
    "attention_bias",
    "attention_sinks",
    "qk_norm",
    "gate_proj",
    "up_proj",
    "down_proj",
    "ffn_bias",
    "router",
    "router_bias",
    "experts",
    "expert_bias",
    "shared_experts",
    "shared_expert_gate",
    "cross_attention",
    "input_layernorm",
    "post_attention_layernorm",
    "cross_attention_layernorm",
    "pre_feedforward_layernorm",
    "post_feedforward_layernorm",
    "final_norm",
    "lm_head",
    "pooler",
    "vision",
    "projector",
)


COMPONENT_OF = {
    "embed_tokens": "embedding",
    "embed_positions": "positional",
    # BERT: the segment table is an embedding like the word table; the LayerNorm on the summed
    # embeddings is a norm; the pooler (dense C×C + bias) a component of its own, "pooler",
    # present only where the model has one (as flops' "router")
    "embed_token_types": "embedding",
    "embed_norm": "norms",
    "q_proj": "attention",
    "k_proj": "attention",
    "v_proj": "attention",
    "o_proj": "attention",
    "q_a_proj": "attention",
    "q_b_proj": "attention",
    "kv_a_proj_with_mqa": "attention",
    "kv_b_proj": "attention",
    "latent_norms": "norms",
    # DSA's lightning indexer, all of it attention (its key's LayerNorm too: a part of the indexer)
    "indexer_wq_b": "attention",
    "indexer_wk": "attention",
    "indexer_weights_proj": "attention",
    "indexer_norm": "attention",
    "linear_in_proj": "attention",
    "linear_conv": "attention",
    "linear_decay": "attention",
    "linear_norm": "norms",
    "linear_out_proj": "attention",
    "attention_bias": "attention",
    "attention_sinks": "attention",
    "qk_norm": "norms",
    "gate_proj": "ffn",
    "up_proj": "ffn",
    "down_proj": "ffn",
    "ffn_bias": "ffn",
    "router": "ffn",
    "router_bias": "ffn",
    "experts": "ffn",
    "expert_bias": "ffn",
    "shared_experts": "ffn",
    "shared_expert_gate": "ffn",
    "cross_attention": "attention",
    "input_layernorm": "norms",
    "post_attention_layernorm": "norms",
    "cross_attention_layernorm": "norms",
    "pre_feedforward_layernorm": "norms",
    "post_feedforward_layernorm": "norms",
    "final_norm": "norms",
    "lm_head": "lm_head",
    "pooler": "pooler",
    "vision": "vision",  # a multimodal model's image encoder (analysis.vision)
    "projector": "projector",  # and its projector into the text decoder
}


MLA_KEYS = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj")
# A Gated DeltaNet block's tensors (module, or parameter name) by kind; its in_proj_* parts
# are linear_in_proj
LINEAR_KEYS = {
    "conv1d": "linear_conv",
    "A_log": "linear_decay",
    "dt_bias": "linear_decay",
    "norm": "linear_norm",
    "out_proj": "linear_out_proj",
}
COMPONENTS = (
    "embedding",
    "positional",
    "attention",
    "ffn",
    "norms",
    "lm_head",
    "pooler",
    "vision",
    "projector",
)
VISION_PARTS = ("vision", "projector")  # kept only where the config has a vision tower


@dataclass(frozen=True)
class ParamCount:
    total: int
    non_embedding: int  # total − token embedding − learned positions (Kaplan et al.)
    per_layer: int  # one decoder block (block 0)
    # COMPONENTS → int; a tied lm_head is 0; sums to total; pooler (BERT's), vision and projector
    # only where the model has them (a multimodal config: the whole model, transformers'
    # ...ForConditionalGeneration)
    by_component: dict[str, int]
    detail: dict[str, int]  # DETAIL_KEYS → int, summed over layers; sums to total
    source: str  # "closed form" or "meta module"
    # used per token: total less the experts a token is not routed to (a vision tower counts
    # as active: every image runs all of it)
    active: int = 0

    def spec_by_component(self) -> dict:
        """The `analyze` view: a learned positional table is counted under ``embedding``."""
        parts = dict(self.by_component)
        parts["embedding"] += parts.pop("positional")
        return parts

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        rows = [
            {"component": name, "params": count, "share": count / self.total}
            for name, count in self.by_component.items()
        ]
        return pd.DataFrame(rows)


def norm_params(cfg: ModelConfig) -> int:
    """One norm: γ (RMSNorm), or γ and β (LayerNorm)."""
    return cfg.d_model * (2 if cfg.norm_type == "layernorm" else 1)


def norms_per_block(cfg: ModelConfig) -> int:
    """Norms of the model width in one block: two, or four in a sandwich block (Gemma)."""
    return len(BLOCK_NORMS[cfg.norm_position])


def linear_layer_detail(cfg: ModelConfig) -> dict:
    """A Gated DeltaNet block's token mixer by tensor kind: the input projections (q, k, v, the
    output gate z, β and the decay's a: C → 2·Hk·dk + 2·Hv·dv + 2·Hv), the depthwise convolution
    (conv_dim · K), A_log and dt_bias (Hv each), the gated norm (dv) and out_proj (Hv·dv → C)."""
    C, Hv = cfg.d_model, cfg.linear_v_heads
    return {
        "linear_in_proj": C * (2 * cfg.linear_key_dim + 2 * cfg.linear_value_dim + 2 * Hv),
        "linear_conv": cfg.linear_conv_dim * cfg.linear_conv_kernel,
        "linear_decay": 2 * Hv,
        "linear_norm": cfg.linear_v_head_dim,
        "linear_out_proj": cfg.linear_value_dim * C,
    }


def layer_param_detail(cfg: ModelConfig, layer: int = 0) -> dict:
    """Parameters of decoder block ``layer`` by tensor kind (blocks differ when only some are
    sparse, or some mix tokens with Gated DeltaNet)."""
    s = Shapes.of(cfg)
    C, H, G, D, F = s.C, s.H, s.G, s.D, s.F
    gated = s.n_ffn_matrices == 3
    sparse = cfg.moe_layer_flags[layer]
    linear = cfg.linear_layer_flags[layer]
    gpt_oss = cfg.moe_style == "gpt_oss"
    # q, k, v, o (GQA/MQA: G < H shrinks K and V); MLA: its low-rank projections
    attention = dict.fromkeys(("q_proj", "k_proj", "v_proj", "o_proj", *MLA_KEYS), 0)
    mixer = dict.fromkeys(linear_layer_detail(cfg), 0)
    if linear:
        mixer.update(linear_layer_detail(cfg))
    else:
        attention.update({name: rows * cols for name, rows, cols in s.attention})
    attention["latent_norms"] = s.Rq + s.Rkv  # MLA: RMSNorm γ of q's bottleneck and the latent
    attention["indexer_norm"] = 2 * s.Di * (not linear)  # DSA: the indexer key's LayerNorm (γ, β)
    softmax = not linear  # the attention block's own tensors
    return {
        **attention,
        **mixer,
        "attention_bias": ((H * D + 2 * G * D if cfg.qkv_bias else 0) + (C if cfg.o_bias else 0)) * softmax,
        "attention_sinks": H if cfg.attention_sinks and softmax else 0,  # gpt-oss: a logit per query head
        "qk_norm": sum(cfg.qk_norm_widths) * softmax,
        "gate_proj": C * F if gated and not sparse else 0,  # SwiGLU's third matrix
        "up_proj": 0 if sparse else C * F,
        "down_proj": 0 if sparse else F * C,
        "ffn_bias": ((2 * F if gated else F) + C) if cfg.mlp_bias and not sparse else 0,
        "router": C * s.E if sparse else 0,  # gate: C → E logits
        "router_bias": s.E if sparse and gpt_oss else 0,
        "experts": s.E * 3 * C * s.Fe if sparse else 0,  # E × (gate, up: C→Fe; down: Fe→C)
        "expert_bias": s.E * (2 * s.Fe + C) if sparse and gpt_oss else 0,  # gpt-oss's experts
        "shared_experts": 3 * C * s.Fs if sparse else 0,  # one SwiGLU of width Fs, always on
        "shared_expert_gate": C if sparse and cfg.shared_expert_gate else 0,  # Qwen: C → 1
        **{name: 0 for names in BLOCK_NORMS.values() for name in names},
        **{name: norm_params(cfg) for name in BLOCK_NORMS[cfg.norm_position]},
    }


def _param_count(cfg: ModelConfig, detail: dict, per_layer: int, source: str) -> ParamCount:
    if cfg.vision is None:
        detail = {key: count for key, count in detail.items() if key not in VISION_PARTS}
    else:
        detail["vision"] = vision_params(cfg.vision)
        detail["projector"] = projector_params(cfg.vision)
    by_component = dict.fromkeys(COMPONENTS, 0)
    for key, count in detail.items():
        by_component[COMPONENT_OF[key]] += count
    # the components only some models have: BERT's pooler, a vision tower and its projector
    present = {"pooler": cfg.pooler, "vision": cfg.vision is not None, "projector": cfg.vision is not None}
    by_component = {key: count for key, count in by_component.items() if present.get(key, True)}
    total = sum(detail.values())
    non_embedding = total - by_component["embedding"] - by_component["positional"]
    return ParamCount(
        total,
        non_embedding,
        per_layer,
        by_component,
        dict(detail),
        source,
        total - unrouted_expert_params(cfg),
    )


def expert_params(cfg: ModelConfig) -> int:
    """One routed expert: gate, up (C → Fe) and down (Fe → C); gpt-oss's with their biases."""
    s = Shapes.of(cfg)
    return 3 * s.C * s.Fe + (2 * s.Fe + s.C if cfg.moe_style == "gpt_oss" else 0)


def unrouted_expert_params(cfg: ModelConfig) -> int:
    """Expert parameters one token does not use: (E − k) experts of every sparse layer."""
    s = Shapes.of(cfg)
    return sum(cfg.moe_layer_flags) * (s.E - s.K) * expert_params(cfg)


def cross_attention_detail(cfg: ModelConfig) -> dict:
    """One decoder block's cross-attention to the encoder (an encoder-decoder's): q and o of
    C × H·D, k and v of C × G·D, each with its bias, and its norm."""
    s = Shapes.of(cfg)
    return {
        "cross_attention": 2 * s.C * s.q_dim + 2 * s.C * s.kv_dim + s.q_dim + 2 * s.kv_dim + s.C,
        "cross_attention_layernorm": norm_params(cfg),
    }


# the kinds of tensor an encoder block holds (as a decoder block of the same config)
STACK_KEYS = frozenset({"embed_tokens", "embed_positions", "final_norm", "lm_head"})


def encoder_decoder_detail(cfg: ModelConfig) -> dict:
    """An encoder-decoder (MarianMTModel) by tensor kind: the decoder's blocks, embedding and
    head (``decoder_stack``), the encoder's blocks (``encoder_stack``), every decoder block's
    cross-attention, and two position tables of max_seq_len × C (the encoder's and the
    decoder's: MarianMTModel's static sinusoids are parameters too)."""
    detail = count_params(decoder_stack(cfg)).detail
    for key, count in count_params(encoder_stack(cfg)).detail.items():
        detail[key] += 0 if key in STACK_KEYS else count
    for key, count in cross_attention_detail(cfg).items():
        detail[key] += cfg.n_layers * count
    detail["embed_positions"] = 2 * cfg.max_seq_len * cfg.d_model
    return detail


def count_params(cfg: ModelConfig) -> ParamCount:
    """Closed form: L blocks + token embedding + learned positions + final norm + lm_head
    (BERT: + the segment table, the embedding norm and the pooler; an encoder-decoder:
    ``encoder_decoder_detail``)."""
    if cfg.is_encoder_decoder:
        per_layer = sum(layer_param_detail(cfg, 0).values()) + sum(cross_attention_detail(cfg).values())
        return _param_count(cfg, encoder_decoder_detail(cfg), per_layer, "closed form")
    detail = dict.fromkeys(DETAIL_KEYS, 0)
    # blocks come in up to four kinds: dense or sparse FFN, attention or Gated DeltaNet
    kinds = list(zip(cfg.moe_layer_flags, cfg.linear_layer_flags))
    for kind in set(kinds):
        for key, count in layer_param_detail(cfg, kinds.index(kind)).items():
            detail[key] += kinds.count(kind) * count
    s = Shapes.of(cfg)
    detail["embed_tokens"] = s.V * s.C
    detail["embed_positions"] = cfg.max_seq_len * s.C if cfg.pos_encoding == "learned" else 0
    detail["final_norm"] = norm_params(cfg) if cfg.final_norm else 0
    detail["lm_head"] = 0 if cfg.tie_embeddings or not cfg.lm_head else s.V * s.C
    detail["embed_token_types"] = cfg.type_vocab_size * s.C
    detail["embed_norm"] = norm_params(cfg) if cfg.embed_norm else 0
    detail["pooler"] = s.C * s.C + s.C if cfg.pooler else 0  # dense C → C with its bias
    return _param_count(cfg, detail, sum(layer_param_detail(cfg, 0).values()), "closed form")


# MarianMTModel's module names (the encoder-decoder) → the kinds they count as
MARIAN_KEYS = {
    "shared": "embed_tokens",
    "out_proj": "o_proj",
    "fc1": "up_proj",
    "fc2": "down_proj",
    "self_attn_layer_norm": "input_layernorm",  # Post-LN: x → LN(x + attn(x)), as input_layernorm
    "final_layer_norm": "post_attention_layernorm",  # x → LN(x + ffn(x))
    "encoder_attn_layer_norm": "cross_attention_layernorm",
}


def _detail_key(name: str) -> str:
    """Map a parameter name of CausalLM (HF LlamaForCausalLM names) or of the encoder-decoder
    (MarianMTModel's) to its DETAIL_KEYS kind."""
    parts = name.split(".")
    owner, kind = parts[-2], parts[-1]
    if "encoder_attn" in parts:
        return "cross_attention"
    if owner in ("fc1", "fc2") and kind == "bias":
        return "ffn_bias"
    if "linear_attn" not in parts:  # (Gated DeltaNet's out_proj is its own)
        owner = MARIAN_KEYS.get(owner, owner)
    if name.startswith("model.norm."):
        return "final_norm"
    if (
        owner in ("embed_tokens", "embed_positions", "embed_token_types", "embed_norm", "lm_head", "pooler")
        or owner.endswith("_layernorm")
        and owner in DETAIL_KEYS
    ):
        return owner
    if "indexer" in parts:  # DSA: wq_b, wk, weights_proj and the key's LayerNorm (k_norm)
        return "indexer_norm" if owner == "k_norm" else f"indexer_{owner}"
    if owner in ("q_norm", "k_norm"):
        return "qk_norm"
    if owner in ("q_a_layernorm", "kv_a_layernorm"):
        return "latent_norms"
    if "shared_experts" in parts or "shared_expert" in parts:
        return "shared_experts"
    if owner == "shared_expert_gate":
        return "shared_expert_gate"
    if "linear_attn" in parts:
        return LINEAR_KEYS.get(owner if kind == "weight" and owner in LINEAR_KEYS else kind, "linear_in_proj")
    if owner in ("gate", "router") and ("mlp" in parts or "feed_forward" in parts):
        return "router_bias" if kind == "bias" else "router"
    if owner == "experts" and kind.endswith("_bias"):
        return "expert_bias"
    if owner == "experts":
        return "experts"
    if kind == "sinks":
        return "attention_sinks"
    if kind == "bias" and "self_attn" in parts:
        return "attention_bias"
    if kind == "bias" and "mlp" in parts:
        return "ffn_bias"
    if owner in DETAIL_KEYS:
        return owner
    raise RuntimeError(f"parameter {name!r} has no counting rule")


def count_params_module(cfg: ModelConfig) -> ParamCount:
    """Read the counts from the module built on the meta device (no weight memory).
    ``part_tensors`` yields a tied lm_head weight once, under the embedding, and a fused
    projection's parts (q, k, v; gate, up) each under its own name."""
    model = (
        build_encoder_decoder(cfg, device="meta")
        if cfg.is_encoder_decoder
        else build_model(cfg, device="meta")
    )
    detail = dict.fromkeys(DETAIL_KEYS, 0)
    for name, parameter in part_tensors(model):
        detail[_detail_key(name)] += parameter.numel()
    first = model.decoder_blocks[0] if isinstance(model, EncoderDecoderLM) else model.model.layers[0]
    per_layer = sum(p.numel() for p in first.parameters())
    return _param_count(cfg, detail, per_layer, "meta module")


def palm_params(cfg: ModelConfig) -> int:
    """N of PaLM's 6N: parameters that take part in matmuls (embedding tables excluded, a tied
    lm_head included once more because its matmul runs; of a sparse layer only the k experts a
    token is routed to)."""
    counts = count_params(cfg)
    tied_head = cfg.vocab_size * cfg.d_model if cfg.tie_embeddings else 0
    # a token's matmuls meet its k routed experts only; a vision tower's run per image, not per
    # token (analysis.vision counts them)
    vision = sum(counts.by_component.get(part, 0) for part in VISION_PARTS)
    return counts.non_embedding + tied_head - unrouted_expert_params(cfg) - vision


def largest_parameter(cfg: ModelConfig) -> int:
    """Elements of the model's largest single tensor: the embedding or head (V·C), a projection
    (C·H·D, or MLA's largest), a dense FFN matrix (C·F), a sparse layer's fused expert tensor
    (E·2Fe·C) or its shared experts' (C·Fs)."""
    s = Shapes.of(cfg)
    dense = any(not sparse for sparse in cfg.moe_layer_flags)
    attention = max(rows * cols for _, rows, cols in s.attention)
    return max(s.V * s.C, attention, s.C * s.F if dense else 0, 2 * s.E * s.Fe * s.C, s.Fs * s.C)
