"""The KV cache & attention page's sections: the cache's formulas with the model's numbers, how
query heads share KV heads, the GPU (mirrored in the URL), MHA vs GQA vs MQA on it, the cache
against the context on one GPU, MLA's latent and a hybrid's linear-attention state, and the decode
roofline; a DSA model's decode cost against the context. The page draws the Many GPUs page's
serving section (``sections.parallel``) between them."""

from __future__ import annotations

import streamlit as st

from ...analysis import DEFAULT_GPU, attention_variants, derive, derive_memory
from ...analysis.kv import (
    ENCODER_CACHE_NOTE,
    cross_attention_bytes_per_token,
    hybrid_cache_frame,
    hybrid_crossover,
    kv_cache_bytes_per_token,
    linear_state_bytes,
    sparse_cache_note,
)
from ...config import ModelConfig
from ...figures.kv import (
    decode_cost_figure,
    kv_context_lengths,
    kv_dtype_frame,
    kv_memory_vs_context,
    kv_sharing_diagram,
)
from ...figures.rooflines import ROOFLINE_BATCHES, decode_throughput, roofline_figure
from ...figures.sparse import PATTERN_T, mask_heatmap, pattern_title
from ...runtime.hardware import GPUS
from ...units import human_bytes, plural
from ...validation.intervals import INTERVAL_LEVEL
from ..cached import (
    decode_costs,
    image_cost,
    kv_fit,
    kv_memory_curve,
    kv_report,
    mask_codes,
    mla_forms,
    roofline_points,
    show_table,
)
from ..context import context_text
from ..derivations import derived_metric, show_equation
from ..state import Selection
from ..widgets import bound_note, choice_link, keep_choice, link_widgets


def _contexts(seq_len: int) -> list[int]:
    """The roofline's context lengths: powers of two from 128 to 131,072, and the sidebar's T."""
    return sorted({2**k for k in range(7, 18)} | {seq_len})


def stop_for_an_encoder(cfg: ModelConfig) -> None:
    """A bidirectional encoder (BERT) keeps no KV cache: say so, and draw nothing more."""
    if not cfg.causal:
        st.info(ENCODER_CACHE_NOTE)
        st.stop()


def formulas(cfg: ModelConfig, seq_len: int, batch: int, kv_dtype: str) -> None:
    """Bytes per token and the cache at B×T, written out with the model's numbers (their
    derivations: MLA's latent, the attention blocks of a hybrid, windows, the formats' scales)."""
    T, B = seq_len, batch
    kv = kv_report(cfg, T, B, kv_dtype)
    local = sum(cfg.local_layer_flags)
    show_equation((r"\text{bytes/token}", derive_memory.kv_bytes_per_token(cfg, kv_dtype)))
    cache = derive_memory.kv_cache(cfg, T, B, kv_dtype)
    show_equation((r"\text{cache}", cache, human_bytes(cache.value)), omit=("b_tok",))
    st.caption(
        f"Cache at B×T: {kv.bytes:,} bytes"
        + (
            f" — {plural(local, 'sliding-window layer')} {'holds' if local == 1 else 'hold'} at most "
            f"{cfg.sliding_window:,} tokens each, so the cache grows more slowly past W "
            f"(the curve below bends there)."
            if any(cfg.local_layer_flags)
            else "."
        )
    )


def image_cache(cfg: ModelConfig, kv_dtype: str) -> None:
    """A multimodal model: the cache one image takes (its tokens at this KV format)."""
    if cfg.vision is None:
        return
    cost = image_cost(cfg, kv_dtype)
    st.info(
        f"An image costs {cost['image_tokens']:,} tokens of cache "
        f"({human_bytes(cost['kv_cache_bytes_per_image'])} at {kv_dtype}; "
        f"{cost['kv_cache_bytes_per_image']:,} bytes): every image's tokens join the text in the "
        f"decoder's sequence. The splits over several GPUs below model the text decoder only."
    )


def sharing(cfg: ModelConfig) -> None:
    """Which query heads read which KV head (MLA: every head reads the one cached latent)."""
    st.plotly_chart(kv_sharing_diagram(cfg.n_heads, 1 if cfg.is_mla else cfg.n_kv_heads))
    if cfg.is_mla:
        st.caption(
            f"MLA: every one of the {cfg.n_heads} heads reads the one latent a token caches, as "
            f"MQA's heads read one KV head — but each head rebuilds its own K and V from it "
            f"(kv_b_proj), so the heads still attend differently."
        )


def mla_section(selection: Selection, gpu_name: str) -> None:
    """An MLA model's cache and its three ways to decode (``figures.kv.mla_forms_frame``) at
    the sidebar's B and T on ``gpu_name``."""
    cfg, T, B = selection.cfg, selection.seq_len, selection.batch
    weights, kv_dtype, dtype = selection.weight_format, selection.kv_format, selection.dtype
    gpu = GPUS[gpu_name]
    st.subheader(f"MLA: the latent cache and three ways to decode (B={B}, S={T:,}, {gpu.name})")
    H, R, Dr, D, Dv = cfg.n_heads, cfg.kv_lora_rank, cfg.qk_rope_head_dim, cfg.head_dim, cfg.v_head_dim
    st.markdown(
        f"Each token caches c = kv_a_layernorm(x·W_DKV), {R} values, and one RoPE key of {Dr} "
        f"shared by the {H} heads. Head h's key is [c·W_UK,h, k_rope] ({D} wide) and its value "
        f"c·W_UV,h ({Dv}). Decoding can keep those per-head K and V instead (**naive**), rebuild "
        f"them from every cached latent at each step (**rebuilt**), or never form them: "
        f"q_h·k_hᵀ = (q_h,nope·W_UK,hᵀ)·cᵀ + q_h,rope·k_ropeᵀ, so W_UK folds into the query and "
        f"W_UV into the output, and the heads attend over the latent as MQA's heads attend one "
        f"KV head (**absorbed**, DeepSeek-V2 §2.1.2)."
    )
    show_equation(
        (r"\text{naive, rebuilt}:", derive.mla_score_flops(cfg, absorbed=False)),
        (r"\text{absorbed}:", derive.mla_score_flops(cfg, absorbed=True)),
        lead=r"\text{scores per key and head}:\quad ",
    )
    show_table(mla_forms(cfg, gpu, B, T, dtype, weights, kv_dtype), width="stretch")
    st.caption(
        "Per decode step of B tokens at context S: FLOPs of every matmul (rebuilt adds kv_b_proj "
        "over the S cached latents of every layer), bytes moved (the weights read once, the cache "
        "read and the new token's entry written; rebuilt also writes and reads every head's K and "
        "V), and the roofline bound on the data sheet. Fits: weights + that cache ≤ GPU memory."
    )


def pattern_section(cfg: ModelConfig) -> None:
    """Which keys a windowed block's queries see (the mask the model runs), coloured by why, and
    what its cache keeps."""
    st.subheader("The attention pattern: which keys each query sees")
    st.plotly_chart(mask_heatmap(mask_codes(cfg, PATTERN_T), pattern_title(cfg, PATTERN_T)))
    kept = cfg.local_cache_tokens
    keeps = (
        "every token (a random block may be any earlier one)"
        if kept is None
        else f"at most {kept:,} tokens" + (" (its window)" if cfg.sparse_pattern is None else "")
    )
    st.caption(
        f"The mask of the windowed blocks (sliding_window W = {cfg.sliding_window:,}; "
        f"global_tokens, dilation and random_blocks shape it — `--set global_tokens=4` on the "
        f"command line), drawn over the first {PATTERN_T} positions from the mask the live model "
        f"runs. A windowed block's cache keeps {keeps}: what a later query can still see."
        + (" " + sparse_cache_note(cfg) if cfg.sparse_pattern is not None else "")
    )


def sparse_attention_section(selection: Selection) -> None:
    """DeepSeek Sparse Attention: a decoded token's score FLOPs and cache reads against the
    context (``analysis.rooflines.decode_cost_frame``), beside MLA over every key and GQA."""
    cfg, T, kv_dtype = selection.cfg, selection.seq_len, selection.kv_format
    K, Hi, Di = cfg.index_topk, cfg.index_n_heads, cfg.index_head_dim
    st.subheader(f"DeepSeek Sparse Attention: a decoded token attends at most {K:,} keys")
    st.markdown(
        f"A lightning indexer ({Hi} heads of {Di}) scores every earlier key — Σ_h w_h · relu(q_h · k) — "
        f"and the token attends only its {K:,} best. Past S = {K:,} its attention (and the latents it "
        f"reads) stops growing; the indexer's scores, {Hi}·({Di} + 1) multiply-adds per key, and its "
        f"keys ({Di} values per token and layer) still grow with S, far more slowly than attention "
        f"over every key."
    )
    contexts = tuple(sorted({2**k for k in range(8, 18)} | {K, T}))
    frame = decode_costs(cfg, contexts, kv_dtype)
    st.plotly_chart(decode_cost_figure(frame, K))
    at = frame[frame.context_len == max(contexts)].set_index("attention")
    st.caption(
        f"One sequence, cache at {kv_dtype}; MLA over every key is the same model without its indexer "
        f"(DeepSeek-V3's attention), GQA the plain-attention variant of the other columns above. At "
        f"S = {max(contexts):,}: DSA {at.score_flops['dsa']:,} score FLOPs "
        f"(the indexer {at.indexer_flops['dsa']:,}) and {at.cache_bytes_read['dsa']:,} bytes read, "
        f"MLA {at.score_flops['mla']:,} and {at.cache_bytes_read['mla']:,}. The decode roofline "
        f"below reads the chosen latents and every indexer key."
    )


def linear_attention_section(selection: Selection) -> None:
    """A hybrid model's Gated DeltaNet state beside its attention blocks' cache, against the
    same model with attention in every block, at the sidebar's B."""
    cfg, B, kv_dtype = selection.cfg, selection.batch, selection.kv_format
    n_linear = sum(cfg.linear_layer_flags)
    per_block = linear_state_bytes(cfg, kv_dtype)
    holds = "holds" if n_linear == 1 else "hold"
    st.subheader(f"Linear attention: {plural(n_linear, 'Gated DeltaNet block')} {holds} a state, not a cache")
    st.markdown(
        f"A Gated DeltaNet block keeps, per sequence, its convolution's last {cfg.linear_conv_kernel} "
        f"inputs ({per_block['conv']:,} bytes) and the delta rule's state, "
        f"{plural(cfg.linear_v_heads, 'value head')} of {cfg.linear_k_head_dim}×{cfg.linear_v_head_dim} "
        f"in float32 "
        f"({per_block['recurrent']:,} bytes), at any context length — as transformers' cache holds "
        f"them (the convolution needs only {cfg.linear_conv_kernel - 1} between steps; FLA and vLLM "
        f"keep that many). Only the {plural(cfg.full_attention_layers, 'attention block')} "
        f"{'grows' if cfg.full_attention_layers == 1 else 'grow'}, "
        f"{kv_cache_bytes_per_token(cfg, kv_dtype):,} bytes per token."
    )
    crossover = hybrid_crossover(cfg, kv_dtype)
    contexts = sorted({1, 256, 4096, 32768, cfg.max_seq_len, crossover})
    show_table(hybrid_cache_frame(cfg, tuple(contexts), B, kv_dtype), width="stretch")
    st.caption(
        f"B = {B}, KV at {kv_dtype}. 'all blocks attention': the same model with every block "
        f"attending with {plural(cfg.n_kv_heads, 'KV head')} of {cfg.head_dim}. The hybrid's cache is "
        f"smaller from T = {crossover:,} on (its fixed state outweighs the K and V it saves below that)."
    )


def encoder_decoder_section(selection: Selection) -> None:
    """What an encoder-decoder caches: the decoder's self-attention K and V, growing with the
    generated tokens, and its cross-attention K and V of the source, fixed; the encoder nothing."""
    cfg, T, B, kv_dtype = selection.cfg, selection.seq_len, selection.batch, selection.kv_format
    grows = kv_cache_bytes_per_token(cfg, kv_dtype)
    fixed = cross_attention_bytes_per_token(cfg, kv_dtype)
    st.subheader("Encoder-decoder: what is cached")
    left, middle, right = st.columns(3)
    left.metric("Self-attention, per generated token", human_bytes(grows))
    middle.metric("Cross-attention, per source token (fixed)", human_bytes(fixed))
    right.metric(f"Both, B={B}, T = S = {T:,}", human_bytes(B * T * (grows + fixed)))
    st.markdown(
        f"Each of the {plural(cfg.n_layers, 'decoder block')} caches the K and V of its **self-attention** "
        f"over the target — one row per generated token, {grows:,} bytes per token at {kv_dtype} — and the "
        f"K and V of its **cross-attention** over the encoder's output, {fixed:,} bytes per source token, "
        f"computed once when the source is encoded and fixed however long the target grows. The "
        f"**encoder caches nothing**: it runs once over the whole source, bidirectionally. The counts "
        f"above take a source as long as the target (S = T)."
    )


def gpu_choice(seq_len: int, prefix: str) -> str:
    """The GPU (and the roofline's context length) mirrored in the URL as kv.gpu and
    kv.context; the GPU's selectbox and its data sheet. Gives the GPU's name."""
    link_widgets(
        "kv",
        prefix,
        [choice_link("gpu", list(GPUS), DEFAULT_GPU), choice_link("context", _contexts(seq_len), seq_len)],
    )
    gpu_name = st.selectbox(
        "GPU", list(GPUS), key=prefix + "gpu", help="Data-sheet memory, dense peak FLOP/s and HBM bandwidth."
    )
    st.caption(GPUS[gpu_name].source)
    return gpu_name


def fit_section(selection: Selection, gpu_name: str, prefix: str) -> None:
    """MHA, GQA and MQA of the sidebar's model on ``gpu_name``: bytes per token, the cache,
    the longest context and the largest batch that fit; then the cache's dtype axis."""
    cfg, T, B = selection.cfg, selection.seq_len, selection.batch
    weights, kv_dtype = selection.weight_format, selection.kv_format
    gpu = GPUS[gpu_name]
    fit = kv_fit(cfg, gpu, T, B, weights, kv_dtype)
    variants = list(attention_variants(cfg, distinct=True).values())  # the rows' configs
    cols = st.columns(len(fit))
    for col, row, variant in zip(cols, fit.itertuples(), variants):
        marker = " (this model)" if row.is_current else ""
        derived_metric(
            col,
            f"{row.attention}{marker}"
            + ("" if variant.is_mla else f" · {plural(row.n_kv_heads, 'KV head')}"),
            f"{human_bytes(row.kv_bytes_per_token)}/token",
            derive_memory.kv_bytes_per_token(variant, kv_dtype),
            prefix + "kv." + row.attention,
            help=f"{row.kv_bytes_per_token:,} bytes per token; cache at B×T: "
            f"{human_bytes(row.kv_cache_bytes)}",
        )
        col.markdown(
            f"- cache at B×T: **{human_bytes(row.kv_cache_bytes)}**\n"
            f"- weights: {human_bytes(row.weight_bytes)}\n"
            f"- longest context at B={B} on {gpu.name}: **{context_text(row.max_context_at_batch, cfg)}**\n"
            f"- largest batch at T={T:,}: **{row.max_batch_at_seq_len:,}**"
        )
    current = fit[fit.is_current].iloc[0]  # the sidebar's own attention variant
    if current.weight_bytes > gpu.usable_bytes:
        st.warning(
            f"This model's weights alone ({human_bytes(current.weight_bytes)} at {weights}) "
            f"do not fit in {gpu.name}'s {human_bytes(gpu.usable_bytes)}."
        )
    elif current.max_context_at_batch == 0:
        st.warning(
            f"This model's weights fit in {gpu.name}, but not one token of KV cache for "
            f"B = {plural(B, 'sequence')} next to them."
        )
    st.caption(
        kv_report(cfg, T, B, kv_dtype).note
        + " Fits = weights + KV cache ≤ GPU memory; activations of decoding are small and not reserved."
    )
    st.markdown(
        f"**The cache's dtype axis** (weights at {weights}; int8 and int4 keep an fp16 scale "
        f"per token and KV head; the sidebar sets the weights' and the cache's formats):"
    )
    show_table(kv_dtype_frame(cfg, gpu, B, weights), width="stretch")


def context_curve(selection: Selection, gpu_name: str) -> None:
    """The cache against the context on one ``gpu_name``, each attention variant beside the
    GPU's memory."""
    cfg, T, B = selection.cfg, selection.seq_len, selection.batch
    weights, kv_dtype = selection.weight_format, selection.kv_format
    gpu = GPUS[gpu_name]
    fit = kv_fit(cfg, gpu, T, B, weights, kv_dtype)
    curve = kv_memory_curve(cfg, kv_context_lengths(cfg, fit, T), B, weights, kv_dtype)
    st.plotly_chart(kv_memory_vs_context(curve, gpu))


def roofline_section(selection: Selection, gpu_name: str, prefix: str) -> None:
    """The decode roofline at a context length S (kept among its choices): where each batch
    sits against ``gpu_name``'s ridge, and the tokens/s that follow."""
    cfg, T, dtype = selection.cfg, selection.seq_len, selection.dtype
    weights, kv_dtype = selection.weight_format, selection.kv_format
    gpu = GPUS[gpu_name]
    key = prefix + "context"  # in the URL as kv.context
    contexts = _contexts(T)
    keep_choice(
        key,
        contexts,
        T,
        "context length S",
        f"powers of two from 128 to 131,072, or the sidebar's T = {T:,}",
    )
    context = st.select_slider("context length S for the roofline", contexts, key=key)
    bound_note(key)
    points = roofline_points(cfg, gpu, ROOFLINE_BATCHES, context, dtype, weights, kv_dtype)
    left, right = st.columns(2)
    left.plotly_chart(roofline_figure(points, gpu))
    right.plotly_chart(decode_throughput(points))
    st.caption(
        f"Ridge point of {gpu.name}: {points.ridge_point.iloc[0]:.0f} "
        f"FLOPs/byte computing in {dtype} (weights {weights}, cache {kv_dtype}). "
        "Below it a step is memory-bound: the time goes into "
        f"reading the weights and the cache, so fewer KV heads mean faster decoding at long "
        f"context and large batch. Tokens/s: solid, the roofline bound; dashed, the estimate "
        f"calibrated on public measurements (the Validation page), its bars the "
        f"{INTERVAL_LEVEL:.0%} interval of batch-1 or batched decode (built on the fit half's "
        f"errors; the Validation page gives the share of held-out runs inside)."
    )
