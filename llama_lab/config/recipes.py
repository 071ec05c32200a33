"""Configs derived from configs: the 2017 and LLaMA recipes at a model's size, and the small
copies the live experiments train (a model's recipe at a size that runs in seconds on a CPU).
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import ConfigError
from .ffn import seed_ffn_hidden
from .fields import RopeScaling
from .model_config import ModelConfig


def without_mla(cfg: ModelConfig) -> ModelConfig:
    """An MLA model with plain attention: heads of its value width d_h for q, k and v (the
    comparison of DeepSeek-V2's Table 1), and no DSA indexer (it reads MLA's q bottleneck); any
    other model as it is."""
    if not cfg.is_mla:
        return cfg
    return cfg.replace(
        kv_lora_rank=0,
        q_lora_rank=0,
        qk_rope_head_dim=0,
        head_dim=cfg.v_head_dim,
        v_head_dim=None,
        index_n_heads=0,
    )


def encoder_stack(cfg: ModelConfig) -> ModelConfig:
    """An encoder-decoder's encoder as a decoder-only config of its blocks (the same width,
    heads, FFN and norms; ``encoder_layers`` of them): what its blocks count. The encoder's
    blocks attend bidirectionally, which changes no parameter and no full-T×T FLOP."""
    return cfg.replace(n_layers=cfg.encoder_layers, encoder_layers=0)


def decoder_stack(cfg: ModelConfig) -> ModelConfig:
    """An encoder-decoder's decoder without its cross-attention: the decoder-only config of its
    blocks, embedding and head (its self-attention cache is that config's)."""
    return cfg.replace(encoder_layers=0)


def recipe_2017(cfg: ModelConfig) -> ModelConfig:
    """The original decoder recipe at cfg's size (seed table, left column)."""
    return without_mla(cfg).replace(
        norm_position="post",
        norm_type="layernorm",
        pos_encoding="sinusoidal",
        ffn_type="relu",
        ffn_hidden=4 * cfg.d_model,
        bias=True,
        final_norm=False,
        init="xavier",
        embed_scale=True,
        n_kv_heads=cfg.n_heads,
    )


def recipe_llama(cfg: ModelConfig) -> ModelConfig:
    """The LLaMA recipe at cfg's size (seed table, right column)."""
    return cfg.replace(
        norm_position="pre",
        norm_type="rmsnorm",
        pos_encoding="rope",
        ffn_type="swiglu",
        ffn_hidden=seed_ffn_hidden(cfg.d_model),
        bias=False,
        final_norm=True,
        init="normal",
        embed_scale=False,
    )


def arrangement(cfg: ModelConfig, position: str) -> ModelConfig:
    """``cfg`` arranged as Post-LN or Pre-LN for a contrast of the two (Xiong et al. 2020): the
    Pre-LN arm always ends with a final norm, as in the paper and LLaMA; the Post-LN arm never
    gets one on top of its last block's own norm (no LN(LN(x))), whatever ``cfg.final_norm``."""
    return cfg.replace(norm_position=position, final_norm=position == "pre")


# The settings a Post-LN/Pre-LN measurement can be made in: Xiong et al.'s (the 2017 recipe:
# Xavier init, LayerNorm, embeddings × √d), LLaMA's (N(0, 0.02), RMSNorm), or the sidebar's.
REGIMES = {
    "theory": "Theory: Xavier, LayerNorm, embeddings × √d (Xiong et al., 2017 recipe)",
    "llama": "LLaMA init: N(0, 0.02), RMSNorm (LLaMA recipe)",
    "sidebar": "The sidebar's recipe",
}


def regime_recipe(cfg: ModelConfig, regime: str) -> ModelConfig:
    """The recipe of a Post-LN/Pre-LN measurement: the 2017 or the LLaMA recipe at the seed demo
    model's shape (the live copy rescales it), or ``cfg`` itself for "sidebar"."""
    if regime == "theory":
        return recipe_2017(ModelConfig())
    if regime == "llama":
        return recipe_llama(ModelConfig())
    if regime == "sidebar":
        return cfg
    raise ConfigError(f"regime={regime!r} must be one of {', '.join(map(repr, REGIMES))}", field="regime")


# Size of the short training runs behind the table (byte-level data: vocab 256).
TRAINING_SHAPE = dict(vocab_size=256, d_model=64, n_layers=4, n_heads=4, max_seq_len=64)


def small_training_config(cfg: ModelConfig, *, d_model: int | None = None) -> ModelConfig:
    """``cfg``'s recipe (norms, positions, FFN type, bias, init, tying) at a size that trains in
    seconds on a CPU: d 64 (or ``d_model``), 4 layers, and heads by ``_live_heads``: the same
    attention kind always, and the model's queries per KV head exactly; a multimodal model's
    text decoder."""
    d = d_model or TRAINING_SHAPE["d_model"]
    heads, kv, head_dim = _live_heads(cfg, d)
    width = seed_ffn_hidden(d) if cfg.gated_ffn else round(cfg.ffn_hidden / cfg.d_model * d)
    # families: head_dim d / 4 heads; an expert keeps its width relative to d; experts and the
    # top-k stay as they are (the router is the point); layer sets refer to blocks that exist
    expert = max(1, round(cfg.expert_ffn_hidden / cfg.d_model * d))
    if cfg.is_mla:  # heads of d/4 for v and the part without RoPE, half that rotated, a latent
        # of two value heads (a third of MHA's cache), q's bottleneck 3× the latent (DeepSeek-V3)
        Dv = d // heads
        mla = dict(
            qk_rope_head_dim=max(2, Dv // 2 // 2 * 2),
            v_head_dim=Dv,
            kv_lora_rank=2 * Dv,
            q_lora_rank=6 * Dv if cfg.q_lora_rank else 0,
        )
        head_dim = Dv + mla["qk_rope_head_dim"]
        cfg = cfg.replace(**mla)
    small = cfg.replace(
        **{**TRAINING_SHAPE, "d_model": d, "n_heads": heads},
        vision=None,  # the text decoder trains live; a vision tower is counted, never run
        n_kv_heads=kv,
        ffn_hidden=max(1, width),
        head_dim=head_dim,
        expert_ffn_hidden=expert if cfg.is_moe else None,
        **fitted_layer_sets(cfg, TRAINING_SHAPE["n_layers"]),
        **_live_linear(cfg, d),
        partial_rotary_factor=1.0,  # the copy's heads first, then the share that fits them
        rope_scaling=None,  # (then the model's, fitted to the copy's rotated pairs)
    )
    small = small.replace(partial_rotary_factor=_even_rotary_share(cfg.partial_rotary_factor, small))
    small = small.replace(rope_scaling=_fitted_scaling(cfg.rope_scaling, small.rope_dim // 2))
    if cfg.query_pre_attn_scalar == cfg.head_dim:
        return small
    # a score scale of its own (Gemma 3 27B: 168 for heads of 128) keeps its ratio to head_dim
    ratio = cfg.query_pre_attn_scalar / cfg.head_dim
    return small.replace(query_pre_attn_scalar=max(1, round(ratio * small.head_dim)))


def _fitted_scaling(scaling: RopeScaling | None, pairs: int) -> RopeScaling | None:
    """The model's RoPE scaling on a copy that rotates ``pairs`` pairs: LongRoPE's factor per
    pair taken at the same relative place in the model's list (the lowest and the highest
    frequency keep theirs); every other scaling holds whatever the width."""
    if scaling is None or scaling.rope_type != "longrope":
        return scaling

    def fitted(factors: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if factors is None:
            return None
        n = len(factors)
        return tuple(factors[round(i * (n - 1) / max(1, pairs - 1))] for i in range(pairs))

    short, long = fitted(scaling.short_factor), fitted(scaling.long_factor)
    return replace(scaling, short_factor=short, long_factor=long)


def _live_heads(cfg: ModelConfig, d: int) -> tuple[int, int, int | None]:
    """(query heads, KV heads, head_dim or None for d / heads) of a small copy of width ``d``:
    the same attention kind and exactly the model's queries per KV head r. MHA (and MLA) takes 4
    heads; GQA r per KV head with 2 KV heads (LLaMA-2-70B's 64/8 becomes 16/2, a 14/2 model
    14/2); MQA the model's r query heads over 1. Heads are d / heads wide when that is even (RoPE
    rotates pairs), else the even size below it, at least 2: the heads then span a little less
    than d (14 heads of 4 in d = 64), or more when d is narrower than 2 per head (Qwen3's span
    more than d too)."""
    if cfg.attention_kind in ("MHA", "MLA"):
        return TRAINING_SHAPE["n_heads"], TRAINING_SHAPE["n_heads"], None
    kv = 1 if cfg.attention_kind == "MQA" else 2
    heads = kv * (cfg.n_heads // cfg.n_kv_heads)
    size = max(2, d // heads // 2 * 2)
    return heads, kv, None if size * heads == d else size


def _live_linear(cfg: ModelConfig, d: int) -> dict:
    """A small copy's Gated DeltaNet heads: 2 q/k heads, the model's value heads per q/k head,
    heads of d / 4 (Qwen3-Next's 16 and 32 heads of 128 at d 2048 become 2 and 4 of 16 at 64)."""
    if not cfg.has_linear_attention:
        return {}
    per_key = cfg.linear_v_heads // cfg.linear_k_heads
    size = max(2, d // 4)
    return dict(linear_k_heads=2, linear_v_heads=2 * per_key, linear_k_head_dim=size, linear_v_head_dim=size)


def _nope_flags(cfg: ModelConfig) -> tuple[bool, ...]:
    """Per block: whether it is one of nope_layers (an attention block that rotates nothing)."""
    if cfg.pos_encoding != "rope":
        return (False,) * cfg.n_layers
    return tuple(
        not rope and not linear for rope, linear in zip(cfg.rope_layer_flags, cfg.linear_layer_flags)
    )


def _even_rotary_share(factor: float, small: ModelConfig) -> float:
    """A partial RoPE's share for the copy's heads: RoPE rotates pairs, so the rotated part
    int(head_dim × factor) must be even and at least 2; the share whose part is the even number
    nearest the model's (Phi-4-mini's 3/4 of heads of 10 rotates 8: 0.8; a whole head: 1)."""
    if factor == 1 or small.is_mla:
        return factor
    head = small.head_dim
    if int(head * factor) % 2 == 0 and int(head * factor) >= 2:
        return factor
    part = min(head, max(2, round(head * factor / 2) * 2))
    share = part / head
    return share if int(head * share) == part else (part + 0.5) / head


def _fit_layers(flags: tuple[bool, ...], spec: str, n: int = TRAINING_SHAPE["n_layers"]) -> str:
    """A layer set for the small copy's blocks: 'all' stays, 'from:K' (K dense blocks first)
    becomes 'from:1', anything else the pattern of the first blocks (alternation survives,
    block numbers past the copy do not)."""
    if spec.strip() in ("all", "none", "") or spec.startswith("every:"):
        return spec
    if spec.strip().startswith("from:"):  # dense blocks first (DeepSeek): one, then sparse ones
        return "from:1" if any(flags) and not flags[0] else "all"
    chosen = [str(i) for i, flag in enumerate(flags[:n]) if flag]
    return ",".join(chosen) or "none"


def fitted_layer_sets(cfg: ModelConfig, n: int) -> dict[str, str]:
    """Every layer set of ``cfg`` for a copy of ``n`` blocks (``_fit_layers``)."""
    return dict(
        local_layers=_fit_layers(cfg.local_layer_flags, cfg.local_layers, n),
        moe_layers=_fit_layers(cfg.moe_layer_flags, cfg.moe_layers, n),
        nope_layers=_fit_layers(_nope_flags(cfg), cfg.nope_layers, n),
        linear_layers=_fit_layers(cfg.linear_layer_flags, cfg.linear_layers, n),
        attn_temperature_layers=_fit_layers(cfg.temperature_layer_flags, cfg.attn_temperature_layers, n),
    )


def live_config(
    cfg: ModelConfig, n_layers: int, d_model: int = TRAINING_SHAPE["d_model"], seq_len: int = 0
) -> ModelConfig:
    """``cfg``'s recipe (norms, positions, FFN type, biases, init, KV sharing) at a size that
    runs live: small_training_config at the given width (the model's queries per KV head,
    byte-level vocabulary 256, the recipe's FFN rule), then the given depth and room for
    ``seq_len`` tokens (a multimodal model's: its text decoder, as small_training_config's)."""
    small = small_training_config(cfg, d_model=d_model)
    return small.replace(
        n_layers=n_layers,
        max_seq_len=max(seq_len, small.max_seq_len),
        **fitted_layer_sets(cfg, n_layers),
    )
