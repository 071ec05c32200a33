"""The ``analyze --json`` object, and the CLI's plain-text table of it."""

from __future__ import annotations

import math

from ..config import ModelConfig
from ..runtime.hardware import GPUS
from ..units import human_bytes, human_count, human_params, plural
from .common import check_seq, checked_dtype_bytes, training_dtype
from .flash import attention_memory
from .flops import count_flops
from .kv import kv_cache, max_context_that_fits, naive_mla_bytes_per_token
from .memory import inference_memory, training_memory
from .params import ParamCount, count_params, qk_norm_widths
from .quant import WeightQuant, as_weight_quant, weights_bytes


def family_notes(cfg: ModelConfig, params: ParamCount | None = None) -> list[str]:
    """One line each for what sets the config apart from a plain LLaMA: head_dim, QK-norm,
    the sliding window, the experts — every figure computed from the config."""
    params = params or count_params(cfg)
    notes = []
    if cfg.is_mla:
        notes.append(_mla_note(cfg))
    elif cfg.head_dim != cfg.d_model // cfg.n_heads or cfg.d_model % cfg.n_heads:
        notes.append(
            f"**head_dim {cfg.head_dim}**, not d_model / n_heads = "
            f"{cfg.d_model / cfg.n_heads:g}: q is {cfg.n_heads}×{cfg.head_dim} = "
            f"{cfg.n_heads * cfg.head_dim:,} wide, o_proj maps it back to {cfg.d_model:,}."
        )
    if cfg.qk_norm and cfg.qk_norm_scope == "rope_l2":
        notes.append(
            f"**QK-norm after RoPE** (Llama 4): q and k of the {sum(cfg.rope_layer_flags)} rotated "
            f"blocks are scaled to unit RMS over each head's {cfg.head_dim} dimensions after "
            f"rotation, with no γ (0 parameters); the NoPE blocks are not normalised."
        )
    elif cfg.qk_norm:
        q_width, k_width = qk_norm_widths(cfg)
        where = (
            f"the {cfg.head_dim} dimensions of every q and k head (Qwen3)"
            if cfg.qk_norm_scope == "head"
            else f"all {q_width:,} dimensions of q and the {k_width:,} of k, not per head (OLMo 2)"
        )
        notes.append(
            f"**QK-norm**: an RMSNorm over {where} before RoPE, {q_width + k_width:,} parameters per "
            f"{'attention ' if cfg.has_linear_attention else ''}block."
        )
    local = sum(cfg.local_layer_flags)
    if local and cfg.chunked_attention:
        notes.append(
            f"**Chunked attention** (Llama 4): {local} of {plural(cfg.n_layers, 'block')} "
            f"{'cuts' if local == 1 else 'cut'} the sequence "
            f"into chunks of {cfg.sliding_window:,} positions; a query sees only the earlier keys "
            f"of its own chunk, so their scores cost at most T·W and their cache holds at most W "
            f"tokens"
            + (
                f"; the other {cfg.n_layers - local} "
                f"{'attends' if cfg.n_layers - local == 1 else 'attend'} every earlier token."
                if local < cfg.n_layers
                else "."
            )
        )
    elif local:
        notes.append(
            f"**Sliding window** (sparse attention, Mistral): {local} of {plural(cfg.n_layers, 'block')} "
            f"{'lets' if local == 1 else 'let'} each query see only its last {cfg.sliding_window:,} keys, so "
            f"their scores cost T·W instead of T² and their KV cache stops growing at "
            f"W tokens"
            + (
                f"; the other {cfg.n_layers - local} "
                f"{'attends' if cfg.n_layers - local == 1 else 'attend'} every earlier token."
                if local < cfg.n_layers
                else "."
            )
        )
    notes += _gemma_notes(cfg, params) + _rope_and_norm_notes(cfg)
    if cfg.attention_sinks:
        notes.append(
            f"**Attention sinks** (gpt-oss): each of the {cfg.n_heads} heads of every block has a "
            f"learned logit that joins its softmax and is dropped after it, so a head's weights "
            f"may sum to less than 1 (it can attend to nothing); {cfg.n_heads * cfg.n_layers:,} "
            f"parameters in all, no KV cache."
        )
    notes += _hybrid_notes(cfg, params)
    notes += _llama4_notes(cfg, params)
    if cfg.is_moe and cfg.moe_style == "gpt_oss":
        notes.append(_gpt_oss_moe_note(cfg, params))
    elif cfg.is_moe and cfg.moe_style == "llama4":
        pass  # _llama4_notes
    elif cfg.is_moe and cfg.shared_expert_gate:
        notes.append(
            f"**Gated shared expert** (Qwen3-Next / Qwen3.5): "
            f"{plural(sum(cfg.moe_layer_flags), 'sparse block')} of {cfg.n_experts} experts of "
            f"{cfg.expert_ffn_hidden:,}, {cfg.experts_per_token} per "
            f"token, plus one shared expert as wide that every token passes, scaled by "
            f"σ(w·x) (shared_expert_gate, {cfg.d_model:,} parameters per block); a token uses "
            f"{params.active:,} of {params.total:,} parameters ({params.active / params.total:.1%})."
        )
    elif cfg.is_moe and (cfg.n_shared_experts or cfg.moe_scoring != "softmax" or cfg.moe_groups > 1):
        notes.append(_deepseek_moe_note(cfg, params))
    elif cfg.is_moe:
        experts = params.detail["experts"]
        notes.append(
            f"**Mixture of experts** (Mixtral / Qwen3-MoE): "
            f"{plural(sum(cfg.moe_layer_flags), 'sparse block')} of {cfg.n_experts} experts; a router picks "
            f"{cfg.experts_per_token} per token. All experts are weights to store "
            f"({experts / params.total:.0%} of the {params.total:,} parameters); a "
            f"token uses {params.active:,} ({params.active / params.total:.1%})."
        )
    return notes


def _hybrid_notes(cfg: ModelConfig, params: ParamCount) -> list[str]:
    """Qwen3-Next's and Qwen3.5's Gated DeltaNet blocks and gated attention."""
    from .kv import state_bytes

    notes = []
    n_linear = sum(cfg.linear_layer_flags)
    if n_linear:
        per_block = state_bytes(cfg, "bf16") // n_linear
        notes.append(
            f"**Gated DeltaNet** (linear attention, Qwen3-Next / Qwen3.5): {n_linear} of "
            f"{plural(cfg.n_layers, 'block')} {'mixes' if n_linear == 1 else 'mix'} tokens with the "
            f"gated delta rule instead of softmax attention: per value "
            f"head a {cfg.linear_k_head_dim}×{cfg.linear_v_head_dim} state (×{cfg.linear_v_heads} "
            f"heads) updated per token after a {cfg.linear_conv_kernel}-tap causal convolution, so "
            f"they cache no K or V: {per_block:,} bytes of state per block and sequence at any "
            f"length (bf16 conv inputs, float32 state); the other {cfg.full_attention_layers} "
            f"{'attends' if cfg.full_attention_layers == 1 else 'attend'} over the whole context."
        )
    if cfg.attn_output_gate:
        notes.append(
            f"**Gated attention**: q_proj also emits a gate for each head and dimension; the "
            f"attention output is multiplied by σ(gate) before o_proj "
            f"({cfg.n_heads * cfg.head_dim * cfg.d_model:,} more parameters per attention block)."
        )
    return notes


def _llama4_notes(cfg: ModelConfig, params: ParamCount) -> list[str]:
    """Llama 4's attention temperature on its NoPE blocks and its expert block."""
    notes = []
    sharpened = sum(cfg.temperature_layer_flags)
    if sharpened:
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
        notes.append(
            f"**Attention temperature**: {which} {multiply} q at position p by 1 + {scale:g}·ln(1 + "
            f"⌊{'(p + 1)' if offset else 'p'} / {floor:,}⌋): 1 before position {first:,}, then "
            f"{at[0][1]:.3f} at {at[0][0]:,}, {at[1][1]:.3f} at {at[1][0]:,} (sharper attention far "
            f"into a long context; no parameters, no FLOPs counted)."
        )
    if cfg.is_moe and cfg.moe_style == "llama4":
        sparse = sum(cfg.moe_layer_flags)
        dense = cfg.n_layers - sparse
        notes.append(
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
            + f". A token uses {params.active:,} of {params.total:,} parameters "
            f"({params.active / params.total:.1%})."
        )
    return notes


def _gemma_notes(cfg: ModelConfig, params: ParamCount) -> list[str]:
    """Gemma 2/3's departures from LLaMA, each with its figure."""
    notes = []
    if cfg.norm_position == "sandwich":
        extra = params.detail["pre_feedforward_layernorm"] + params.detail["post_feedforward_layernorm"]
        notes.append(
            f"**Sandwich norms** (Gemma 2/3): each sublayer's output is normalised too before the "
            f"residual add, x + norm(f(norm(x))): 4 norms per block instead of 2 "
            f"({extra:,} more parameters)"
            + (", each scaling by 1 + γ (γ stored from 0)." if cfg.norm_plus_one else ".")
        )
    if cfg.ffn_type == "geglu":
        notes.append(
            f"**GeGLU**: the gate goes through tanh-approximated GELU, not SiLU; the same three "
            f"matrices of {cfg.d_model:,}×{cfg.ffn_hidden:,} as SwiGLU."
        )
    if cfg.query_pre_attn_scalar != cfg.head_dim:
        notes.append(
            f"**Score scale 1/√{cfg.query_pre_attn_scalar}** (query_pre_attn_scalar), not "
            f"1/√head_dim = 1/√{cfg.head_dim}: same FLOPs, softer or sharper attention."
        )
    local = sum(cfg.local_layer_flags)
    if local and cfg.pos_encoding == "rope" and cfg.rope_local_theta != cfg.rope_theta:
        notes.append(
            f"**Two RoPE bases**: the {plural(local, 'windowed block')} "
            f"{'rotates' if local == 1 else 'rotate'} with base "
            f"{cfg.rope_local_theta:,.0f}, the {cfg.n_layers - local} global "
            f"{'one' if cfg.n_layers - local == 1 else 'ones'} with "
            f"{cfg.rope_theta:,.0f} (Gemma 3's local:global pattern)."
        )
    caps = [f"scores at ±{cfg.attn_softcap:g}"] * bool(cfg.attn_softcap)
    caps += [f"final logits at ±{cfg.logit_softcap:g}"] * bool(cfg.logit_softcap)
    if caps:
        notes.append(
            f"**Soft-capping** (Gemma 2): x → cap · tanh(x / cap) bounds the {' and the '.join(caps)}; "
            f"element-wise work only (capped scores run as plain matmuls: SDPA takes no cap)."
        )
    return notes


def _rope_and_norm_notes(cfg: ModelConfig) -> list[str]:
    """OLMo 2's output norms and QK-norm, SmolLM3's NoPE blocks, partial rotary (Phi-3, GLM)."""
    notes = []
    if cfg.norm_position == "output":
        notes.append(
            "**Output norms** (OLMo 2): each sublayer reads the residual stream itself and its "
            "output is normalised before the add, x + norm(f(x)); no norm before attention or FFN."
        )
    rotated, attending = sum(cfg.rope_layer_flags), cfg.full_attention_layers
    if cfg.pos_encoding == "rope" and rotated < attending:
        notes.append(
            f"**NoPE blocks** (SmolLM3, Llama 4): {attending - rotated} of "
            f"{plural(attending, 'attention block')} {'attends' if attending - rotated == 1 else 'attend'} "
            f"without RoPE (no position signal but the causal mask); the other {rotated} "
            f"{'rotates' if rotated == 1 else 'rotate'}."
        )
    if cfg.pos_encoding == "rope" and not cfg.is_mla and cfg.rope_dim < cfg.head_dim:
        notes.append(
            f"**Partial RoPE**: only the first {cfg.rope_dim} of each head's {cfg.head_dim} "
            f"dimensions rotate (partial_rotary_factor {cfg.partial_rotary_factor:g}); the rest "
            f"carry content only."
        )
    return notes


def _gpt_oss_moe_note(cfg: ModelConfig, params: ParamCount) -> str:
    """gpt-oss's expert block, with its share of the parameters and the active count."""
    embedding = params.by_component["embedding"]
    return (
        f"**gpt-oss experts**: {plural(sum(cfg.moe_layer_flags), 'sparse block')} of {cfg.n_experts} "
        f"experts; a router with a bias picks {cfg.experts_per_token} per token and weights them by "
        f"the softmax of their {cfg.experts_per_token} logits. Each expert is a SwiGLU with "
        f"biases, clamped at ±{cfg.swiglu_limit:g}: (up + 1) · g·σ({cfg.swiglu_alpha:g}·g). "
        f"Experts are {params.detail['experts'] / params.total:.0%} of the {params.total:,} "
        f"parameters; a token uses {params.active:,}, or {params.active - embedding:,} without "
        f"the embedding table (the model card's convention: the unembedding counts, the "
        f"embedding does not)."
    )


def _mla_note(cfg: ModelConfig) -> str:
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


def _deepseek_moe_note(cfg: ModelConfig, params: ParamCount) -> str:
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
        f"{cfg.routed_scaling:g}. A token uses {params.active:,} of the {params.total:,} "
        f"parameters ({params.active / params.total:.1%})."
    )


FLOP_KEYS = (
    "forward",
    "by_component",
    "training_step",
    "per_token",
    "training_per_token",
    "attention_scores_causal",
    "forward_causal",
    "palm_params",
    "palm_training_per_token",
    "elementwise",
    "elementwise_constants",
    "conventions",
)


def architecture(cfg: ModelConfig) -> dict:
    """What sets the config's family apart: head_dim, QK-norm, windows, experts."""
    return {
        "head_dim": cfg.head_dim,
        "qk_norm": cfg.qk_norm,
        "sliding_window": cfg.sliding_window,
        "local_layers": sum(cfg.local_layer_flags),
        "sparse_layers": sum(cfg.moe_layer_flags),
        "n_experts": cfg.n_experts,
        "experts_per_token": cfg.experts_per_token,
        "n_shared_experts": cfg.n_shared_experts,
        "mla": cfg.is_mla,
        "kv_lora_rank": cfg.kv_lora_rank,
    }


def analyze(
    cfg: ModelConfig,
    seq_len: int,
    batch: int = 1,
    dtype: str = "bf16",
    weights: "WeightQuant | str | None" = None,
    kv_dtype: str | None = None,
) -> dict:
    """The ``analyze --json`` object (plain JSON types), plus extra keys. ``weights`` (a
    format or its name) and ``kv_dtype`` default to ``dtype``."""
    check_seq(seq_len, batch)
    checked_dtype_bytes(dtype)
    weights = as_weight_quant(weights or dtype)
    kv_dtype = kv_dtype or dtype
    stored = weights_bytes(cfg, weights)
    params = count_params(cfg)
    flops = count_flops(cfg, seq_len, batch)
    kv = kv_cache(cfg, seq_len, batch, kv_dtype)
    compute = training_dtype(dtype)
    training = training_memory(cfg, seq_len, batch, compute)
    inference = inference_memory(cfg, seq_len, batch, dtype, weights, kv_dtype)
    attention = attention_memory(cfg, seq_len, batch, compute)
    notes = []
    if seq_len > cfg.max_seq_len:
        notes.append(
            f"seq_len={seq_len} exceeds max_seq_len={cfg.max_seq_len}: counted as if the model allowed it"
        )
    if cfg.pos_encoding == "learned":
        notes.append(
            "params.by_component.embedding includes the learned positional table "
            f"({params.by_component['positional']:,})"
        )
    return {
        "inputs": {
            "seq_len": seq_len,
            "batch": batch,
            "dtype": dtype,
            "weight_dtype": weights.dtype,
            "kv_dtype": kv_dtype,
            "attention_kind": cfg.attention_kind,
        },
        "architecture": architecture(cfg),
        "params": {
            "total": params.total,
            "active": params.active,
            "by_component": params.spec_by_component(),
            "non_embedding": params.non_embedding,
            "per_layer": params.per_layer,
            "detail": params.detail,
        },
        "flops": {key: getattr(flops, key) for key in FLOP_KEYS},
        "kv_cache": {
            "dtype": kv_dtype,
            "bytes_per_token": kv.bytes_per_token,
            "bytes_per_sequence": kv.bytes_per_sequence,
            "bytes": kv.bytes,
            "compare": kv.compare,
            "compare_kv_heads": kv.compare_kv_heads,
            "by_dtype": kv.by_dtype,
            **({"naive_bytes_per_token": naive_mla_bytes_per_token(cfg, kv_dtype)} if cfg.is_mla else {}),
            **({"state_bytes": kv.state_bytes} if cfg.has_linear_attention else {}),
            "max_context_by_gpu": {
                name: max_context_that_fits(cfg, gpu, batch, weights, kv_dtype) for name, gpu in GPUS.items()
            },
            "note": kv.note,
        },
        "attention_memory": attention.to_dict(),
        "memory": {
            "weights_bytes": stored.total,
            "weights": {key: value for key, value in stored.to_dict().items() if key != "by_tensor"},
            "inference": {"components": inference.components, "total_bytes": inference.total_bytes},
            "training": {
                "dtype": compute,
                "mixed_precision": compute != "fp32",
                "components": training.components,
                "total_bytes": training.total_bytes,
            },
        },
        "notes": notes,
    }


def _table(title: str, rows: list[tuple[str, str, str]]) -> list[str]:
    width = max(len(r[0]) for r in rows)
    mid = max(len(r[1]) for r in rows)
    lines = [title, "-" * len(title)]
    lines += [f"  {name:<{width}}  {exact:>{mid}}  {readable}" for name, exact, readable in rows]
    return lines + [""]


def format_analysis(result: dict) -> str:
    """A readable plain-text report of an ``analyze`` result (the CLI's default output)."""
    inputs, params, flops, kv = result["inputs"], result["params"], result["flops"], result["kv_cache"]
    total = params["total"]
    lines = [
        f"LLaMA Lab analysis - seq_len {inputs['seq_len']}, batch {inputs['batch']}, "
        f"dtype {inputs['dtype']}, {inputs['attention_kind']}",
        "",
    ]
    rows = [
        (name, f"{count:,}", f"{human_params(count):>10}  {100 * count / total:5.1f}%")
        for name, count in params["by_component"].items()
    ]
    rows += [
        (name, f"{params[key]:,}", f"{human_params(params[key]):>10}")
        for name, key in (
            ("total", "total"),
            ("active per token", "active"),
            ("non-embedding", "non_embedding"),
            ("per layer", "per_layer"),
        )
    ]
    lines += _table("Parameters", rows)
    forward = flops["forward"]
    rows = [
        (name, f"{value:,}", f"{human_count(value, 'FLOP'):>14}  {100 * value / forward:5.1f}%")
        for name, value in flops["by_component"].items()
    ]
    summary = (
        ("forward", flops["forward"]),
        ("  causal scores only", flops["forward_causal"]),
        ("per token", flops["per_token"]),
        ("training step (3x)", flops["training_step"]),
        ("training / token", flops["training_per_token"]),
        ("PaLM 6N+12LHQT / token", flops["palm_training_per_token"]),
        ("element-wise (not in fwd)", flops["elementwise"]["total"]),
    )
    rows += [(name, f"{value:,.0f}", f"{human_count(value, 'FLOP'):>14}") for name, value in summary]
    lines += _table("FLOPs (2 per multiply-add; scores over the full T x T)", rows)
    rows = [
        ("bytes / token", f"{kv['bytes_per_token']:,}", human_bytes(kv["bytes_per_token"])),
        ("bytes / sequence", f"{kv['bytes_per_sequence']:,}", human_bytes(kv["bytes_per_sequence"])),
        ("bytes (B x T)", f"{kv['bytes']:,}", human_bytes(kv["bytes"])),
    ]
    if "naive_bytes_per_token" in kv:  # MLA: the per-head K/V it does not cache
        naive = kv["naive_bytes_per_token"]
        rows.append(("naive per-head K/V / token", f"{naive:,}", human_bytes(naive)))
    rows += [
        (
            f"{kind.upper()} (n_kv_heads={kv['compare_kv_heads'][kind]}) / token",
            f"{value:,}",
            human_bytes(value),
        )
        for kind, value in kv["compare"].items()
    ]
    lines += _table(f"KV cache ({kv['dtype']})", rows)
    memory = result["memory"]
    rows = [
        (f"inference: {name}", f"{value:,}", human_bytes(value))
        for name, value in memory["inference"]["components"].items()
    ]
    rows.append(
        (
            "inference total",
            f"{memory['inference']['total_bytes']:,}",
            human_bytes(memory["inference"]["total_bytes"]),
        )
    )
    rows += [
        (f"training: {name}", f"{value:,}", human_bytes(value))
        for name, value in memory["training"]["components"].items()
    ]
    rows.append(
        (
            "training total (1 GPU)",
            f"{memory['training']['total_bytes']:,}",
            human_bytes(memory["training"]["total_bytes"]),
        )
    )
    lines += _table("Memory", rows)
    lines += [f"note: {note}" for note in result.get("notes", [])]
    return "\n".join(lines).rstrip() + "\n"
