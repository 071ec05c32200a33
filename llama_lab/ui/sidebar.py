"""The sidebar config builder shared by every page, and the page chrome (``setup_page``)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from ..config import CHOICES, FFN_RULES, LIMITS, MAX_BATCH, PRESETS, ConfigError
from ..config.grids import divisors
from ..errors import LabError
from ..units import escape_markdown
from .config_files import draw_load_save, draw_upload_only
from .family_fields import FIELD_GROUPS, draw_group, int_input
from .model_source import on_preset, on_preset_view
from .sliders import LabelShown, field_options, slider_beside, workload_options
from .state import (
    AS_DTYPE,
    BUILDER_KEYS,
    CONFIG_FIELDS,
    FROM_FILE,
    KEY_BATCH,
    KEY_BUILDER,
    KEY_CONFIG_ERROR,
    KEY_DTYPE,
    KEY_FFN_MULTIPLE_OF,
    KEY_FFN_MULTIPLIER,
    KEY_FFN_RULE,
    KEY_KV_DTYPE,
    KEY_LAST_CHANGED,
    KEY_LINK_ERRORS,
    KEY_MODEL_BASE,
    KEY_MODEL_NAME,
    KEY_PRESET,
    KEY_PRESET_VIEW,
    KEY_SEQ_LEN,
    KEY_SEQ_NOTE,
    KEY_STORED_QUANT,
    KEY_UPLOAD_ERROR,
    KEY_UPLOAD_NOTES,
    KEY_WEIGHT_DTYPE,
    LINK_NOTE,
    UPLOADED,
    Selection,
    config_from_values,
    dtype_names,
    error_field,
    field_key,
    file_weights,
    init_session,
    kv_dtype_names,
    kv_label,
    on_field_change,
    session,
    stored_format,
    sync_query_params,
    weight_dtype_names,
    widget_value,
)
from .widgets import show_error, show_warning


def sidebar_config() -> Selection | None:
    """Draw the config builder in the sidebar; the valid selection, or None when the values
    break a rule (the rule is shown next to the widget, and by ``config_error()``)."""
    init_session()
    state = session()
    values = {key: state[key] for key in BUILDER_KEYS}
    try:
        cfg, failure = config_from_values(values), None
    except LabError as exc:
        cfg, failure = None, exc
    error = None if failure is None else str(failure)
    state[KEY_CONFIG_ERROR] = error
    bad_field = (
        error_field(failure, state.get(KEY_LAST_CHANGED)) if isinstance(failure, ConfigError) else None
    )

    with st.sidebar:
        _draw_builder(values, error, bad_field)
        if cfg is not None:
            draw_load_save(cfg)
        else:
            draw_upload_only()
    state[KEY_BUILDER] = {key: state[key] for key in BUILDER_KEYS}
    if cfg is None:
        return None
    selection = Selection(
        cfg,
        state[KEY_SEQ_LEN],
        state[KEY_BATCH],
        state[KEY_DTYPE],
        state[KEY_PRESET],
        state.get(KEY_MODEL_NAME),
        stored_format(state[KEY_WEIGHT_DTYPE]),
        stored_format(state[KEY_KV_DTYPE]),
        file_weights(state),
    )
    sync_query_params(selection.query())
    return selection


def config_error() -> str | None:
    return session().get(KEY_CONFIG_ERROR)


def _draw_builder(values: dict[str, Any], error: str | None, bad_field: str | None) -> None:
    state = session()
    for message in state[KEY_LINK_ERRORS]:
        show_error(message)
    if state.get(KEY_MODEL_BASE) is not None:  # an uploaded model fills the fields
        state[KEY_PRESET_VIEW] = UPLOADED
        st.selectbox(
            "Preset",
            [UPLOADED, *PRESETS],
            key=KEY_PRESET_VIEW,
            on_change=on_preset_view,
            help="The fields hold the uploaded model; choosing a preset replaces it.",
        )
    else:
        st.selectbox(
            "Preset",
            list(PRESETS),
            key=KEY_PRESET,
            on_change=on_preset,
            help="Loads a published config; the fields below then edit it.",
        )
    _draw_model_name(values)
    for note in state[KEY_UPLOAD_NOTES]:
        show_warning(note)

    def after(name: str) -> None:
        if name == bad_field:
            show_error(error)
            st.caption(LINK_NOTE)

    if error and bad_field is None:
        show_error(error)
        st.caption(LINK_NOTE)
    # The first screen (1440×900): the preset, the main shape and the workload's T and B; every
    # other field in a collapsed group, opened where the rule a value breaks is shown.
    _draw_shape(values, after)
    _draw_workload(values)
    with st.expander(
        "More shape: FFN rule, vocabulary, max_seq_len", expanded=bad_field in MORE_SHAPE_FIELDS
    ):
        _draw_more_shape(values, after)
    with st.expander("Precision: compute dtype, weights, KV cache"):
        _draw_precision(values)
    with st.expander("Recipe (2017 ↔ LLaMA)", expanded=bad_field in RECIPE_FIELDS):
        _draw_recipe(values, after)
    for group in FIELD_GROUPS:  # the families' own fields (config.families)
        with st.expander(group.title, expanded=bad_field in group.names):
            draw_group(group, after)


def _draw_model_name(values: dict[str, Any]) -> None:
    """What the fields hold: the preset or the uploaded model (by its name), and the fields
    edited since."""
    state = session()
    name, base = state.get(KEY_MODEL_NAME), state.get(KEY_MODEL_BASE)
    if name and base:
        edited = [field for field in CONFIG_FIELDS if values[field_key(field)] != base[field_key(field)]]
        st.caption(
            (
                f"Edited from {escape_markdown(name)}: {', '.join(edited)}"
                if edited
                else f"Model: {escape_markdown(name)}"
            )
            + " (uploaded, not a preset)"
        )
        return
    preset = PRESETS[values[KEY_PRESET]]
    edited = [field for field in CONFIG_FIELDS if values[field_key(field)] != widget_value(preset, field)]
    if edited:
        st.caption(f"Edited from {values[KEY_PRESET]}: {', '.join(edited)}")


MORE_SHAPE_FIELDS = {"vocab_size", "max_seq_len"}
RECIPE_FIELDS = (set(CHOICES) - {name for group in FIELD_GROUPS for name in group.names}) | {
    "bias",
    "final_norm",
    "tie_embeddings",
    "embed_scale",
    "rope_theta",
    "norm_eps",
}


def _shape_slider(
    values: dict[str, Any],
    after,
    name: str,
    label: str,
    help: str | None = None,
    *,
    minimum: int = 1,
    disabled: bool = False,
) -> None:
    """Config field ``name`` as a slider over its valid values, the exact entry beside it."""
    slider_beside(
        field_key(name),
        label,
        field_options(name, values),
        lambda text, shown: int_input(name, text, minimum=minimum, disabled=disabled, label_visibility=shown),
        name,
        disabled=disabled,
        help=help,
    )
    after(name)


def _draw_shape(values: dict[str, Any], after) -> None:
    """The main shape: d_model, n_layers, n_heads, n_kv_heads and the FFN width."""
    _shape_slider(
        values,
        after,
        "d_model",
        "d_model (hidden size d)",
        "Multiples of n_heads (×2 with RoPE: an even head_dim), log-spaced.",
    )
    _shape_slider(values, after, "n_layers", "n_layers (blocks)")
    _shape_slider(
        values,
        after,
        "n_heads",
        "n_heads (query heads)",
        "Divisors of d_model; head_dim = d_model / n_heads.",
    )
    n_heads = values[field_key("n_heads")]
    current_kv = values[field_key("n_kv_heads")]
    options = divisors(n_heads) if 1 <= n_heads <= LIMITS["n_heads"] else []
    if current_kv not in options:
        options = sorted(options + [current_kv])

    def kv_entry(text: str, shown: LabelShown) -> None:
        st.selectbox(
            text,
            options,
            key=field_key("n_kv_heads"),
            label_visibility=shown,
            format_func=lambda kv: kv_label(n_heads, kv),
            on_change=on_field_change,
            args=("n_kv_heads",),
            help="Only divisors of n_heads: each KV head serves n_heads/n_kv_heads "
            "query heads. MHA = n_heads, MQA = 1, GQA in between.",
        )

    slider_beside(field_key("n_kv_heads"), "n_kv_heads (key/value heads)", options, kv_entry, "n_kv_heads")
    after("n_kv_heads")
    rule = values[KEY_FFN_RULE]
    _shape_slider(
        values,
        after,
        "ffn_hidden",
        "ffn_hidden (FFN inner size)",
        "Set by the FFN width rule under 'More shape' below; choose 'manual' there to set it here.",
        minimum=0,
        disabled=rule != "manual",
    )


def _draw_more_shape(values: dict[str, Any], after) -> None:
    """The FFN width rule, the vocabulary and max_seq_len."""
    st.radio(
        "FFN width rule",
        list(FFN_RULES),
        key=KEY_FFN_RULE,
        format_func=FFN_RULES.get,
        on_change=on_field_change,
        args=("ffn_hidden",),
    )
    rule = values[KEY_FFN_RULE]
    if rule in ("seed", "meta"):
        st.number_input(
            "round to a multiple of",
            min_value=1,
            max_value=65536,
            step=1,
            key=KEY_FFN_MULTIPLE_OF,
            on_change=on_field_change,
            args=("ffn_hidden",),
        )
    if rule == "meta":
        st.number_input(
            "ffn_dim_multiplier (0 = none)",
            min_value=0.0,
            max_value=8.0,
            step=0.1,
            key=KEY_FFN_MULTIPLIER,
            on_change=on_field_change,
            args=("ffn_hidden",),
        )
    _shape_slider(
        values,
        after,
        "vocab_size",
        "vocab_size",
        "Log-spaced, with the published tokenizers' sizes.",
        minimum=2,
    )
    _shape_slider(values, after, "max_seq_len", "max_seq_len", "Powers of two.")


def _draw_recipe(values: dict[str, Any], after) -> None:
    for name, label in (
        ("norm_position", "norm position"),
        ("norm_type", "norm type"),
        ("pos_encoding", "positions"),
        ("ffn_type", "FFN type"),
        ("init", "init"),
    ):
        st.selectbox(label, CHOICES[name], key=field_key(name), on_change=on_field_change, args=(name,))
        after(name)
    for name, label in (
        ("bias", "biases in linear layers"),
        ("final_norm", "final norm"),
        ("tie_embeddings", "tie lm_head to the embedding"),
        ("embed_scale", "embeddings × √d (2017 §3.4)"),
    ):
        st.toggle(label, key=field_key(name), on_change=on_field_change, args=(name,))
        after(name)
    st.number_input(
        "rope_theta (RoPE base)",
        min_value=0.0,
        step=10000.0,
        format="%.1f",
        key=field_key("rope_theta"),
        on_change=on_field_change,
        args=("rope_theta",),
        disabled=values[field_key("pos_encoding")] != "rope",
    )
    after("rope_theta")
    st.number_input(
        "norm_eps",
        min_value=0.0,
        max_value=1.0,
        step=1e-6,
        format="%.1e",
        key=field_key("norm_eps"),
        on_change=on_field_change,
        args=("norm_eps",),
    )
    after("norm_eps")


def _draw_workload(values: dict[str, Any]) -> None:
    """The workload's T and B."""
    max_seq = max(1, values[field_key("max_seq_len")])
    slider_beside(
        KEY_SEQ_LEN,
        "sequence length T",
        workload_options("seq_len", values[KEY_SEQ_LEN], max_seq),
        lambda text, shown: st.number_input(
            text,
            min_value=1,
            max_value=max_seq,
            step=1,
            key=KEY_SEQ_LEN,
            on_change=on_field_change,
            label_visibility=shown,
        ),
        help="Tokens per sequence for FLOPs, KV cache and memory (≤ max_seq_len); powers of two.",
    )
    note = session().get(KEY_SEQ_NOTE)
    if note and note[0] == values[KEY_SEQ_LEN]:
        st.caption("⚠️ " + note[1])
    else:
        session()[KEY_SEQ_NOTE] = None
    slider_beside(
        KEY_BATCH,
        "batch B",
        workload_options("batch", values[KEY_BATCH], MAX_BATCH),
        lambda text, shown: st.number_input(
            text,
            min_value=1,
            max_value=MAX_BATCH,
            step=1,
            key=KEY_BATCH,
            on_change=on_field_change,
            label_visibility=shown,
        ),
        help="Sequences per batch; powers of two.",
    )


def _draw_precision(values: dict[str, Any]) -> None:
    """The compute dtype and the formats the weights and the KV cache are stored in."""
    st.selectbox(
        "dtype (compute)",
        dtype_names(),
        key=KEY_DTYPE,
        on_change=on_field_change,
        help="What the matmuls and activations use; the weights and the KV cache are "
        "stored at it unless set below.",
    )
    dtype = values[KEY_DTYPE]
    from_file = session().get(KEY_STORED_QUANT)  # the uploaded file's quantization_config, if any

    def stored(value: str) -> str:
        if value == FROM_FILE and from_file is not None:
            return f"{FROM_FILE}: {from_file.label()}"
        return f"as dtype ({dtype})" if value == AS_DTYPE else value

    st.selectbox(
        "weights stored as",
        weight_dtype_names(from_file),
        key=KEY_WEIGHT_DTYPE,
        format_func=stored,
        on_change=on_field_change,
        help="int4 in groups of 128 inputs, int8 per output row, fp8 per tensor, each "
        "with its scales; embeddings, lm_head, norms and the router stay in bf16 "
        "(the Inference systems page changes these)."
        + (
            " From the file: the uploaded config.json's quantization_config, every tensor its "
            "checkpoint stores, byte for byte."
            if from_file is not None
            else ""
        ),
    )
    if from_file is not None and session()[KEY_WEIGHT_DTYPE] == FROM_FILE:
        st.caption("Weights as the file stores them: " + escape_markdown(from_file.describe()) + ".")
    st.selectbox(
        "KV cache stored as",
        kv_dtype_names(),
        key=KEY_KV_DTYPE,
        format_func=stored,
        on_change=on_field_change,
        help="int8 and int4 keep an fp16 scale per token and KV head.",
    )


def setup_page(title: str, intro: str, *, needs_config: bool = True) -> Selection | None:
    """Page chrome + sidebar. When the config is invalid and the page needs it, show the rule
    broken and stop the page there (nothing that depends on the config is drawn)."""
    st.set_page_config(page_title=f"{title} · LLaMA Lab", page_icon="🦙", layout="wide")
    selection = sidebar_config()
    st.title(title)
    upload_error = session().get(KEY_UPLOAD_ERROR)
    if upload_error:  # on the page itself, not only in the sidebar's expander
        show_error(
            f"The uploaded file was refused — {upload_error}. The model shown is still the previous one."
        )
    st.markdown(intro)
    if selection is None and needs_config:
        show_error(
            f"The configuration breaks a rule: {config_error()}. "
            f"Fix it in the sidebar (the field is marked there)."
        )
        st.caption(LINK_NOTE)
        st.stop()
    return selection
