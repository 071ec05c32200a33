"""KV cache and attention: MHA vs GQA vs MQA — bytes, what fits a GPU, the decode roofline."""

import streamlit as st

from llama_lab import ui
from llama_lab.analysis import DEFAULT_GPU, derive
from llama_lab.figures.kv import kv_context_lengths, kv_dtype_frame, kv_memory_vs_context, kv_sharing_diagram
from llama_lab.figures.rooflines import ROOFLINE_BATCHES, decode_throughput, roofline_figure
from llama_lab.runtime.hardware import GPUS

P = "llama_lab.page2."
KEY_GPU, KEY_CONTEXT = P + "gpu", P + "context"  # in the URL as kv.gpu, kv.context

selection = ui.setup_page(
    "KV cache & attention",
    "Decoding one token reads every cached key and value of every layer. GQA lets G KV heads "
    "serve H query heads (MQA: G = 1), shrinking the cache H/G-fold; the scores still cost "
    "the same FLOPs, since every query head attends over all keys.",
)
cfg, T, B, dtype = selection.cfg, selection.seq_len, selection.batch, selection.dtype
weights, kv_dtype = selection.weight_format, selection.kv_format  # how each is stored
b = ui.dtype_bytes(kv_dtype)
kv = ui.kv_report(cfg, T, B, kv_dtype)

scale = ui.kv_scale_bytes(kv_dtype)  # int8/int4: an fp16 scale per token and KV head
st.latex(
    rf"\text{{bytes/token}} = 2\,(K,V) \cdot L \cdot G \cdot (D \cdot b"
    rf"{' + s' if scale else ''}) = 2 \cdot {cfg.n_layers} \cdot {cfg.n_kv_heads} \cdot "
    rf"({cfg.head_dim} \cdot {b:g}{f' + {scale}' if scale else ''}) = "
    rf"{kv.bytes_per_token:,}"
)
local = sum(cfg.local_layer_flags)
held = (
    f"{T:,}"
    if not local or T <= cfg.sliding_window
    else rf"\tfrac{{{local}\cdot{cfg.sliding_window:,} + {cfg.n_layers - local}\cdot{T:,}}}{{{cfg.n_layers}}}"
)
st.latex(
    rf"\text{{cache}} = \text{{bytes/token}} \cdot B \cdot T_\text{{held}} = "
    rf"{kv.bytes_per_token:,} \cdot {B:,} \cdot {held} = \text{{{ui.human_bytes(kv.bytes)}}}"
)
st.caption(
    f"Cache at B×T: {kv.bytes:,} bytes"
    + (
        f" — {sum(cfg.local_layer_flags)} sliding-window layers hold at most "
        f"{cfg.sliding_window:,} tokens each, so the cache grows more slowly past W "
        f"(the curve below bends there)."
        if any(cfg.local_layer_flags)
        else "."
    )
)

st.plotly_chart(kv_sharing_diagram(cfg.n_heads, cfg.n_kv_heads))

contexts = sorted({2**k for k in range(7, 18)} | {T})
ui.link_widgets(
    "kv", P, [ui.choice_link("gpu", list(GPUS), DEFAULT_GPU), ui.choice_link("context", contexts, T)]
)
gpu_name = st.selectbox(
    "GPU", list(GPUS), key=KEY_GPU, help="Data-sheet memory, dense peak FLOP/s and HBM bandwidth."
)
gpu = GPUS[gpu_name]
st.caption(gpu.source)

st.subheader(f"MHA vs GQA vs MQA at B={B}, T={T:,}: weights {weights}, KV cache {kv_dtype}")
fit = ui.kv_fit(cfg, gpu, T, B, weights, kv_dtype)
cols = st.columns(len(fit))
for col, row in zip(cols, fit.itertuples()):
    marker = " (this model)" if row.is_current else ""
    ui.derived_metric(
        col,
        f"{row.attention}{marker} · {row.n_kv_heads} KV head{'s' if row.n_kv_heads > 1 else ''}",
        f"{ui.human_bytes(row.kv_bytes_per_token)}/token",
        derive.kv_bytes_per_token(cfg.replace(n_kv_heads=row.n_kv_heads), kv_dtype),
        P + "kv." + row.attention,
        help=f"{row.kv_bytes_per_token:,} bytes per token; cache at B×T: "
        f"{ui.human_bytes(row.kv_cache_bytes)}",
    )
    col.markdown(
        f"- cache at B×T: **{ui.human_bytes(row.kv_cache_bytes)}**\n"
        f"- weights: {ui.human_bytes(row.weight_bytes)}\n"
        f"- longest context at B={B} on {gpu.name}: **{row.max_context_at_batch:,}**\n"
        f"- largest batch at T={T:,}: **{row.max_batch_at_seq_len:,}**"
    )
current = fit[fit.is_current].iloc[0]  # the sidebar's own attention variant
if current.weight_bytes > gpu.memory_bytes:
    st.warning(
        f"This model's weights alone ({ui.human_bytes(current.weight_bytes)} at {weights}) "
        f"do not fit in {gpu.name}'s {ui.human_bytes(gpu.memory_bytes)}."
    )
elif current.max_context_at_batch == 0:
    st.warning(
        f"This model's weights fit in {gpu.name}, but not one token of KV cache for "
        f"B={B} sequences next to them."
    )
st.caption(
    kv.note + " Fits = weights + KV cache ≤ GPU memory; activations of decoding are small and not reserved."
)
st.markdown(
    f"**The cache's dtype axis** (weights at {weights}; int8 and int4 keep an fp16 scale "
    f"per token and KV head; the sidebar sets the weights' and the cache's formats):"
)
ui.show_table(kv_dtype_frame(cfg, gpu, B, weights), width="stretch")

st.subheader(f"On several {gpu.name} GPUs: every tensor × pipeline split")
ui.serving_section(cfg, gpu_name, B, T, weights, kv_dtype, P)

curve = ui.kv_memory_curve(cfg, kv_context_lengths(cfg, fit, T), B, weights, kv_dtype)
st.plotly_chart(kv_memory_vs_context(curve, gpu))

st.subheader("Decode roofline")
st.latex(
    r"t_\text{step} \ge \max\!\left(\frac{\text{FLOPs}}{\text{peak}},\;"
    r"\frac{\text{weights} + B\,S\cdot\text{KV bytes/token}}{\text{HBM bandwidth}}\right)"
    r"\qquad \text{intensity} = \frac{\text{FLOPs}}{\text{bytes moved}}"
)
ui.keep_choice(
    KEY_CONTEXT,
    contexts,
    T,
    "context length S",
    f"powers of two from 128 to 131,072, or the sidebar's T = {T:,}",
)
context = st.select_slider("context length S for the roofline", contexts, key=KEY_CONTEXT)
ui.bound_note(KEY_CONTEXT)
points = ui.roofline_points(cfg, gpu, ROOFLINE_BATCHES, context, dtype, weights, kv_dtype)
left, right = st.columns(2)
left.plotly_chart(roofline_figure(points, gpu))
right.plotly_chart(decode_throughput(points))
st.caption(
    f"Ridge point of {gpu.name}: {points.ridge_point.iloc[0]:.0f} "
    f"FLOPs/byte computing in {dtype} (weights {weights}, cache {kv_dtype}). "
    "Below it a step is memory-bound: the time goes into "
    f"reading the weights and the cache, so fewer KV heads mean faster decoding at long "
    f"context and large batch."
)
