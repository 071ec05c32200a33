"""The Inference systems page's GPU and its four sections — quantisation, FlashAttention,
speculative decoding, distillation — each with its formulas written out with the sidebar
model's numbers and its live measurement (under the job slot, cached per process, stoppable)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ... import analysis, experiments
from ...analysis import DEFAULT_GPU, WeightQuant, derive_measured, derive_memory
from ...analysis.common import training_dtype
from ...analysis.quant import KEEP_CHOICES, SCALE_DTYPES, as_weight_quant, group_label, unconverted_bytes
from ...config import ModelConfig
from ...experiments import distill
from ...experiments.distill import DISTILL_DEFAULTS
from ...experiments.flash import FLASH_SEQ_LENS, fit_figure
from ...experiments.quantize import QUANT_DEFAULTS, quantize_run
from ...experiments.speculative import SPECULATIVE_DEFAULTS, speculative_run
from ...runtime.hardware import GPUS
from ...units import human_bytes
from ..cached import measured, show_table
from ..context import capped_context
from ..derivations import derived_metric, show_equation
from ..runs import measure_on_view
from ..widgets import choice_link, link_widgets


def gpu_choice(prefix: str) -> str:
    """The GPU every section is counted for, mirrored in the URL as inf.gpu."""
    link_widgets("inf", prefix, [choice_link("gpu", list(GPUS), DEFAULT_GPU)])
    return st.selectbox("GPU", list(GPUS), key=prefix + "gpu")


@measured(max_entries=8)
def _quantized(preset: str, dtype: str, _progress=None):
    return quantize_run(preset, dtype, QUANT_DEFAULTS["steps"], device="cpu", progress=_progress)


@measured(max_entries=8)
def _speculated(target: str, draft: str, gamma: int, new_tokens: int, _progress=None):
    return speculative_run(
        target, draft, gamma, new_tokens, SPECULATIVE_DEFAULTS["steps"], device="cpu", progress=_progress
    )


@measured(max_entries=4)
def _distilled(temperature: float, alpha: float, _progress=None):
    return distill.page_run(temperature, alpha, progress=_progress)


@measured(max_entries=8)
def _flash_swept(cfg: ModelConfig, dtype: str, gpu: str, _progress=None):
    return experiments.flash.flash_sweep(cfg, FLASH_SEQ_LENS, 1, dtype, "auto", gpu, _progress)


def _live(kind: str, button: str, prefix: str, config: ModelConfig | None, settings: dict, work) -> None:
    """A live run on its button (measure_on_view, never on view: these take seconds)."""
    measure_on_view(
        kind,
        config,
        settings,
        work,
        button=button,
        prefix=prefix,
        not_on_view="Not measured in this session yet.",
    )


GROUP_CHOICES = (-1, 0, 32, 64, 128, 256)  # inputs per scale (-1: per tensor, 0: per row)


def _group_label(group: int) -> str:
    return group_label(group)


def _weight_options(weights: "WeightQuant | str", prefix: str) -> WeightQuant:
    """The sidebar's weight format with this page's options: group size, scale dtype, zero
    points, what stays in 16 bits (each defaulting to the format's usual choice). An uploaded
    file's own stored format is taken as it is (its checkpoint fixes every choice)."""
    if isinstance(weights, WeightQuant):
        return weights
    base = WeightQuant.of(weights)
    if not base.quantised:
        return base
    with st.expander(f"{weights} options: group size, scales, what stays in 16 bits"):
        cols = st.columns(3)
        group = cols[0].selectbox(
            "scales",
            GROUP_CHOICES,
            GROUP_CHOICES.index(base.group_size) if base.group_size in GROUP_CHOICES else 0,
            format_func=_group_label,
            key=f"{prefix}group.{weights}",
        )
        scale = cols[1].selectbox(
            "scale dtype", SCALE_DTYPES, SCALE_DTYPES.index(base.scale_dtype), key=f"{prefix}scale.{weights}"
        )
        zero = cols[2].toggle("zero points (asymmetric)", key=prefix + "zero", disabled=weights == "fp8")
        keep = st.multiselect("kept in bf16", KEEP_CHOICES, list(base.keep), key=prefix + "keep")
    return WeightQuant.of(weights, group, scale, zero and weights != "fp8", tuple(keep))


def zero_context_reason(weights: int, stored_as: object, gpu: str, what: str = "KV cache") -> str:
    """Why a context answer is 0: the weights alone exceed the GPU, or leave no room for one
    token's ``what``."""
    memory = GPUS[gpu].usable_bytes
    if weights > memory:
        return (
            f"0 because the weights alone ({human_bytes(weights)} at {stored_as}) exceed {gpu}'s "
            f"{human_bytes(memory)}: no context fits before the model is split across GPUs (Many GPUs)."
        )
    return (
        f"0 because the weights ({human_bytes(weights)} at {stored_as}) leave {gpu}'s "
        f"{human_bytes(memory)} no room for one token's {what}."
    )


def quantisation_section(
    cfg: ModelConfig, preset: str, gpu: str, prefix: str, formats: "tuple[WeightQuant | str, str]"
) -> None:
    """``formats``: the sidebar's weight and KV-cache formats (the weights' may be an uploaded
    file's own stored format, a WeightQuant)."""
    st.subheader("Quantisation: every byte of the stored formats")
    w, k = formats
    if isinstance(w, WeightQuant):
        how = (
            "as the uploaded file's quantization_config stores them: every tensor of its checkpoint "
            "(choose another format in the sidebar to open this page's options)."
        )
    elif as_weight_quant(w).quantised:
        how = (
            "the options below apply on this page (the other pages use the format's usual "
            "group size and scales)."
        )
    else:
        how = (
            "a quantised format there (fp8, int8, int4) opens its options here: group size, "
            "scales and what stays in 16 bits."
        )
    quant = _weight_options(w, prefix)
    kept = unconverted_bytes(cfg, quant)  # a file's modules kept unconverted, if any
    kept_note = f" ({human_bytes(kept)} of linear layers unconverted)" if kept else ""
    st.caption(f"Weights stored as **{w}**{kept_note}, KV cache as **{k}** — set in the sidebar; " + how)
    stored = analysis.weights_bytes(cfg, quant)
    cols = st.columns(3)
    derived_metric(
        cols[0],
        f"weights at {w}",
        human_bytes(stored.total),
        derive_memory.weights_stored(cfg, quant),
        prefix + "d.weights",
        delta=f"bf16: {human_bytes(analysis.weight_bytes(cfg, 'bf16'))}",
        delta_arrow="off",
        delta_color="off",
    )
    derived_metric(
        cols[1],
        f"KV cache at {k}",
        f"{analysis.kv_cache_bytes_per_token(cfg, k):,} B/token",
        derive_memory.kv_bytes_per_token(cfg, k),
        prefix + "d.kv",
    )
    longest = analysis.max_context_that_fits(cfg, gpu, 1, quant, k)
    shown, capped = capped_context(longest, cfg)
    derived_metric(
        cols[2],
        f"longest context on {gpu} (B=1)",
        f"{shown:,}",
        derive_memory.longest_context(cfg, gpu, 1, quant, k),
        prefix + "d.context",
    )
    if longest == 0:
        st.caption(zero_context_reason(stored.total, w, gpu))
    elif capped:
        st.caption(f"Longest context: {capped}.")
    if quant.quantised:  # each number with what it is under it
        show_equation(derive_memory.weights_stored(cfg, quant))
        st.caption(f"Kept in {quant.keep_dtype}: {', '.join(quant.keep) or 'nothing'} and every bias.")
    show_equation((r"\text{KV bytes/token}", derive_memory.kv_bytes_per_token(cfg, k)))

    def row(label: str, weights, kv: str) -> dict:
        return {
            "weights": label,
            "kv_cache": kv,
            "weights_bytes": analysis.weight_bytes(cfg, weights),
            "kv_bytes_per_token": analysis.kv_cache_bytes_per_token(cfg, kv),
            f"longest_context_on_{gpu}": analysis.max_context_that_fits(cfg, gpu, 1, weights, kv),
        }

    rows = [row(wd, wd, kd) for wd, kd in (("bf16", "bf16"), ("int8", "int8"), ("int4", "fp8"))]
    show_table(pd.DataFrame(rows + [row(f"{w} (this page)", quant, k)]), width="stretch")
    _quantize_live(preset, w if w in ("int8", "int4") else "int8", prefix)


def _quantize_live(preset: str, live: str, prefix: str) -> None:
    q = QUANT_DEFAULTS
    st.markdown(
        f"**Live**: the live copy of {preset}'s recipe (d={q['d_model']}, "
        f"{q['n_layers']} blocks), trained {q['steps']} steps on the built-in text, its "
        f"linear layers stored as real {live} tensors; bytes measured against the "
        f"prediction, the logits and the loss against fp32 and bf16."
    )
    _live(
        "quantize",
        "Quantise the live copy",
        prefix,
        None,
        {"preset": preset, "dtype": live},
        lambda progress: _quantized(preset, live, _progress=progress),
    )


def flash_section(cfg: ModelConfig, seq_len: int, dtype: str, gpu: str, prefix: str) -> None:
    st.subheader("FlashAttention: what attention keeps and moves")
    dtype = training_dtype(dtype)
    r = analysis.attention_memory(cfg, seq_len, 1, dtype, gpu)
    show_equation(  # one attending block's, at B = 1
        (
            r"\text{naive/layer}",
            derive_memory.attention_kept(cfg, seq_len, 1, dtype, "naive", per_block=True),
        ),
        (
            r"\text{fused/layer}",
            derive_memory.attention_kept(cfg, seq_len, 1, dtype, "flash", per_block=True),
        ),
    )
    cols = st.columns(4)
    derived_metric(
        cols[0],
        f"kept, naive (T={seq_len:,})",
        human_bytes(r.naive_bytes),
        derive_memory.attention_kept(cfg, seq_len, 1, dtype, "naive"),
        prefix + "d.naive",
    )
    derived_metric(
        cols[1],
        "kept, fused",
        human_bytes(r.flash_bytes),
        derive_memory.attention_kept(cfg, seq_len, 1, dtype, "flash"),
        prefix + "d.flash",
    )
    derived_metric(
        cols[2],
        "HBM traffic, naive ÷ fused",
        f"{r.naive_hbm_bytes / r.flash_hbm_bytes:.3g}×",
        derive_memory.hbm_ratio(cfg, seq_len, 1, dtype, gpu),
        prefix + "d.hbm",
        help=f"Dao et al. 2022, Thm 2: SRAM M = {r.sram_bytes:,} bytes on {gpu} "
        f"(B_c = {r.block_cols}, B_r = {r.block_rows})",
    )
    cols[3].metric(
        "naive stops fitting at",
        f"T = {r.naive_fits_up_to:,}",
        f"fused: {r.flash_fits_up_to:,}",
        delta_arrow="off",
        delta_color="off",
    )
    if r.naive_fits_up_to == 0:
        st.caption(
            "T = 0: " + zero_context_reason(analysis.weights_bytes(cfg, dtype).total, dtype, gpu, "attention")
        )
    st.plotly_chart(fit_figure(cfg, 1, dtype, gpu, max(seq_len, r.flash_fits_up_to)), key=prefix + "fit")
    st.markdown(
        f"**Live**: one attention layer with this model's heads ({cfg.n_heads} / "
        f"{cfg.n_kv_heads} KV, head_dim {cfg.head_dim}), T = "
        f"{', '.join(map(str, FLASH_SEQ_LENS))}, naive against fused."
    )
    _live(
        "flash",
        "Run the T sweep",
        prefix,
        cfg,
        {"dtype": dtype, "gpu": gpu},
        lambda progress: _flash_swept(cfg, dtype, gpu, _progress=progress),
    )


def speculative_section(prefix: str) -> None:
    st.subheader("Speculative decoding (Leviathan et al. 2023)")
    cols = st.columns(3)
    alpha = cols[0].slider("acceptance rate α", 0.0, 1.0, 0.8, 0.01, key=prefix + "alpha")
    gamma = cols[1].slider("draft length γ", 1, 16, 4, key=prefix + "gamma")
    c = cols[2].slider("cost ratio c (draft ÷ target step)", 0.0, 1.0, 0.05, 0.01, key=prefix + "c")
    show_equation(
        *derive_measured.speculative_gains(alpha, gamma, c)
    )  # E, the speedup at γ and at the best γ*
    st.markdown(
        f"**Live**: a {SPECULATIVE_DEFAULTS['target_layers']}-block target and a "
        f"{SPECULATIVE_DEFAULTS['draft_layers']}-block draft trained on the built-in "
        f"text, greedy decoding with both KV caches; an untrained draft beside it."
    )
    _live(
        "speculative",
        "Decode speculatively",
        prefix,
        None,
        {"gamma": gamma},
        lambda progress: _speculated(
            "seed-demo", "seed-demo", gamma, SPECULATIVE_DEFAULTS["new_tokens"], _progress=progress
        ),
    )


def distill_section(prefix: str) -> None:
    st.subheader("Distillation (Hinton et al. 2015)")
    st.markdown(
        "A smaller student is cheaper to serve. Distillation trains it on a larger teacher's "
        "softened next-token distribution as well as on the labels (Hinton, Vinyals and Dean, "
        "*Distilling the Knowledge in a Neural Network*, 2015):"
    )
    st.latex(
        r"\mathcal{L} = \alpha\,T^2\,\mathrm{KL}\big(\mathrm{softmax}(z_t/T)\,\|\,"
        r"\mathrm{softmax}(z_s/T)\big) + (1-\alpha)\,\mathrm{CE}(y, z_s)"
    )
    st.caption("T² keeps the soft term's gradients the same size as T changes (the paper's §2).")
    cols = st.columns(2)
    temperature = cols[0].select_slider(
        "temperature T", (1.0, 2.0, 4.0, 8.0), DISTILL_DEFAULTS["temperature"], key=prefix + "dist_T"
    )
    alpha = cols[1].select_slider(
        "soft-term weight α", (0.25, 0.5, 0.75, 1.0), DISTILL_DEFAULTS["alpha"], key=prefix + "dist_alpha"
    )
    d = DISTILL_DEFAULTS
    st.markdown(
        f"**Live**: a {d['teacher_layers']}-block teacher of width {d['teacher_d']} trained "
        f"{d['teacher_steps_factor'] * d['steps']} steps on the built-in text, then per seed "
        f"({d['seeds']}) two {d['student_layers']}-block students of width {d['student_d']} "
        f"from the same initial weights, {d['steps']} steps on the same batches: one distilled, "
        f"one from scratch (CLI: `python -m llama_lab distill`)."
    )
    _live(
        "distill",
        "Distil",
        prefix,
        None,
        distill.page_settings(temperature, alpha),
        lambda progress: _distilled(temperature, alpha, _progress=progress),
    )
