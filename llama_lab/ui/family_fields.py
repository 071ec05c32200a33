"""The sidebar's family fields: head_dim, biases, QK-norm, windows and experts (Mistral,
Mixtral, Qwen), MLA with DeepSeekMoE (DeepSeek-V2/V3, Kimi K2), gpt-oss's sinks and experts,
Gemma's, OLMo 2's, SmolLM3's, Phi-3's and GLM's, Qwen3-Next's and Qwen3.5's, Llama 4's."""

from __future__ import annotations

import streamlit as st

from ..config import CHOICES
from .state import _on_change, field_key

FAMILY_FIELDS = {
    "head_dim",
    "qkv_bias",
    "o_bias",
    "mlp_bias",
    "qk_norm",
    "sliding_window",
    "local_layers",
    "n_experts",
    "experts_per_token",
    "expert_ffn_hidden",
    "moe_layers",
    "moe_renormalize",
}
BROWSER_MAX_INT = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER
FOLLOW = {None: "follows 'biases in linear layers'", True: "on", False: "off"}
LAYER_SET_HELP = (
    "'all', 'none', 'from:K' (block K on), 'every:N' (every N-th block) or a list such as '0,2,5'"
)
DEEPSEEK_FIELDS = {
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "v_head_dim",
    "rope_interleave",
    "n_shared_experts",
    "moe_scoring",
    "moe_groups",
    "moe_topk_groups",
    "routed_scaling",
    "moe_group_top2",
}


def field(widget, name: str, label: str, *args, **kwargs) -> None:
    """``widget`` (st.toggle, st.number_input, …) bound to config field ``name``: its session
    key, and the change handler that rebuilds the config."""
    widget(label, *args, key=field_key(name), on_change=_on_change, args=(name,), **kwargs)


def int_input(
    name: str,
    label: str,
    *,
    step: int = 1,
    minimum: int = 1,
    disabled: bool = False,
    help: str | None = None,
    label_visibility: str = "visible",
) -> None:
    """No upper bound of the model's on the widget: ModelConfig refuses sizes beyond LIMITS with
    a message, shown next to the field, instead of the widget clamping silently. The browser's
    own bound stays (the largest integer a JavaScript number holds exactly: past it a typed
    value would round, and come back as another number)."""
    field(
        st.number_input,
        name,
        label,
        min_value=minimum,
        max_value=BROWSER_MAX_INT,
        step=step,
        disabled=disabled,
        help=help,
        label_visibility=label_visibility,
    )


def draw_family(after) -> None:
    int_input(
        "head_dim",
        "head_dim (0 = d_model / n_heads)",
        minimum=0,
        help="Qwen3 and Mistral-Nemo set 128 whatever d_model / n_heads is.",
    )
    after("head_dim")
    for name, label in (
        ("qkv_bias", "q/k/v biases"),
        ("o_bias", "output-projection bias"),
        ("mlp_bias", "FFN biases"),
    ):
        field(
            st.selectbox,
            name,
            label,
            list(FOLLOW),
            format_func=FOLLOW.get,
        )
        after(name)
    field(
        st.toggle,
        "qk_norm",
        "QK-norm (RMSNorm on q and k per head)",
    )
    int_input(
        "sliding_window",
        "sliding window W (0 = none)",
        minimum=0,
        help="Mistral: a local layer's query sees only its last W keys, and its KV "
        "cache holds at most W tokens.",
    )
    after("sliding_window")
    field(
        st.text_input,
        "local_layers",
        "layers with the window",
        help=LAYER_SET_HELP,
    )
    after("local_layers")
    int_input(
        "n_experts",
        "experts E (0 = dense FFN)",
        minimum=0,
        help="Mixtral / Qwen3-MoE: a router sends each token to k of E expert FFNs.",
    )
    after("n_experts")
    int_input("experts_per_token", "experts per token k", minimum=0)
    after("experts_per_token")
    int_input("expert_ffn_hidden", "expert width (0 = ffn_hidden)", minimum=0)
    after("expert_ffn_hidden")
    field(
        st.text_input,
        "moe_layers",
        "sparse layers",
        help=LAYER_SET_HELP,
    )
    after("moe_layers")
    field(
        st.toggle,
        "moe_renormalize",
        "renormalise the top-k router probabilities",
    )


def draw_deepseek(after) -> None:
    int_input(
        "kv_lora_rank",
        "MLA latent width (kv_lora_rank; 0 = no MLA)",
        minimum=0,
        help="DeepSeek-V2/V3: each token caches one latent of this width (and one RoPE key); "
        "every head's K and V are rebuilt from it. head_dim is then a q/k head's width.",
    )
    after("kv_lora_rank")
    int_input("q_lora_rank", "q bottleneck (q_lora_rank; 0 = one q_proj)", minimum=0)
    after("q_lora_rank")
    int_input("qk_rope_head_dim", "rotated part of a q/k head (qk_rope_head_dim)", minimum=0)
    after("qk_rope_head_dim")
    int_input("v_head_dim", "value head width (0 = head_dim)", minimum=0)
    after("v_head_dim")
    field(
        st.toggle,
        "rope_interleave",
        "RoPE on adjacent pairs (DeepSeek)",
    )
    int_input(
        "n_shared_experts",
        "shared experts (every token)",
        minimum=0,
        help="DeepSeekMoE: experts every token passes besides its k routed ones.",
    )
    after("n_shared_experts")
    field(
        st.selectbox,
        "moe_scoring",
        "router scores",
        list(CHOICES["moe_scoring"]),
        help="softmax (Mixtral, DeepSeek-V2) or sigmoid with a correction bias (DeepSeek-V3).",
    )
    after("moe_scoring")
    int_input("moe_groups", "expert groups (n_group)", minimum=1)
    after("moe_groups")
    int_input("moe_topk_groups", "groups a token picks from (topk_group)", minimum=1)
    after("moe_topk_groups")
    field(
        st.toggle,
        "moe_group_top2",
        "softmax groups ranked by their two best",
        help="Mistral 4: a group's rank is the sum of its two best softmax scores (DeepSeek-V2: its "
        "best; sigmoid routing always sums the two best).",
    )
    after("moe_group_top2")
    field(
        st.number_input,
        "routed_scaling",
        "routed experts' scale (routed_scaling_factor)",
        min_value=0.0,
        step=0.5,
    )
    after("routed_scaling")


GPT_OSS_FIELDS = {"attention_sinks", "moe_style", "swiglu_limit", "swiglu_alpha"}


def draw_gpt_oss(after) -> None:
    field(
        st.toggle,
        "attention_sinks",
        "attention sinks (a learned logit per head)",
        help="gpt-oss: each head's sink joins its softmax and is dropped after it.",
    )
    after("attention_sinks")
    field(
        st.selectbox,
        "moe_style",
        "expert block",
        list(CHOICES["moe_style"]),
        help="standard (Mixtral, Qwen, DeepSeek); gpt_oss: a router with a bias, the softmax "
        "of the top-k logits, experts with biases and a clamped SwiGLU; llama4: σ of the top-k "
        "logits scales each expert's input, one shared expert beside them.",
    )
    after("moe_style")
    for name, label in (("swiglu_limit", "clamp (swiglu_limit)"), ("swiglu_alpha", "gate slope α")):
        field(st.number_input, name, label, min_value=0.0, step=0.1)
        after(name)


GEMMA_FIELDS = {"norm_plus_one", "query_pre_attn_scalar", "rope_local_theta", "attn_softcap", "logit_softcap"}


def draw_gemma(after) -> None:
    """Gemma 2/3's own fields; the sandwich norms and GeGLU are choices of the recipe."""
    field(
        st.toggle,
        "norm_plus_one",
        "RMSNorm scales by 1 + γ",
        help="Gemma: the stored γ starts at 0, so a norm starts as the identity scale.",
    )
    after("norm_plus_one")
    int_input(
        "query_pre_attn_scalar",
        "score scale s: scores / √s (0 = head_dim)",
        minimum=0,
        help="Gemma's query_pre_attn_scalar: Gemma 3 27B scales by d_model / n_heads = 168, not by "
        "head_dim = 128.",
    )
    after("query_pre_attn_scalar")
    field(
        st.number_input,
        "rope_local_theta",
        "RoPE base of the windowed layers (0 = rope_theta)",
        min_value=0.0,
        step=1000.0,
        help="Gemma 3: 10,000 on its local layers, 1,000,000 on the global ones.",
    )
    after("rope_local_theta")
    for name, label in (
        ("attn_softcap", "attention-score soft cap (0 = none)"),
        ("logit_softcap", "final-logit soft cap (0 = none)"),
    ):
        field(
            st.number_input,
            name,
            label,
            min_value=0.0,
            step=1.0,
            help="Gemma 2: x → cap · tanh(x / cap) (50 on the scores, 30 on the logits).",
        )
        after(name)


ROPE_NORM_FIELDS = {"qk_norm_scope", "nope_layers", "partial_rotary_factor", "fused_keys"}


def draw_rope_and_norm(after) -> None:
    """OLMo 2's projection-wide QK-norm, SmolLM3's NoPE blocks, Phi-3's and GLM's partial
    rotary, Phi-3's fused checkpoint keys (OLMo 2's output norms are a choice of the recipe)."""
    field(
        st.selectbox,
        "qk_norm_scope",
        "QK-norm over",
        list(CHOICES["qk_norm_scope"]),
        help="head: one norm of head_dim per q and k head (Qwen3, Gemma 3, GLM); projection: one "
        "norm over all of q (H·D) and of k (G·D) (OLMo 2); rope_l2: per head after RoPE, no γ, "
        "on the rotated blocks only (Llama 4).",
    )
    after("qk_norm_scope")
    field(
        st.text_input,
        "nope_layers",
        "blocks without RoPE (NoPE)",
        help="SmolLM3 leaves every fourth block unrotated ('every:4'). " + LAYER_SET_HELP,
    )
    after("nope_layers")
    field(
        st.number_input,
        "partial_rotary_factor",
        "share of each head RoPE rotates",
        min_value=0.0,
        max_value=1.0,
        step=0.05,
        help="partial_rotary_factor: Phi-4-mini 0.75, GLM-4.5 0.5 (the first dimensions of each head).",
    )
    after("partial_rotary_factor")
    field(
        st.toggle,
        "fused_keys",
        "fused checkpoint keys (qkv_proj, gate_up_proj)",
        help="Phi-3 stores q/k/v and gate/up as one matrix each; the maths is the same.",
    )
    after("fused_keys")


HYBRID_FIELDS = {
    "linear_layers",
    "linear_k_heads",
    "linear_v_heads",
    "linear_k_head_dim",
    "linear_v_head_dim",
    "linear_conv_kernel",
    "linear_grouped_proj",
    "attn_output_gate",
    "shared_expert_gate",
}


def draw_hybrid(after) -> None:
    """Qwen3-Next's and Qwen3.5's Gated DeltaNet blocks, gated attention, gated shared expert."""
    field(
        st.text_input,
        "linear_layers",
        "Gated DeltaNet blocks (linear attention)",
        help="Qwen3-Next and Qwen3.5: three of every four blocks ('0,1,2,4,5,6,…'); the others "
        "attend. " + LAYER_SET_HELP,
    )
    after("linear_layers")
    for name, label in (
        ("linear_k_heads", "q/k heads"),
        ("linear_v_heads", "value heads (states)"),
        ("linear_k_head_dim", "q/k head dim"),
        ("linear_v_head_dim", "value head dim"),
        ("linear_conv_kernel", "convolution taps"),
    ):
        int_input(name, label, help="Qwen3-Next-80B: 16 q/k and 32 value heads of 128, 4 taps.")
        after(name)
    for name, label, help in (
        (
            "linear_grouped_proj",
            "grouped in_proj_qkvz / in_proj_ba",
            "Qwen3-Next's checkpoint layout; Qwen3.5 keeps in_proj_qkv, _z, _b, _a apart.",
        ),
        (
            "attn_output_gate",
            "gated attention output",
            "q_proj also emits a gate; the output × σ(gate) before o_proj.",
        ),
        ("shared_expert_gate", "gated shared expert", "Qwen: the one shared expert × σ(w·x)."),
    ):
        field(st.toggle, name, label, help=help)
        after(name)


LLAMA4_FIELDS = {
    "chunked_attention",
    "attn_temperature_layers",
    "attn_floor_scale",
    "attn_temperature_scale",
    "attn_temperature_offset",
}


def draw_llama4(after) -> None:
    """Llama 4's chunked attention and the attention temperature (its NoPE blocks', every Mistral 4
    block's) (its QK-norm after
    RoPE is a QK-norm scope, its expert block an expert block: both in the groups above)."""
    field(
        st.toggle,
        "chunked_attention",
        "the window is fixed chunks",
        help="Llama 4: the windowed blocks (local_layers, sliding_window = the chunk size, 8,192) "
        "attend within fixed chunks: a query sees the earlier keys of its own chunk only.",
    )
    after("chunked_attention")
    field(
        st.text_input,
        "attn_temperature_layers",
        "blocks with the attention temperature",
        help="q at position p × (1 + scale · ln(1 + ⌊(p + offset) / floor⌋)): Llama 4 on its NoPE "
        "blocks (offset 1), Mistral 4 on every block (offset 0). " + LAYER_SET_HELP,
    )
    after("attn_temperature_layers")
    int_input("attn_floor_scale", "temperature floor (positions)", help="Llama 4 and Mistral 4: 8,192.")
    after("attn_floor_scale")
    field(st.number_input, "attn_temperature_scale", "temperature scale", min_value=0.0, step=0.05)
    after("attn_temperature_scale")
    int_input("attn_temperature_offset", "temperature offset (0 or 1)", minimum=0)
    after("attn_temperature_offset")
