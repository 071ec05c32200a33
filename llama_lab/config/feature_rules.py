"""The rules of the fields that model one feature of today's families, checked once a
ModelConfig's derived fields are resolved: MLA and DeepSeekMoE's routing (``check_mla``,
``check_routing``), gpt-oss's expert block and sinks (``check_gpt_oss``), Gemma's fields and the
RoPE / QK-norm variants of OLMo 2, SmolLM3, Phi-3 and GLM (``check_gemma``), Gated DeltaNet
(``check_linear``), Llama 4's chunks and experts (``check_llama4``), the attention temperature
(``check_temperature``), the sparse attention patterns (``check_sparse``), the DSA indexer
(``check_indexer``), BERT's encoder (``check_encoder``) and the 2017 encoder-decoder
(``check_encoder_decoder``). A feature's rule sits with the fields, not with a family: several
families write the same fields (MLA: DeepSeek-V2, V3 and Mistral 4), and a config built by hand
may combine them. Each raises ConfigError naming the field, its value and the rule."""

from __future__ import annotations

from ..errors import ConfigError
from . import field_rules
from .bounds import FAMILY_LIMITS, LIMITS
from .fields import ModelFields
from .messages import check_int


def check_mla(cfg: ModelFields) -> None:
    for name in ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim"):
        check_int(name, getattr(cfg, name), 0, FAMILY_LIMITS[name])
    check_int("v_head_dim", cfg.v_head_dim, 1, FAMILY_LIMITS["v_head_dim"])
    if not cfg.is_mla:
        for name in ("q_lora_rank", "qk_rope_head_dim"):
            if getattr(cfg, name):
                raise ConfigError(
                    f"{name}={getattr(cfg, name)} needs MLA (kv_lora_rank > 0)",
                    field=name,
                    also=("kv_lora_rank",),
                )
        if cfg.v_head_dim != cfg.head_dim:
            raise ConfigError(
                f"v_head_dim={cfg.v_head_dim} differs from head_dim={cfg.head_dim}: only "
                f"MLA (kv_lora_rank > 0) has value heads of another width",
                field="v_head_dim",
                also=("head_dim", "kv_lora_rank"),
            )
        return
    rules = [
        (
            cfg.pos_encoding != "rope",
            "pos_encoding",
            "needs pos_encoding='rope' (its decoupled key is rotated)",
        ),
        (
            cfg.n_kv_heads != cfg.n_heads,
            "n_kv_heads",
            f"rebuilds K and V for every query head: n_kv_heads={cfg.n_kv_heads} must equal "
            f"n_heads={cfg.n_heads}",
        ),
        (
            cfg.qk_rope_head_dim < 2 or cfg.qk_rope_head_dim % 2,
            "qk_rope_head_dim",
            f"needs an even qk_rope_head_dim ≥ 2 (RoPE rotates pairs), got {cfg.qk_rope_head_dim}",
        ),
        (
            cfg.qk_rope_head_dim >= cfg.head_dim,
            "head_dim",
            f"needs head_dim={cfg.head_dim} (qk_nope_head_dim + qk_rope_head_dim) above "
            f"qk_rope_head_dim={cfg.qk_rope_head_dim}",
        ),
        (cfg.qk_norm, "qk_norm", "has no QK-norm (its latent has its own norm)"),
        (cfg.sliding_window > 0, "sliding_window", "is modelled without a sliding window"),
        (cfg.qkv_bias or cfg.o_bias, "qkv_bias", "is modelled without attention biases"),
    ]
    for broken, name, rule in rules:
        if broken:
            raise ConfigError(
                f"MLA (kv_lora_rank={cfg.kv_lora_rank}) {rule}", field=name, also=("kv_lora_rank",)
            )


def check_routing(cfg: ModelFields) -> None:
    check_int("n_shared_experts", cfg.n_shared_experts, 0, FAMILY_LIMITS["n_shared_experts"])
    check_int("moe_groups", cfg.moe_groups, 1, FAMILY_LIMITS["moe_groups"])
    check_int("moe_topk_groups", cfg.moe_topk_groups, 1, cfg.moe_groups)
    if not cfg.n_experts:
        if cfg.n_shared_experts:
            raise ConfigError(
                f"n_shared_experts={cfg.n_shared_experts} needs routed experts (n_experts > 0)",
                field="n_shared_experts",
                also=("n_experts",),
            )
        return
    E, groups = cfg.n_experts, cfg.moe_groups
    if E % groups:
        raise ConfigError(
            f"n_experts={E} is not divisible by moe_groups={groups}",
            field="moe_groups",
            also=("n_experts",),
        )
    reachable = cfg.moe_topk_groups * (E // groups)
    if cfg.experts_per_token > reachable:
        raise ConfigError(
            f"experts_per_token={cfg.experts_per_token} exceeds the {reachable} experts of the "
            f"moe_topk_groups={cfg.moe_topk_groups} groups a token may pick from",
            field="experts_per_token",
            also=("moe_topk_groups", "moe_groups"),
        )
    if cfg.moe_group_top2 and (cfg.moe_scoring != "softmax" or groups == 1):
        raise ConfigError(
            f"moe_group_top2=True ranks softmax expert groups by their two best scores (Mistral 4): "
            f"it needs moe_scoring='softmax' (sigmoid groups are ranked so already) and moe_groups > 1 "
            f"(moe_scoring={cfg.moe_scoring!r}, moe_groups={groups})",
            field="moe_group_top2",
            also=("moe_groups", "moe_scoring"),
        )
    if (cfg.moe_scoring == "sigmoid" or cfg.moe_group_top2) and groups > 1 and E // groups < 2:
        raise ConfigError(
            f"{'moe_group_top2=True' if cfg.moe_group_top2 else 'moe_scoring=' + repr('sigmoid')} ranks "
            f"a group by its two best experts: moe_groups={groups} leaves {E // groups} per group",
            field="moe_groups",
            also=("moe_scoring",),
        )


def check_gpt_oss(cfg: ModelFields) -> None:
    if cfg.moe_style == "gpt_oss":
        rules = [
            (not cfg.n_experts, "n_experts", "needs routed experts (n_experts > 0)"),
            (cfg.moe_scoring != "softmax", "moe_scoring", "routes by a softmax over the top-k logits"),
            (not cfg.moe_renormalize, "moe_renormalize", "renormalises over the top k (their softmax)"),
            (cfg.n_shared_experts > 0, "n_shared_experts", "has no shared experts"),
            (cfg.moe_groups > 1, "moe_groups", "has no expert groups"),
            (cfg.routed_scaling != 1.0, "routed_scaling", "does not scale the routed weights"),
        ]
        for broken, name, rule in rules:
            if broken:
                raise ConfigError(
                    f"moe_style='gpt_oss' {rule}: {name}={getattr(cfg, name)!r}",
                    field=name,
                    also=("moe_style",),
                )
    elif (cfg.swiglu_limit, cfg.swiglu_alpha) != (7.0, 1.702):
        raise ConfigError(
            f"swiglu_limit={cfg.swiglu_limit} and swiglu_alpha={cfg.swiglu_alpha} shape only "
            f"gpt-oss's experts: they need moe_style='gpt_oss' (else keep 7.0 and 1.702)",
            field="swiglu_limit" if cfg.swiglu_limit != 7.0 else "swiglu_alpha",
            also=("moe_style",),
        )
    if cfg.attention_sinks and cfg.is_mla:
        raise ConfigError(
            "attention_sinks with MLA is not modelled (no published model has both)",
            field="attention_sinks",
            also=("kv_lora_rank",),
        )


def check_gemma(cfg: ModelFields) -> None:
    """Gemma's fields, and the RoPE and QK-norm variants of OLMo 2, SmolLM3, Phi-3 and GLM."""
    field_rules.check_number(cfg, "rope_local_theta")  # derived floats, resolved by now
    check_int("query_pre_attn_scalar", cfg.query_pre_attn_scalar, 1, FAMILY_LIMITS["query_pre_attn_scalar"])
    field_rules.check_number(cfg, "attention_multiplier")
    rules = [
        (
            cfg.norm_plus_one and cfg.norm_type != "rmsnorm",
            "norm_plus_one",
            "needs norm_type='rmsnorm'",
        ),
        (cfg.attn_softcap and cfg.is_mla, "attn_softcap", "with MLA is not modelled"),
        (
            cfg.attn_softcap and cfg.attention_sinks,
            "attn_softcap",
            "with attention_sinks is not modelled",
        ),
        (
            cfg.is_mla and (cfg.partial_rotary_factor != 1 or cfg.nope_layers != "none"),
            "partial_rotary_factor" if cfg.partial_rotary_factor != 1 else "nope_layers",
            "with MLA is not modelled (its decoupled key sets the rotated part)",
        ),
        (
            cfg.qk_norm_scope != "head" and not cfg.qk_norm,
            "qk_norm_scope",
            "needs qk_norm (it says what QK-norm normalises)",
        ),
    ]
    for broken, name, rule in rules:
        if broken:
            raise ConfigError(f"{name}={getattr(cfg, name)!r} {rule}", field=name)


def check_linear(cfg: ModelFields) -> None:
    """Gated DeltaNet layers (Qwen3-Next, Qwen3.5), the gated attention output and the gated
    shared expert."""
    for name in ("linear_k_heads", "linear_v_heads", "linear_k_head_dim", "linear_v_head_dim"):
        check_int(name, getattr(cfg, name), 1, FAMILY_LIMITS[name])
    for name in ("linear_conv_kernel",):
        check_int(name, getattr(cfg, name), 1, FAMILY_LIMITS[name])
    linear = cfg.linear_layer_flags
    if any(linear):
        if cfg.linear_v_heads % cfg.linear_k_heads:
            raise ConfigError(
                f"linear_v_heads={cfg.linear_v_heads} is not a multiple of linear_k_heads="
                f"{cfg.linear_k_heads} (each q/k head serves a whole group of value heads)",
                field="linear_v_heads",
                also=("linear_k_heads",),
            )
        rules = [
            (cfg.is_mla, "kv_lora_rank", "MLA"),
            (cfg.norm_type != "rmsnorm", "norm_type", "norm_type other than 'rmsnorm'"),
            (cfg.norm_position not in ("pre",), "norm_position", f"norm_position={cfg.norm_position!r}"),
            (cfg.pos_encoding in ("learned", "sinusoidal"), "pos_encoding", "added positions"),
        ]
        for broken, name, what in rules:
            if broken:
                raise ConfigError(
                    f"linear_layers={cfg.linear_layers!r} with {what} is not modelled (Gated DeltaNet "
                    f"blocks are modelled as Qwen3-Next and Qwen3.5 build them)",
                    field="linear_layers",
                    also=(name,),
                )
        both = [i for i, (lin, loc) in enumerate(zip(linear, cfg.local_layer_flags)) if lin and loc]
        if both:
            raise ConfigError(
                f"block(s) {both} are both linear_layers and sliding-window layers: a Gated DeltaNet "
                f"block has no window (its state is fixed-size); take them out of local_layers",
                field="local_layers",
                also=("linear_layers",),
            )
    elif cfg.linear_grouped_proj:
        raise ConfigError(
            "linear_grouped_proj=True lays out Gated DeltaNet projections: it needs linear_layers",
            field="linear_grouped_proj",
            also=("linear_layers",),
        )
    if cfg.attn_output_gate and cfg.is_mla:
        raise ConfigError("attn_output_gate with MLA is not modelled", field="attn_output_gate")
    if cfg.shared_expert_gate and not (cfg.n_experts and cfg.n_shared_experts == 1):
        raise ConfigError(
            f"shared_expert_gate=True gates Qwen's one shared expert: it needs n_experts > 0 and "
            f"n_shared_experts=1 (n_experts={cfg.n_experts}, n_shared_experts={cfg.n_shared_experts})",
            field="shared_expert_gate",
            also=("n_shared_experts",),
        )


def check_llama4(cfg: ModelFields) -> None:
    """Llama 4's chunked attention, its QK-norm after RoPE, the attention temperature of its
    NoPE blocks and its expert block."""
    if cfg.chunked_attention and not cfg.sliding_window:
        raise ConfigError(
            "chunked_attention=True splits the local_layers' keys into chunks of sliding_window "
            "positions: it needs sliding_window > 0 (the chunk size)",
            field="chunked_attention",
            also=("sliding_window",),
        )
    if cfg.qk_norm_scope == "rope_l2" and cfg.pos_encoding != "rope":
        raise ConfigError(
            f"qk_norm_scope='rope_l2' normalises q and k after RoPE: it needs pos_encoding='rope', "
            f"got {cfg.pos_encoding!r}",
            field="qk_norm_scope",
            also=("pos_encoding",),
        )
    if cfg.moe_style != "llama4":
        return
    rules = [
        (not cfg.n_experts, "n_experts", "needs routed experts (n_experts > 0)"),
        (cfg.moe_scoring != "sigmoid", "moe_scoring", "weighs an expert by σ of its router logit"),
        (cfg.moe_renormalize, "moe_renormalize", "does not renormalise the top-k weights"),
        (cfg.n_shared_experts != 1, "n_shared_experts", "has one shared expert"),
        (cfg.moe_groups > 1, "moe_groups", "has no expert groups"),
        (cfg.routed_scaling != 1.0, "routed_scaling", "does not scale the routed weights"),
        (cfg.shared_expert_gate, "shared_expert_gate", "does not gate its shared expert"),
        (cfg.mlp_bias, "mlp_bias", "has no FFN biases"),
    ]
    for broken, name, rule in rules:
        if broken:
            raise ConfigError(
                f"moe_style='llama4' {rule}: {name}={getattr(cfg, name)!r}", field=name, also=("moe_style",)
            )


def check_temperature(cfg: ModelFields) -> None:
    """The attention temperature (Llama 4's NoPE blocks, Mistral 4's every block)."""
    check_int("attn_floor_scale", cfg.attn_floor_scale, 1, FAMILY_LIMITS["attn_floor_scale"])
    check_int("attn_temperature_offset", cfg.attn_temperature_offset, 0, 1)
    hit = [
        i for i, (t, lin) in enumerate(zip(cfg.temperature_layer_flags, cfg.linear_layer_flags)) if t and lin
    ]
    if hit:
        raise ConfigError(
            f"block(s) {hit} are Gated DeltaNet blocks: they have no attention scores for "
            f"attn_temperature_layers to sharpen",
            field="attn_temperature_layers",
            also=("linear_layers",),
        )


def check_sparse(cfg: ModelFields) -> None:
    """Longformer's global tokens and dilated window, BigBird's random blocks: they shape the
    local_layers' sliding window (``config.sparse``)."""
    check_int("global_tokens", cfg.global_tokens, 0, LIMITS["max_seq_len"])
    if cfg.global_tokens > cfg.max_seq_len:
        raise ConfigError(
            f"global_tokens={cfg.global_tokens} exceeds max_seq_len={cfg.max_seq_len}: the global "
            f"positions are the sequence's first ones",
            field="global_tokens",
            also=("max_seq_len",),
        )
    for name, low in (("random_blocks", 0), ("sparse_block_size", 1), ("sparse_seed", 0), ("dilation", 1)):
        check_int(name, getattr(cfg, name), low, FAMILY_LIMITS[name])
    used = [
        f"{name}={getattr(cfg, name)}"
        for name, plain in (("global_tokens", 0), ("random_blocks", 0), ("dilation", 1))
        if getattr(cfg, name) != plain
    ]
    first = used[0].partition("=")[0] if used else ""
    if used and not any(cfg.local_layer_flags):
        raise ConfigError(
            f"the sparse pattern ({', '.join(used)}) shapes the local_layers' sliding window: it needs "
            f"sliding_window > 0 "
            f"(sliding_window={cfg.sliding_window}, local_layers={cfg.local_layers!r})",
            field=first,
            also=("sliding_window",),
        )
    if used and cfg.chunked_attention:
        raise ConfigError(
            f"the sparse pattern ({', '.join(used)}) with chunked_attention is not modelled (it shapes "
            f"a sliding window, not Llama 4's chunks)",
            field=first,
            also=("chunked_attention",),
        )
    if not cfg.random_blocks:
        for name, plain in (("sparse_block_size", 64), ("sparse_seed", 0)):
            if getattr(cfg, name) != plain:
                raise ConfigError(
                    f"{name}={getattr(cfg, name)} sets BigBird's random blocks: it needs random_blocks > 0 "
                    f"(else keep {plain})",
                    field=name,
                    also=("random_blocks",),
                )


def check_indexer(cfg: ModelFields) -> None:
    """DeepSeek Sparse Attention's lightning indexer: it reads q's bottleneck and rotates the
    first qk_rope_head_dim of its heads, so it needs MLA with q_lora_rank > 0."""
    check_int("index_n_heads", cfg.index_n_heads, 0, FAMILY_LIMITS["index_n_heads"])
    check_int("index_head_dim", cfg.index_head_dim, 1, FAMILY_LIMITS["index_head_dim"])
    check_int("index_topk", cfg.index_topk, 1, FAMILY_LIMITS["index_topk"])
    if not cfg.has_indexer:
        return
    rules = [
        (
            not cfg.is_mla,
            "kv_lora_rank",
            "needs MLA (kv_lora_rank > 0): it picks the keys of MLA's attention",
        ),
        (not cfg.q_lora_rank, "q_lora_rank", "needs q_lora_rank > 0 (its queries come from q's bottleneck)"),
        (
            cfg.index_head_dim < cfg.qk_rope_head_dim,
            "index_head_dim",
            f"needs index_head_dim={cfg.index_head_dim} ≥ qk_rope_head_dim={cfg.qk_rope_head_dim} "
            f"(RoPE rotates its first qk_rope_head_dim)",
        ),
        (
            any(cfg.temperature_layer_flags),
            "attn_temperature_layers",
            "with an attention temperature is not modelled",
        ),
    ]
    for broken, name, rule in rules:
        if broken:
            raise ConfigError(
                f"the DSA indexer (index_n_heads={cfg.index_n_heads}) {rule}",
                field=name,
                also=("index_n_heads",),
            )


def check_encoder(cfg: ModelFields) -> None:
    """BERT's encoder: bidirectional attention (``causal=False``) runs on the plain attention
    path only (SDPA without a mask); the segment embeddings, the embedding norm, the pooler and a
    bare encoder (``lm_head=False``) each need what they read."""
    check_int("type_vocab_size", cfg.type_vocab_size, 0, FAMILY_LIMITS["type_vocab_size"])
    bidirectional = [
        (cfg.sliding_window > 0, "sliding_window", "a sliding window (a causal band)"),
        (cfg.has_linear_attention, "linear_layers", "Gated DeltaNet blocks (a causal recurrence)"),
        (cfg.is_mla, "kv_lora_rank", "MLA (modelled for causal decoding over its latent)"),
        (cfg.attention_sinks, "attention_sinks", "attention sinks"),
        (cfg.attn_softcap > 0, "attn_softcap", "soft-capped scores"),
    ]
    for broken, name, words in bidirectional if not cfg.causal else []:
        if broken:
            raise ConfigError(
                f"causal=False (bidirectional attention) is not modelled with {words}: "
                f"{name}={getattr(cfg, name)!r}",
                field="causal",
                also=(name,),
            )
    headless = [
        (cfg.tie_embeddings, "tie_embeddings", "ties no head"),
        (cfg.logit_softcap > 0, "logit_softcap", "has no logits to cap"),
        (cfg.logits_scaling != 1.0, "logits_scaling", "has no logits to scale"),
    ]
    for broken, name, words in headless if not cfg.lm_head else []:
        if broken:
            raise ConfigError(
                f"lm_head=False (a bare encoder, no output layer) {words}: {name}={getattr(cfg, name)!r}",
                field="lm_head",
                also=(name,),
            )


def require_decoder_only(cfg: ModelFields, surface: str) -> None:
    """The one check of every surface that models a causal decoder-only LM alone (decoding and
    its cache, the next-token loss and training loop, fine-tuning, speculative decoding,
    quantisation, the decode and training predictions, parallel layouts, the hooks inside the
    model): an encoder-decoder (the 2017 Transformer), a bidirectional encoder (BERT) or a model
    with no LM head is refused by name, in one line."""
    if cfg.encoder_layers:
        raise ConfigError(
            f"{surface}: an encoder-decoder (encoder_layers={cfg.encoder_layers}, the 2017 Transformer) "
            f"is not modelled here, only decoder-only models are",
            field="encoder_layers",
        )
    if not cfg.causal:
        raise ConfigError(
            f"{surface} is not modelled for a bidirectional encoder (causal=False: every token sees "
            f"the later ones, so there is no next token to predict and nothing to cache)",
            field="causal",
        )
    if not cfg.lm_head:
        raise ConfigError(
            f"{surface} needs an LM head: this is a bare encoder (lm_head=False, BertModel's)",
            field="lm_head",
        )


def check_encoder_decoder(cfg: ModelFields) -> None:
    """The 2017 encoder-decoder (MarianMTModel): what it is, and nothing LLaMA Lab does not
    build beside an encoder."""
    check_int("encoder_layers", cfg.encoder_layers, 0, FAMILY_LIMITS["encoder_layers"])
    if not cfg.is_encoder_decoder:
        return
    rules = [
        (cfg.norm_position != "post", "norm_position", "is Post-LN (norm_position='post')"),
        (cfg.norm_type != "layernorm", "norm_type", "normalises with LayerNorm"),
        (cfg.final_norm, "final_norm", "has no final norm (Post-LN: each block ends with one)"),
        (
            not (cfg.qkv_bias and cfg.o_bias and cfg.mlp_bias),
            "bias",
            "has biases on every projection (qkv_bias, o_bias, mlp_bias)",
        ),
        (
            cfg.pos_encoding not in ("sinusoidal", "learned"),
            "pos_encoding",
            "adds sinusoidal or learned positions to the embeddings",
        ),
        (cfg.gated_ffn, "ffn_type", "has an ungated FFN (relu, gelu or silu)"),
        (cfg.head_dim * cfg.n_heads != cfg.d_model, "head_dim", "has heads of d_model / n_heads"),
        (cfg.n_experts > 0, "n_experts", "is modelled without experts"),
        (cfg.is_mla, "kv_lora_rank", "is modelled without MLA"),
        (cfg.linear_layers != "none", "linear_layers", "is modelled without linear-attention blocks"),
        (cfg.sliding_window > 0, "sliding_window", "is modelled without a sliding window"),
        (cfg.qk_norm, "qk_norm", "has no QK-norm"),
        (cfg.attention_sinks, "attention_sinks", "has no attention sinks"),
        (cfg.norm_plus_one, "norm_plus_one", "has no (1 + γ) norms"),
        (cfg.attn_softcap or cfg.logit_softcap, "attn_softcap", "has no soft-capping"),
        (cfg.query_pre_attn_scalar != cfg.head_dim, "query_pre_attn_scalar", "scales scores by 1/√head_dim"),
        (cfg.has_granite_multipliers, "embedding_multiplier", "has no µP multipliers"),
        (cfg.attn_temperature_layers != "none", "attn_temperature_layers", "has no attention temperature"),
        (cfg.fused_keys, "fused_keys", "keeps q, k, v apart"),
    ]
    for broken, name, rule in rules:
        if broken:
            raise ConfigError(
                f"an encoder-decoder (encoder_layers={cfg.encoder_layers}) {rule}: not modelled with "
                f"{name}={getattr(cfg, name)!r}",
                field=name,
                also=("encoder_layers",),
            )
