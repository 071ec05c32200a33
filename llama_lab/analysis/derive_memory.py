"""The derivations of what a model holds in memory, written out as ``derive.Derivation``s: a KV
head's bytes at a format, the KV cache per token and at B×T (MLA's latent, windows, Gated
DeltaNet's state), the weights at their stored format, the longest context a GPU holds, what
attention keeps for backward and its HBM traffic, a training step's memory."""

from __future__ import annotations

from dataclasses import replace

from ..config import ModelConfig
from ..runtime.hardware import CUDA_CONTEXT_BYTES, DTYPE_BYTES
from .common import STATS_BYTES, checked_gpu
from .derive import MLA_SYMBOLS, Derivation
from .flash import attention_memory, attention_sublayers
from .kv import (
    cross_attention_bytes_per_token,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    layer_token_bytes,
    linear_state_bytes,
    max_context_that_fits,
    state_bytes,
    weight_bytes,
)
from .memory import training_memory
from .params import count_params
from .quant import BITS, as_weight_quant, group_label, kv_head_bytes, kv_scale_bytes, weights_bytes
from .shapes import Shapes


def head_bytes(kv_dtype: str, width: int, term: str, symbol: str = "D") -> Derivation:
    """One token's vector of ``width`` elements in the KV cache at ``kv_dtype`` (a K or V head,
    MLA's latent or its RoPE key): elements × bytes each (int4 packs two per byte), plus the
    fp16 scale int8 and int4 keep per token and vector; ``term`` names it in the derivation it
    belongs to, ``symbol`` names its width."""
    scale = kv_scale_bytes(kv_dtype)  # checks the name first
    bits = BITS[kv_dtype]
    terms: dict[str, float] = {symbol: width}
    if width * bits % 8:  # an odd width at 4 bits: the last byte half full
        expression, terms["n_bits"] = f"ceil_div({symbol}*n_bits, 8)", bits
    else:
        expression, terms["b"] = f"{symbol}*b", bits // 8 if bits % 8 == 0 else bits / 8
    if scale:
        expression, terms["s"] = expression + " + s", scale
    return Derivation(
        f"Bytes of a {width}-wide vector per token ({kv_dtype})",
        "",
        expression,
        terms,
        kv_head_bytes(kv_dtype, width),
        "elements × bytes per element" + (" + the fp16 scale of the row" if scale else ""),
        meaning={"b": f"bytes per element at {kv_dtype}", "s": "its fp16 scale", "n_bits": "bits each"},
        term=term,
    )


def kv_bytes_per_token(cfg: ModelConfig, kv_dtype: str) -> Derivation:
    s = Shapes.of(cfg)
    if cfg.is_mla:
        scale = " + an fp16 scale each" if kv_scale_bytes(kv_dtype) else ""
        latent = head_bytes(kv_dtype, s.Rkv, "b_latent", "R_kv")
        rope = head_bytes(kv_dtype, s.Dr, "b_rope", "D_r")
        parts = [replace(latent, symbols=MLA_SYMBOLS), replace(rope, symbols=MLA_SYMBOLS)]
        formula, expression = r"L \cdot (b_\text{latent} + b_\text{rope})", "L*(b_latent + b_rope)"
        meaning = {
            "b_latent": f"bytes of the latent (kv_lora_rank = {s.Rkv}) at {kv_dtype}",
            "b_rope": f"bytes of the shared RoPE key (qk_rope_head_dim = {s.Dr}) at {kv_dtype}",
        }
        if cfg.has_indexer:  # DSA: the indexer's key of each token beside the latent
            parts.append(head_bytes(kv_dtype, s.Di, "b_index", "D_i"))
            formula = r"L \cdot (b_\text{latent} + b_\text{rope} + b_\text{index})"
            expression = "L*(b_latent + b_rope + b_index)"
            meaning["b_index"] = f"bytes of the DSA indexer's key (index_head_dim = {s.Di}) at {kv_dtype}"
        return Derivation(
            f"KV cache per token ({kv_dtype})",
            formula,
            expression,
            {"L": s.L, **{part.term: part.value for part in parts}},
            kv_cache_bytes_per_token(cfg, kv_dtype),
            "what MLA caches (as transformers 5 and serving engines store it): each block's latent "
            "and its one RoPE key, shared by every head"
            + (", and DSA's indexer key (transformers' DynamicIndexedLayer)" if cfg.has_indexer else ""),
            f"b_latent = kv_lora_rank · bytes per element, b_rope = qk_rope_head_dim · bytes per "
            f"element{scale} ({kv_dtype})",
            meaning=meaning,
            lhs=r"\text{KV bytes/token}",
            where=tuple(parts),
        )
    if not cfg.causal:  # BERT: the whole input in one pass, nothing decoded, nothing cached
        return Derivation(
            f"KV cache per token ({kv_dtype})",
            r"0 \cdot L",
            "0*L",
            {"L": s.L},
            kv_cache_bytes_per_token(cfg, kv_dtype),
            "a bidirectional encoder caches nothing: it reads its whole input in one forward pass",
            "no token is generated one at a time, so no K and V are kept between passes",
            lhs=r"\text{KV bytes/token}",
        )
    head = head_bytes(kv_dtype, s.D, "b_head")
    # Gated DeltaNet blocks cache no K, V: only the attention blocks count
    layers = "L_attn" if cfg.has_linear_attention else "L"
    return Derivation(
        f"KV cache per token ({kv_dtype})",
        r"2\,(K, V) \cdot L \cdot G \cdot b_\text{head}",
        f"2*{layers}*G*b_head",
        {layers: cfg.full_attention_layers, "G": s.G, "b_head": head.value},
        kv_cache_bytes_per_token(cfg, kv_dtype),
        "what a decoder caches: each block's K and V of every KV head",
        f"b_head = D · bytes per element{' + an fp16 scale' if kv_scale_bytes(kv_dtype) else ''} "
        f"({kv_dtype}); GQA/MQA cut G",
        meaning={
            "b_head": f"bytes of one KV head's vector at {kv_dtype} (D = {s.D})",
            "L_attn": f"attention blocks ({sum(cfg.linear_layer_flags)} Gated DeltaNet blocks cache no K, V)",
        },
        lhs=r"\text{KV bytes/token}",
        where=(head,),
    )


def linear_state(cfg: ModelConfig, kv_dtype: str) -> Derivation:
    """One sequence's fixed state in every Gated DeltaNet block (``kv.state_bytes``)."""
    parts = linear_state_bytes(cfg, kv_dtype)
    terms = {
        "L_lin": sum(cfg.linear_layer_flags),
        "C_conv": cfg.linear_conv_dim,
        "K_c": cfg.linear_conv_kernel,
        "b_a": parts["conv"] // (cfg.linear_conv_dim * cfg.linear_conv_kernel),
        "H_v": cfg.linear_v_heads,
        "d_k": cfg.linear_k_head_dim,
        "d_v": cfg.linear_v_head_dim,
    }
    return Derivation(
        "Gated DeltaNet state per sequence",
        r"L_\text{lin}\,(C_\text{conv} K_c\, b_a + 4\,H_v d_k d_v)",
        "L_lin*(C_conv*K_c*b_a + 4*H_v*d_k*d_v)",
        terms,
        state_bytes(cfg, kv_dtype),
        "transformers' cache tensors: the convolution's last K_c inputs and the delta rule's "
        "float32 state per value head",
        "the same at any context length",
        meaning={
            "L_lin": "Gated DeltaNet blocks",
            "C_conv": "the convolution's channels",
            "K_c": "the convolution's kernel",
            "b_a": "bytes per activation element",
            "H_v": "value heads",
            "d_k": "key head width",
            "d_v": "value head width",
        },
        term="S",
    )


def kv_cache(cfg: ModelConfig, seq_len: int, batch: int, kv_dtype: str) -> Derivation:
    """The cache of B sequences of T tokens: every attention block T tokens per sequence (a
    sliding-window block at most W), every Gated DeltaNet block its fixed state."""
    per = kv_bytes_per_token(cfg, kv_dtype)
    local = sum(cfg.local_layer_flags)
    terms: dict[str, float] = {"b_tok": per.value, "B": batch, "T": seq_len}
    expression, formula = "b_tok*B*T", r"b_\text{tok}\,B\,T"
    where = [replace(per, term="b_tok")]
    meaning = {"b_tok": "KV bytes per token, every attention block"}
    kept = cfg.local_cache_tokens if local else None  # W, or what a sparse pattern keeps
    if kept and seq_len > kept:  # past W a window block stops growing
        layers = cfg.full_attention_layers
        block = Derivation(
            "KV bytes per token and block",
            "",
            "b_tok/L_attn",
            {"b_tok": per.value, "L_attn": layers},
            layer_token_bytes(cfg, kv_dtype),
            "every attention block caches alike",
            where=(where[0],),
            term="b_block",
            symbols={"b_tok": r"\text{bytes/token}"},
        )
        terms = {"B": batch, "b_block": block.value, "L_w": local, "W": kept}
        terms.update(L_attn=layers, T=seq_len)
        expression = "B*b_block*(L_w*W + (L_attn - L_w)*T)"
        formula = r"B\,b_\text{block}\,\big(L_w W + (L - L_w)\,T\big)"
        where = [block]
        meaning.update(L_w="blocks with a sliding window", L_attn="attention blocks")
        if cfg.sparse_pattern is not None:  # what the pattern keeps: G + (W − 1)·d + 1
            meaning.update(W="tokens a windowed block keeps: the first G and the dilated window's span")
    if cfg.is_encoder_decoder:  # every decoder block's cross-attention K and V of a source of T
        terms["b_src"] = cross_attention_bytes_per_token(cfg, kv_dtype)
        formula, expression = formula + r" + b_\text{src}\,B\,S", expression + " + b_src*B*T"
        meaning.update(b_src="cross-attention K and V bytes per source token (source S = T), fixed")
    if cfg.has_linear_attention:  # their fixed state, whatever T
        state = linear_state(cfg, kv_dtype)
        terms["S"] = state.value
        formula, expression = formula + r" + B\,S", expression + " + B*S"
        where.append(state)
        meaning.update(S="one sequence's state in every Gated DeltaNet block")
    return Derivation(
        f"KV cache at B×T ({kv_dtype})",
        formula,
        expression,
        terms,
        kv_cache_bytes(cfg, seq_len, batch, kv_dtype),
        "bytes per token × tokens held"
        + (
            " + the Gated DeltaNet blocks' states (transformers' cache tensors)"
            if cfg.has_linear_attention
            else ""
        ),
        "a sliding-window block holds at most W tokens",
        meaning=meaning,
        lhs=r"\text{cache}",
        where=tuple(where),
        symbols={"b_tok": r"\text{bytes/token}"},
    )


def weights_stored(cfg: ModelConfig, weights) -> Derivation:
    stored = weights_bytes(cfg, weights)
    quant = as_weight_quant(weights)
    # scales: with their zero points and a checkpoint layout's per-module extras (GPTQ's g_idx)
    terms = {
        "data": stored.quantised,
        "scales": stored.scales + stored.zero_points + stored.other,
        "kept": stored.kept,
    }
    unconverted = ", unconverted modules too" if quant.unconverted else ""
    extras = " + zero points" if quant.zero_point else ""
    extras += r" + g\_idx, quant state" if stored.other else ""  # GPTQ's
    return Derivation(
        f"Weights at {quant.dtype}",
        r"\text{data} + \text{scales} + \text{kept}",
        "data + scales + kept",
        terms,
        weight_bytes(cfg, weights),
        "equal to the bytes of real quantised tensors (llama_lab.model.quant)",
        f"{quant.dtype}: group size {quant.group_size}, {quant.scale_dtype} scales; "
        f"kept in bf16: {', '.join(quant.keep) if quant.quantised else 'everything'}",
        lhs=r"\text{bytes}",
        labels={  # what each number is, under it
            "data": rf"\text{{{quant.dtype} data}}",
            "scales": rf"\text{{{quant.scale_dtype} scales{extras}, {group_label(quant.group_size)}}}",
            "kept": rf"\text{{kept in {quant.keep_dtype}{unconverted}}}",
        },
    )


def longest_context(cfg: ModelConfig, gpu, batch: int, weights, kv_dtype: str) -> Derivation:
    g = checked_gpu(gpu)
    terms = {
        "M": g.usable_bytes,
        "W_bytes": weight_bytes(cfg, weights),
        "B": batch,
        # an encoder-decoder's token: its self-attention K and V and a source token's
        # cross-attention K and V (a source as long as the context)
        "b_tok": kv_cache_bytes_per_token(cfg, kv_dtype) + cross_attention_bytes_per_token(cfg, kv_dtype),
    }
    value = max_context_that_fits(cfg, g, batch, weights, kv_dtype)
    formula = r"\left\lfloor \frac{M - W_\text{bytes}}{B\,b_\text{tok}} \right\rfloor"
    expression, note = (
        "max(0, (M - W_bytes)//(B*b_tok))",
        ("weights + KV cache ≤ GPU memory; decoding's activations are small and not reserved"),
    )
    if cfg.has_linear_attention:  # every sequence's Gated DeltaNet state first
        terms["S"] = state_bytes(cfg, kv_dtype)
        formula = r"\left\lfloor \frac{M - W_\text{bytes} - B\,S}{B\,b_\text{tok}} \right\rfloor"
        expression = "max(0, (M - W_bytes - B*S)//(B*b_tok))"
        note += "; S: one sequence's fixed Gated DeltaNet state"
    local = sum(cfg.local_layer_flags)
    kept = cfg.local_cache_tokens if local else None  # W, or what a sparse pattern keeps
    free = terms["M"] - terms["W_bytes"]
    if (
        kept and free >= kv_cache_bytes(cfg, kept, batch, kv_dtype) and local < cfg.n_layers
    ):  # past W only the global blocks grow
        terms.update(
            W=kept,
            C_W=kv_cache_bytes(cfg, kept, batch, kv_dtype),
            b_glob=layer_token_bytes(cfg, kv_dtype) * (cfg.full_attention_layers - local),
        )
        formula = (
            r"W + \left\lfloor \frac{M - W_\text{bytes} - C_W}{B\,b_\text{glob}}"
            r"\right\rfloor"
        )
        expression = "W + (M - W_bytes - C_W)//(B*b_glob)"
        note = (
            "sliding-window blocks stop growing at W tokens (C_W: the cache at W); past it "
            "only the other blocks grow, b_glob per token"
        )
    elif kept and local == cfg.n_layers and free >= kv_cache_bytes(cfg, kept, batch, kv_dtype):
        terms["T_max"] = value
        expression, note = "T_max", "every block holds at most W tokens: the cache stops growing"
    elif not terms["b_tok"] and value:  # a bidirectional encoder (BERT): no cache to grow
        terms["T_max"] = value
        expression, note = "T_max", "nothing is cached per token: no length is bounded by a cache"
    note += (
        f"; M: {g.name}'s memory as the device reports it ({g.memory_bytes:,} bytes) less the CUDA "
        f"context ({CUDA_CONTEXT_BYTES:,} bytes)"
    )
    source = f"{g.source}; memory: {g.memory_source}"
    return Derivation(f"Longest context on {g.name}", formula, expression, terms, value, source, note)


def attention_kept(
    cfg: ModelConfig, seq_len: int, batch: int, dtype: str, path: str, per_block: bool = False
) -> Derivation:
    """What attention keeps for backward in one forward, every attending block (``per_block``:
    one): ``path`` naive or flash (``flash.naive_layer_bytes``, ``flash_layer_bytes``)."""
    s = Shapes.of(cfg)
    r = attention_memory(cfg, seq_len, batch, dtype)  # checks the dtype
    b = int(DTYPE_BYTES[dtype])
    # Gated DeltaNet blocks keep no scores; MLA's value heads are D_v wide
    # an encoder-decoder: its encoder's and cross-attentions too (``flash.attention_sublayers``)
    layers = "L_attn" if cfg.has_linear_attention or cfg.is_encoder_decoder else "L"
    terms: dict[str, float] = {
        layers: attention_sublayers(cfg),
        "B": batch,
        "H": s.H,
        "T": seq_len,
        "D": s.D,
    }
    qkv, heads = ("3*T*D", "D*(2*H + 2*G)") if s.Dv == s.D else ("T*(2*D + D_v)", "(H + G)*(D + D_v)")
    if s.Dv != s.D:
        terms["D_v"] = s.Dv
    terms["b"] = b
    meaning = {
        "D_v": "a value head's width (MLA)",
        "L_attn": "attention blocks",
        "b": f"bytes each ({dtype})",
    }
    block = "" if per_block else f"{layers}*"
    if path == "naive":
        return Derivation(
            "Kept for backward, naive" + (" (one block)" if per_block else ""),
            r"L\,\big(b\,B H (3 T D + T^2) + T^2\big)",
            f"{block}(b*B*H*({qkv} + T*T) + T*T)",
            terms,
            r.naive_layer_bytes if per_block else r.naive_bytes,
            "saved-tensor hooks on reference_attention agree (test_flash)",
            "Q, K, V at H heads and the T×T probabilities at b bytes, plus the bool mask",
            meaning,
            lhs=r"\text{naive/block}" if per_block else r"\text{naive}",
        )
    terms.update(G=s.G, s_stat=STATS_BYTES)
    return Derivation(
        "Kept for backward, fused" + (" (one block)" if per_block else ""),
        r"L\,\big(b\,B T D\,(2H + 2G) + s\,B H T\big)",
        f"{block}(b*B*T*{heads} + s_stat*B*H*T)",
        terms,
        r.flash_layer_bytes if per_block else r.flash_bytes,
        "Dao et al. 2022: the output and the log-sum-exp; saved-tensor hooks on "
        "scaled_dot_product_attention agree (test_flash)",
        "Q, O at H heads, K, V at G, and one fp32 statistic per query and head",
        {**meaning, "s_stat": "bytes of the log-sum-exp per query and head"},
        lhs=r"\text{fused/block}" if per_block else r"\text{fused}",
    )


def hbm_ratio(cfg: ModelConfig, seq_len: int, batch: int, dtype: str, gpu) -> Derivation:
    """Dao et al. 2022, Theorem 2: one head's HBM accesses, standard over FlashAttention."""
    r = attention_memory(cfg, seq_len, batch, dtype, gpu)
    terms = {"N": seq_len, "d": cfg.head_dim, "B_c": r.block_cols}
    return Derivation(
        "HBM traffic, naive ÷ fused",
        r"\frac{4 N d + 4 N^2}{2 N d + \lceil N / B_c \rceil\,(3 N d + 4 N)}",
        "(4*N*d + 4*N*N)/(2*N*d + ceil_div(N, B_c)*(3*N*d + 4*N))",
        terms,
        r.naive_hbm_bytes / r.flash_hbm_bytes,
        f"Dao et al. 2022, Algorithm 1 and Theorem 2, with {r.gpu}'s {r.sram_bytes:,} bytes of "
        f"shared memory per SM",
        f"elements read and written in one forward; B_c = ⌈M / 4d⌉ "
        f"columns per block (M: the shared memory in elements of {dtype})",
        {"N": "sequence length", "d": "head_dim", "B_c": "key/value block size"},
    )


def training_bytes(cfg: ModelConfig, seq_len: int, batch: int, dtype: str) -> Derivation:
    """One GPU's training memory with AdamW, unsharded (``memory.training_memory``): weights and
    gradients at b bytes, the two moments, the fp32 master copy under mixed precision, and
    the activations."""
    m = training_memory(cfg, seq_len, batch, dtype)
    c = m.components
    P = count_params(cfg).total
    terms: dict[str, float] = {"b": c["weights"] // P, "Psi": P, "m": c["optimizer_moments"] // (2 * P)}
    expression = "b*Psi + b*Psi + 2*m*Psi"
    if c["master_weights"]:
        terms["w"] = c["master_weights"] // P
        expression += " + w*Psi"
    terms["A"] = c["activations"]
    return Derivation(
        "Training memory (one GPU, AdamW)",
        r"\underbrace{2\Psi + 2\Psi + 12\Psi}_{\text{mixed-precision AdamW (ZeRO)}} + A",
        expression + " + A",
        terms,
        m.total_bytes,
        "Rajbhandari et al. 2020 (ZeRO), §3: 2Ψ + 2Ψ + 12Ψ under mixed precision",
        "weights and gradients at the compute dtype; AdamW's m and v (and the master copy) in fp32 "
        "under mixed precision; activations as autograd saves them",
        {
            "Psi": "parameters",
            "b": f"bytes per weight and gradient ({dtype})",
            "m": "bytes per moment",
            "w": "bytes per master weight (fp32)",
            "A": f"activations at B={batch}, T={seq_len:,}"
            + (
                " (the encoder over a source of T tokens, the decoder with its cross-attention, the loss)"
                if cfg.is_encoder_decoder
                else " (the encoder and its pooler; no task head or loss)"
                if not cfg.lm_head
                else ""
            ),
        },
        lhs=r"\text{training bytes}",
    )
