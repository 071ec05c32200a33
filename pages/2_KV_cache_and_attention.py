"""KV cache and attention: MHA vs GQA vs MQA — bytes, what fits a GPU, the decode roofline."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import kv, parallel

P = "llama_lab.page2."  # its GPU and context in the URL as kv.gpu, kv.context

selection = ui.setup_page(
    "KV cache & attention",
    "Decoding one token reads every cached key and value of every layer. GQA lets G KV heads "
    "serve H query heads (MQA: G = 1), shrinking the cache H/G-fold; the scores still cost "
    "the same FLOPs, since every query head attends over all keys.",
)
cfg, T, B = selection.cfg, selection.seq_len, selection.batch
kv.stop_for_an_encoder(cfg)  # BERT caches nothing: the page says so and shows no cache
weights, kv_dtype = selection.weight_format, selection.kv_format  # how each is stored

gpu = kv.gpu_choice(T, P)
kinds = "MLA vs MHA vs GQA vs MQA" if cfg.is_mla else "MHA vs GQA vs MQA"
st.subheader(f"{kinds} at B={B}, T={T:,}: weights {weights}, KV cache {kv_dtype}")
kv.fit_section(selection, gpu, P)  # the answer first; how it is counted below
kv.image_cache(cfg, kv_dtype)  # a multimodal model: what an image takes
with st.expander("How the cache is counted: the formulas"):
    kv.formulas(cfg, T, B, kv_dtype)
kv.sharing(cfg)
st.subheader(f"On several {gpu} GPUs: every tensor × pipeline split")
parallel.serving_section(cfg, gpu, B, T, weights, kv_dtype, P)  # the Many GPUs page's, at this page's GPU
kv.context_curve(selection, gpu)
if cfg.is_mla:
    kv.mla_section(selection, gpu)
if cfg.has_indexer:
    kv.sparse_attention_section(selection)
if cfg.has_linear_attention:
    kv.linear_attention_section(selection)
if any(cfg.local_layer_flags):  # a window, and any sparse pattern on it
    kv.pattern_section(cfg)
if cfg.is_encoder_decoder:
    kv.encoder_decoder_section(selection)

st.subheader("Decode roofline")
st.latex(
    r"t_\text{step} \ge \max\!\left(\frac{\text{FLOPs}}{\text{peak}},\;"
    r"\frac{\text{weights} + B\,S\cdot\text{KV bytes/token}}{\text{HBM bandwidth}}\right)"
    r"\qquad \text{intensity} = \frac{\text{FLOPs}}{\text{bytes moved}}"
)
kv.roofline_section(selection, gpu, P)
