"""Many GPUs: tensor, pipeline and data parallelism predicted per GPU, what fits on N GPUs, the
published activation formulas beside ours, and sharded training measured on torch.distributed."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import parallel

P = "llama_lab.page10."

selection = ui.setup_page(
    "Many GPUs",
    "Models past one GPU's memory are split three ways: tensor parallelism cuts every matrix "
    "across the GPUs of a node, pipeline parallelism gives each GPU a run of blocks, and data "
    "parallelism copies the rest — ZeRO / FSDP sharding those copies' states. Each GPU's "
    "weights, gradients, optimizer state, activations and traffic are written out for the "
    "sidebar's model below, and the sharding is measured on real local processes.",
)
ui.stop_unless_decoder_only(selection.cfg, "The Many GPUs page")
cfg, T, dtype = selection.cfg, selection.seq_len, selection.dtype
weights, kv = selection.weight_format, selection.kv_format

tab_layout, tab_fit, tab_k, tab_run = st.tabs(
    ["Per GPU", "What fits on N GPUs", "Korthikanti et al. 2022", "Measured on torch.distributed"]
)
with tab_layout:
    st.subheader(f"Training per GPU at T = {T:,} ({dtype})")
    parallel.layout_section(cfg, T, dtype, P)
with tab_fit:
    st.subheader("Serving: the longest context and the largest batch per split")
    gpu = parallel.serving_gpu(P)
    parallel.serving_section(cfg, gpu, selection.batch, T, weights, kv, P)
    st.subheader(f"Training: the layouts that fit, at T = {T:,}")
    parallel.search_section(cfg, T, dtype, P)
with tab_k:
    st.subheader("Activation memory per layer: their GPT block, our implementation")
    parallel.korthikanti_section(cfg, T, P)
with tab_run:
    st.subheader("FSDP2 and tensor parallelism on local processes")
    st.markdown(
        "PyTorch's own `fully_shard` (FSDP2) and DTensor tensor parallelism applied to "
        "our model — each part of its fused q/k/v and gate/up projections split by "
        "heads — for a few AdamW steps on gloo. Every rank's local shards are measured "
        "and set beside the prediction; the loss is compared with one process on the "
        "same data and seed."
    )
    parallel.shard_section(cfg, P)
