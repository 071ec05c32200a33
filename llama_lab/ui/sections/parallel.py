"""The Many GPUs page's sections — a layout's per-GPU memory and traffic, what fits on N GPUs
(serving and training), Korthikanti et al.'s activations beside ours, and the sharded run on
local torch.distributed processes — and the KV page's serving on N GPUs."""

from __future__ import annotations

import streamlit as st

from ...analysis.flops import MFU_CONVENTION
from ...analysis.korthikanti import compare
from ...analysis.kv import tp_cache_note
from ...analysis.layouts import (
    fewest_gpus,
    gpus_for_states,
    search_assumptions,
    search_layouts,
    serving_fits,
    states_floor_bytes,
)
from ...analysis.parallel import RECOMPUTE, Layout, check_layout, parallel_memory
from ...analysis.scope import check_planned
from ...config import ModelConfig
from ...errors import LabError
from ...experiments.shard import SHARD_DEFAULTS, shard_config, shard_run
from ...figures.parallel import (
    comm_frame,
    korthikanti_frames,
    search_frame,
    serving_frame,
    stage_frame,
    stage_memory_figure,
)
from ...runtime.hardware import GPU, GPUS
from ...units import human_bytes
from ...validation.intervals import INTERVAL_LEVEL
from ...validation.predict import predict_train
from ..cached import measured, show_table
from ..context import context_text
from ..runs import measure_on_view
from ..widgets import show_caption, show_error, show_warning

GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
SPLITS = (1, 2, 4, 8, 16, 32, 64, 128)


def _default_tp(cfg: ModelConfig) -> int:
    """The widest split of 8, 4, 2 the model allows (heads, KV heads, FFN width), else 1."""
    for tp in (8, 4, 2):
        try:
            check_layout(cfg, Layout(gpus=tp, tp=tp))
            return tp
        except LabError:
            continue
    return 1


def layout_controls(cfg: ModelConfig, prefix: str) -> tuple[str, Layout]:
    """The GPU kind and a layout, as the user sets them (first shown: the fewest GPUs whose
    memory holds twice the training states, tensor parallel within them as the model allows, one
    pipeline stage: a 44M model on one GPU, not a 64-GPU pipeline)."""
    top = st.columns(4)
    gpu = top[0].selectbox("GPU", list(GPUS), index=0, key=prefix + "gpu")
    first = gpus_for_states(cfg, gpu, least=1)
    gpus = top[1].select_slider("GPUs (N)", GPU_COUNTS, value=first, key=prefix + "gpus")
    tp = top[2].select_slider(
        "tensor parallel (tp)", SPLITS, value=min(_default_tp(cfg), first), key=prefix + "tp"
    )
    pp = top[3].select_slider("pipeline stages (pp)", SPLITS, value=1, key=prefix + "pp")
    row = st.columns(5)
    zero = row[0].selectbox(
        "ZeRO stage",
        (0, 1, 2, 3),
        index=1,
        key=prefix + "zero",
        help="of the data-parallel group: 1 optimizer state, 2 + gradients, 3 (FSDP) + weights",
    )
    recompute = row[1].selectbox("recomputation", RECOMPUTE, key=prefix + "recompute")
    micro = row[2].number_input("sequences per micro-batch", 1, 1024, 1, key=prefix + "micro")
    m = row[3].number_input("micro-batches per step (0: 1, or 4·pp)", 0, 100_000, 0, key=prefix + "m")
    chunks = row[4].number_input("chunks per GPU (interleaved if > 1)", 1, 64, 1, key=prefix + "chunks")
    sp = _sequence_parallel(tp, prefix)
    return gpu, Layout(
        gpus,
        tp,
        pp,
        zero,
        sp,
        recompute,
        int(micro),
        int(m),
        "interleaved" if chunks > 1 else "1f1b",
        int(chunks),
    )


def _copy_state(source: str, target: str) -> None:
    st.session_state[target] = st.session_state[source]


def _sequence_parallel(tp: int, prefix: str) -> bool:
    """The sequence-parallel toggle: off (and disabled) at tp = 1, where there is nothing to
    split over; the user's choice (first: on) is kept under its own key and shown again at tp > 1."""
    state, key, choice = st.session_state, prefix + "sp", prefix + "sp_choice"
    state[key] = tp > 1 and state.setdefault(choice, True)
    return st.toggle(
        "sequence parallel",
        key=key,
        disabled=tp == 1,
        on_change=_copy_state,
        args=(key, choice),
        help="splits the norms' and dropout's activations over the tp ranks: only with tp > 1",
    )


def layout_section(cfg: ModelConfig, seq_len: int, dtype: str, prefix: str) -> None:
    gpu_name, layout = layout_controls(cfg, prefix)
    gpu = GPUS[gpu_name]
    try:
        est = parallel_memory(cfg, layout, seq_len, dtype)
    except LabError as exc:
        show_error(f"This layout cannot run: {exc}")
        return
    g = est.per_gpu
    if cfg.has_linear_attention and layout.tp > 1:
        show_caption(
            f"The {sum(cfg.linear_layer_flags)} Gated DeltaNet blocks are counted replicated on every "
            f"tensor-parallel rank (their weights, activations and state are not split here)."
        )
    cols = st.columns(4)
    cols[0].metric(
        f"per GPU (stage {g['stage']}, the fullest)",
        human_bytes(g["total_bytes"]),
        "fits" if g["total_bytes"] <= gpu.usable_bytes else "does not fit",
        delta_arrow="off",
        delta_color="off",
    )
    cols[1].metric(
        "data-parallel replicas (dp)",
        f"{est.dp:,}",
        f"global batch {est.global_batch:,} sequences",
        delta_arrow="off",
        delta_color="off",
    )
    cols[2].metric("sent per GPU per step", human_bytes(est.comm_bytes_per_step))
    cols[3].metric(
        "pipeline bubble",
        f"{est.bubble_fraction:.1%}",
        f"{layout.m} micro-batches",
        delta_arrow="off",
        delta_color="off",
    )
    _throughput(cfg, gpu, layout, seq_len, dtype)
    st.plotly_chart(stage_memory_figure(est, gpu.name, gpu.usable_bytes), key=prefix + "stages")
    show_table(stage_frame(est), width="stretch")
    show_table(comm_frame(est), width="stretch")
    for note in est.notes:
        show_caption(note)
    show_caption(
        "Weights, gradients and AdamW state: mixed precision keeps 2Ψ + 2Ψ + 12Ψ bytes "
        "(fp32: 4Ψ + 4Ψ + 8Ψ), ZeRO dividing them by dp; activations are what our "
        "model saves for backward, per micro-batch in flight (1F1B: p − stage of them)."
    )


def _throughput(cfg: ModelConfig, gpu: GPU, layout: Layout, seq_len: int, dtype: str) -> None:
    """The layout's training throughput per GPU: the calibrated estimate with its interval,
    beside the bound at the dense peak (``validation.predict_train``)."""
    if dtype == "fp32":
        show_caption(
            "No training-throughput estimate in fp32: the estimate is calibrated on mixed-precision "
            "bf16 and fp8 runs (python -m llama_lab validate)."
        )
        return
    try:
        p = predict_train(cfg, gpu, layout, seq_len, dtype)
    except LabError as exc:  # a model the time model refuses by name (a sparse attention pattern)
        show_caption(f"No training-throughput estimate: {exc}.")
        return
    t = p["tokens_per_s_per_gpu"]
    cols = st.columns(3)
    cols[0].metric(
        "tokens/s per GPU (estimate)",
        f"{t['estimate']:,.0f}",
        f"{t['low']:,.0f}–{t['high']:,.0f} ({INTERVAL_LEVEL:.0%} interval)",
        delta_arrow="off",
        delta_color="off",
    )
    cols[1].metric("tokens/s per GPU (bound)", f"{t['bound']:,.0f}")
    cols[2].metric("MFU (estimate)", f"{p['mfu']['estimate']:.1%}", help=MFU_CONVENTION)
    show_caption(
        "The bound: the step's FLOPs at the data sheet's dense bf16 peak, no traffic, no bubble. The "
        "estimate: its matmuls, attention scores and tensor-parallel traffic at the shares fitted on "
        f"public training runs, idle for the pipeline bubble; the range is its {INTERVAL_LEVEL:.0%} "
        "interval, built on the fit half's errors (the Validation page gives the share of "
        f"held-out runs inside). MFU: {MFU_CONVENTION}."
    )


@st.cache_data(max_entries=32, show_spinner=False)
def _fewest(cfg: ModelConfig, gpu: str, seq_len: int, dtype: str, serving: bool, batch: int, weights):
    return fewest_gpus(cfg, gpu, seq_len, dtype, serving, batch, weights)


@st.cache_data(max_entries=16, show_spinner="Searching layouts…")
def _search(cfg: ModelConfig, gpus: int, gpu: str, seq_len: int, dtype: str):
    return search_layouts(cfg, gpus, gpu, seq_len, None, dtype)


def serving_gpu(prefix: str) -> str:
    """The GPU the serving splits are counted for (the Many GPUs page's own choice)."""
    return st.selectbox("GPU", list(GPUS), key=prefix + "serve_gpu")


def serving_section(
    cfg: ModelConfig, gpu: str, batch: int, seq_len: int, weights, kv: str, prefix: str
) -> None:
    """Serving on N GPUs: every TP × PP split, longest context and largest batch."""
    try:
        check_planned(cfg, "Serving on several GPUs")
    except LabError as exc:  # said in one line, not answered short
        show_warning(str(exc))
        return
    fewest = _fewest(cfg, gpu, seq_len, "bf16", True, batch, weights)
    # first shown: the fewest GPUs that serve it (one for a model that fits on one)
    gpus = st.select_slider(
        f"GPUs ({gpu})", GPU_COUNTS, value=fewest or GPU_COUNTS[-1], key=prefix + "serve_gpus"
    )
    fits = serving_fits(cfg, gpu, gpus, batch, seq_len, weights, kv)
    if not fits:
        show_caption(f"No TP × PP split of {gpus} GPUs divides this model's heads and layers.")
        return
    best = fits[0]
    if best.max_context_at_batch == 0:
        least = min(fits, key=lambda f: f.weights_bytes_per_gpu)
        show_warning(
            f"No split of {gpus} × {gpu} holds this model: even {least.layout} keeps "
            f"{human_bytes(least.weights_bytes_per_gpu)} of weights on its fullest GPU "
            f"(fewest GPUs that fit: {fewest or 'more than 16,384'})."
        )
    st.markdown(
        f"On **{gpus} × {gpu}**, the best split ({best.layout}) fits "
        f"**{context_text(best.max_context_at_batch, cfg)}** tokens per sequence at B={batch}, or "
        f"**{best.total_batch_at_seq_len:,}** sequences of {seq_len:,} tokens."
    )
    show_table(serving_frame(fits), width="stretch")
    show_caption(
        "Each stage's GPU holds its tensor-parallel piece of its layers' weights and "
        "their KV heads' cache; the fullest stage decides. Activations of decoding are "
        "small and not reserved."
    )
    show_caption(tp_cache_note(cfg, kv))


def search_section(cfg: ModelConfig, seq_len: int, dtype: str, prefix: str) -> None:
    cols = st.columns(2)
    gpu = cols[0].selectbox("GPU", list(GPUS), key=prefix + "search_gpu")
    floor = states_floor_bytes(cfg)
    # first shown: the fewest GPUs a layout fits, else twice what the states alone need
    start = max(2, _fewest(cfg, gpu, seq_len, dtype, False, 1, "bf16") or gpus_for_states(cfg, gpu))
    gpus = cols[1].select_slider(
        "GPUs",
        GPU_COUNTS[1:],
        value=start,
        key=prefix + "search_gpus",
        help=f"First shown: the fewest on which a layout fits ({start:,})",
    )
    rows = _search(cfg, gpus, gpu, seq_len, dtype)
    if not rows:
        why = (
            f": weights, gradients and AdamW state alone are {human_bytes(floor)}, more than "
            f"{gpus} GPUs hold even fully sharded"
            if floor > gpus * GPUS[gpu].usable_bytes
            else ": the activations of one sequence per micro-batch do not fit beside the "
            "states (context parallelism, which splits the sequence, is not modelled); "
            "try more GPUs or a shorter T"
        )
        show_warning(f"No layout of {gpus} × {gpu} fits this model at T={seq_len:,} ({dtype}){why}.")
    else:
        st.markdown(f"**{len(rows)}** layouts fit; cheapest first:")
        show_table(search_frame(rows[:40], cfg, seq_len, GPUS[gpu]), width="stretch")
    show_caption(search_assumptions(gpu))


def korthikanti_section(cfg: ModelConfig, seq_len: int, prefix: str) -> None:
    tp = st.select_slider(
        "tensor parallel t",
        SPLITS[:4],
        key=prefix + "k_tp",
        value=next(t for t in (8, 4, 2, 1) if cfg.n_heads % t == 0),
    )
    if cfg.n_heads % tp:
        show_error(f"tp={tp} does not divide n_heads={cfg.n_heads}")
        return
    cmp = compare(cfg, seq_len, 1, tp)
    terms, ours, variants = korthikanti_frames(cmp)
    st.markdown(
        f"One layer at s = {seq_len:,}, b = 1, h = {cfg.d_model:,}, a = {cfg.n_heads} "
        f"(16-bit). Their GPT layer keeps **{human_bytes(cmp.korthikanti_total)}**; our "
        f"implementation of their recipe **{human_bytes(cmp.ours_gpt_total)}**, of this "
        f"model's recipe **{human_bytes(cmp.ours_total)}**."
    )
    left, right = st.columns(2)
    with left:
        show_table(terms, width="stretch")
    with right:
        show_table(ours, width="stretch")
    st.markdown("**Why ours differs from theirs** (their recipe; the bytes add up exactly):")
    show_table([{"reason": d["reason"], "bytes": d["bytes"]} for d in cmp.differences], width="stretch")
    st.markdown(f"**Table 2's variants** at t = {tp}, theirs against this model's:")
    show_table(variants, width="stretch")


@measured(max_entries=8)
def _sharded(cfg: ModelConfig, ranks: int, strategy: str, _progress=None):
    return shard_run(cfg, ranks, strategy, progress=_progress)


def shard_section(cfg: ModelConfig, prefix: str) -> None:
    small = shard_config(cfg)
    cols = st.columns(2)
    strategy = cols[0].selectbox("strategy", ("fsdp", "tp", "fsdp+tp"), key=prefix + "strategy")
    ranks = cols[1].select_slider(
        "processes", (2, 4), value=4 if strategy == "fsdp+tp" else 2, key=prefix + "ranks"
    )
    st.caption(
        f"{small.note} {SHARD_DEFAULTS['steps']} AdamW steps of B = "
        f"{SHARD_DEFAULTS['batch']} × T = {SHARD_DEFAULTS['seq_len']} per rank, gloo."
    )
    measure_on_view(
        "shard",
        small.cfg,
        {"ranks": ranks, "strategy": strategy},
        lambda progress: _sharded(small.cfg, ranks, strategy, _progress=progress),
        button=f"Run {strategy} on {ranks} processes",
        prefix=prefix,
        not_on_view="Not run in this session yet.",
    )
