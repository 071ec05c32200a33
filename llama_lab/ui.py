"""The Streamlit side of LLaMA Lab: the sidebar config builder shared by every page, the
session-state keys, the URL mirror, the list of pages, the cached wrappers around the package
and the way a live experiment is run (guards, job slot, progress, refusals shown with st.error).

This is the only module of the package that imports Streamlit. Pages call ``setup_page`` (or
``sidebar_config``) first; both initialise the session state themselves, so any page also runs
alone (``streamlit.testing.v1.AppTest``).

State model. Streamlit forgets a widget's value when the page that drew it is left (widget ids
include the page), so the builder keeps its own copy of every value under ``KEY_BUILDER`` and
writes it back into the widget keys at the top of every run. On a session's first run the
values come from the URL (``?preset=…&d_model=…&seq=…``); after every valid run the URL is
rewritten to the preset plus the fields that differ from it, so a link reproduces the view.
"""
from __future__ import annotations

import json
import re
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterator, Mapping, TypeVar

import streamlit as st

import pandas as pd

from . import analysis, claims, experiments, flop_check, hardware, jobs, plots, report
from . import experiment_plots as ep
from .config import (CHOICES, LIMITS, PRESETS, ConfigError, ModelConfig, coerce_field,
                     llama_ffn_hidden, parse_config_json, seed_ffn_hidden)

DEFAULT_PRESET = "seed-demo"
CONFIG_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ModelConfig))

# ---- session-state keys ------------------------------------------------------------------------
KEY_BUILDER = "llama_lab.builder"            # dict: every builder value; survives page switches
KEY_LINK_ERRORS = "llama_lab.link_errors"    # list[str]: bad URL values (cleared on any change)
KEY_UPLOAD_NOTES = "llama_lab.upload_notes"  # list[str]: what an uploaded config.json lost
KEY_UPLOAD_ERROR = "llama_lab.upload_error"  # str | None: why an upload was refused
KEY_CONFIG_ERROR = "llama_lab.config_error"  # str | None: the rule the current values break
KEY_LAST_CHANGED = "llama_lab.last_changed"  # str | None: the config field edited last

# This session's experiment results, one report.ExperimentEntry per kind of
# report.EXPERIMENT_TYPES: the experiment pages write them, the Report page includes them all.
EXPERIMENT_KEYS: dict[str, str] = {kind: report.experiment_state_key(kind)
                                   for kind in report.EXPERIMENT_TYPES}
KEY_GRADNORMS = EXPERIMENT_KEYS["gradnorms"]
KEY_DEPTH_SWEEP = EXPERIMENT_KEYS["depth_sweep"]
KEY_TRAINING = EXPERIMENT_KEYS["training"]        # Post-LN / Pre-LN × warmup (Gradient norms)
KEY_ABLATION = EXPERIMENT_KEYS["ablation"]        # a contrast of the seed's table (Architecture)
KEY_LIVE_PASS = EXPERIMENT_KEYS["live_pass"]
KEY_DECODE = EXPERIMENT_KEYS["decode"]

WIDGET_PREFIX = "llama_lab.w."
KEY_PRESET = WIDGET_PREFIX + "preset"
KEY_FFN_RULE = WIDGET_PREFIX + "ffn_rule"
KEY_FFN_MULTIPLE_OF = WIDGET_PREFIX + "ffn_multiple_of"
KEY_FFN_MULTIPLIER = WIDGET_PREFIX + "ffn_multiplier"
KEY_SEQ_LEN = WIDGET_PREFIX + "seq_len"
KEY_BATCH = WIDGET_PREFIX + "batch"
KEY_DTYPE = WIDGET_PREFIX + "dtype"
KEY_UPLOAD = WIDGET_PREFIX + "upload"


def field_key(name: str) -> str:
    """Session-state key of the widget that edits ModelConfig field ``name``."""
    return WIDGET_PREFIX + name


BUILDER_KEYS: tuple[str, ...] = (KEY_PRESET, *map(field_key, CONFIG_FIELDS), KEY_FFN_RULE,
                                 KEY_FFN_MULTIPLE_OF, KEY_FFN_MULTIPLIER, KEY_SEQ_LEN,
                                 KEY_BATCH, KEY_DTYPE)

# URL query keys besides the preset and the config fields.
QUERY_PRESET, QUERY_SEQ, QUERY_BATCH, QUERY_DTYPE = "preset", "seq", "batch", "dtype"
QUERY_KEYS: tuple[str, ...] = (QUERY_PRESET, *CONFIG_FIELDS, QUERY_SEQ, QUERY_BATCH, QUERY_DTYPE)

MAX_BATCH = 65_536
DEFAULT_DTYPE = "bf16"
# While the values break a rule the URL is not rewritten: it keeps the last valid view.
LINK_NOTE = "The link in the address bar still shows the last valid model."


# ---- the pages (app.py registers them with st.navigation; home.py links to them) ---------------
@dataclass(frozen=True)
class AppPage:
    path: str              # relative to the entry point's folder; st.Page titles it from the name
    label: str             # the home page's link text
    description: str


HOME_PAGE, HOME_TITLE, HOME_ICON = "home.py", "Home", "🦙"
PAGES: tuple[AppPage, ...] = (
    AppPage("pages/1_Parameters_and_FLOPs.py", "Parameters & FLOPs",
            "where the parameters and FLOPs go, FLOPs vs sequence length, fvcore cross-check"),
    AppPage("pages/2_KV_cache_and_attention.py", "KV cache & attention",
            "MHA vs GQA vs MQA: cache bytes, what fits a GPU, the decode roofline"),
    AppPage("pages/3_Gradient_norms.py", "Gradient norms",
            "Post-LN vs Pre-LN, per-layer gradient norms measured"),
    AppPage("pages/4_Live_pass.py", "Live pass",
            "one real forward/backward: loss, time, memory against the predictions"),
    AppPage("pages/5_Architecture_comparison.py", "Architecture comparison",
            "the seed's 2017-vs-LLaMA table, each row computed on your config"),
    AppPage("pages/6_Seed_claims.py", "Seed claims",
            "every number the tutorial quotes, recomputed, with ✓ or ✗"),
    AppPage("pages/7_Report.py", "Report", "download everything as HTML, JSON, CSV or Markdown"),
)


# ---- the FFN width rule -------------------------------------------------------------------------
FFN_RULES: dict[str, str] = {
    "seed": "seed: ⌊8/3·d⌋ (to a multiple)",
    "meta": "Meta: 2/3·4d (×multiplier), rounded up",
    "classic": "2017: 4·d",
    "manual": "manual",
}
# Rounding and multipliers of the published configs, tried in order when a preset or an upload
# is read, so that moving d_model afterwards keeps following the model's own rule.
_SEED_MULTIPLES = (1, 64)                       # the demo's 1365; the seed code's int(8d/3/64)·64
_META_ROUNDINGS = ((256, None), (1024, 1.3), (4096, 1.3), (1024, 1.2), (256, 1.3))
_CLASSIC_FFN_FACTOR = 4                         # Vaswani et al. 2017: d_ff = 2048 = 4·512


def ffn_from_rule(rule: str, d_model: int, multiple_of: int,
                  multiplier: float | None) -> int | None:
    """The FFN width the rule gives (None for ``manual``)."""
    if rule == "seed":
        return seed_ffn_hidden(d_model, multiple_of=multiple_of)
    if rule == "meta":
        return llama_ffn_hidden(d_model, multiple_of=multiple_of, ffn_dim_multiplier=multiplier)
    if rule == "classic":
        return _CLASSIC_FFN_FACTOR * d_model
    return None


def detect_ffn_rule(cfg: ModelConfig) -> tuple[str, int, float]:
    """(rule, multiple_of, multiplier — 0 for none) that reproduces ``cfg.ffn_hidden``; a
    ReLU/GELU FFN is tried against the 2017 rule first."""
    classic = ffn_from_rule("classic", cfg.d_model, 1, None) == cfg.ffn_hidden
    if classic and cfg.ffn_type != "swiglu":
        return "classic", 1, 0.0
    for multiple_of in _SEED_MULTIPLES:
        if seed_ffn_hidden(cfg.d_model, multiple_of=multiple_of) == cfg.ffn_hidden:
            return "seed", multiple_of, 0.0
    for multiple_of, multiplier in _META_ROUNDINGS:
        if llama_ffn_hidden(cfg.d_model, multiple_of=multiple_of,
                            ffn_dim_multiplier=multiplier) == cfg.ffn_hidden:
            return "meta", multiple_of, multiplier or 0.0
    if classic:
        return "classic", 1, 0.0
    return "manual", 1, 0.0


# ---- what the pages get -------------------------------------------------------------------------
@dataclass(frozen=True)
class Selection:
    """The sidebar's current, valid choice: a config and the workload it is analysed at."""
    cfg: ModelConfig
    seq_len: int
    batch: int
    dtype: str
    preset: str

    def query(self) -> dict[str, str]:
        return query_for(self.preset, self.cfg, self.seq_len, self.batch, self.dtype)


def dtype_names() -> list[str]:
    return list(hardware.DTYPE_BYTES)


def dtype_bytes(dtype: str) -> float:
    return hardware.DTYPE_BYTES[dtype]


def kv_label(n_heads: int, n_kv_heads: int) -> str:
    """Label of one n_kv_heads choice, e.g. ``2 · GQA (4 query heads per KV head)``."""
    if n_heads % n_kv_heads:
        return f"{n_kv_heads} · ✗ does not divide n_heads={n_heads}"
    if n_kv_heads == n_heads:
        return f"{n_kv_heads} · MHA (one KV head per query head)"
    if n_kv_heads == 1:
        return f"{n_kv_heads} · MQA (all {n_heads} query heads share it)"
    return f"{n_kv_heads} · GQA ({n_heads // n_kv_heads} query heads per KV head)"


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


# ---- URL <-> values -----------------------------------------------------------------------------
def _query_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def query_for(preset: str, cfg: ModelConfig, seq_len: int, batch: int,
              dtype: str) -> dict[str, str]:
    """The URL query that reproduces this view: the preset, the fields that differ from it, and
    the workload."""
    base = PRESETS[preset]
    query = {QUERY_PRESET: preset}
    for name in CONFIG_FIELDS:
        if getattr(cfg, name) != getattr(base, name):
            query[name] = _query_text(getattr(cfg, name))
    query.update({QUERY_SEQ: str(seq_len), QUERY_BATCH: str(batch), QUERY_DTYPE: dtype})
    return query


def _positive_int(name: str, raw: str, upper: int) -> int:
    try:
        value = int(str(raw).replace("_", ""))
    except ValueError:
        raise ConfigError(f"{name}={raw!r} must be an integer") from None
    if not 1 <= value <= upper:
        raise ConfigError(f"{name}={value} must be between 1 and {upper:,}")
    return value


def values_from_query(query: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Builder values read from a URL query, plus one message per value that was refused.
    A bad config falls back to the preset as a whole; a bad workload value to its default."""
    errors: list[str] = []
    preset = query.get(QUERY_PRESET, DEFAULT_PRESET)
    if preset not in PRESETS:
        errors.append(f"Link: unknown preset {preset!r}; showing {DEFAULT_PRESET!r} instead.")
        preset = DEFAULT_PRESET
    cfg = PRESETS[preset]
    changes = {name: query[name] for name in CONFIG_FIELDS if name in query}
    if changes:
        try:
            cfg = cfg.replace(**{name: coerce_field(name, raw) for name, raw in changes.items()})
        except ConfigError as exc:
            errors.append(f"Link: {exc}. Showing preset {preset!r} instead.")
            cfg = PRESETS[preset]
    values = values_for_config(preset, cfg)
    workload = ((QUERY_SEQ, KEY_SEQ_LEN, lambda raw: _positive_int("seq", raw, cfg.max_seq_len)),
                (QUERY_BATCH, KEY_BATCH, lambda raw: _positive_int("batch", raw, MAX_BATCH)),
                (QUERY_DTYPE, KEY_DTYPE, _checked_dtype))
    for query_key, state_key, parse in workload:
        if query_key in query:
            try:
                values[state_key] = parse(query[query_key])
            except ConfigError as exc:
                errors.append(f"Link: {exc}; using {values[state_key]} instead.")
    return values, errors


def _checked_dtype(raw: str) -> str:
    if raw not in hardware.DTYPE_BYTES:
        raise ConfigError(f"dtype={raw!r} must be one of {', '.join(hardware.DTYPE_BYTES)}")
    return raw


def values_for_config(preset: str, cfg: ModelConfig, *, seq_len: int | None = None,
                      batch: int = 1, dtype: str = DEFAULT_DTYPE) -> dict[str, Any]:
    """Every builder value (keyed by session-state key) for ``cfg``."""
    rule, multiple_of, multiplier = detect_ffn_rule(cfg)
    values = {KEY_PRESET: preset, KEY_FFN_RULE: rule, KEY_FFN_MULTIPLE_OF: multiple_of,
              KEY_FFN_MULTIPLIER: multiplier, KEY_BATCH: batch, KEY_DTYPE: dtype,
              KEY_SEQ_LEN: min(seq_len or cfg.max_seq_len, cfg.max_seq_len)}
    values.update({field_key(name): getattr(cfg, name) for name in CONFIG_FIELDS})
    return values


def config_from_values(values: dict[str, Any]) -> ModelConfig:
    """Build the config the builder values describe; ConfigError names the rule broken."""
    return ModelConfig(**{name: values[field_key(name)] for name in CONFIG_FIELDS})


_WORD = re.compile(r"[a-z_]+")
_ERROR_FIELD_ALIASES = {"head_dim": "n_heads"}    # head_dim = d_model / n_heads


def error_field(message: str, prefer: str | None = None) -> str | None:
    """The builder field to show a ConfigError next to: ``prefer`` (the field edited last) when
    the message names it, else the first field the message names."""
    named = [_ERROR_FIELD_ALIASES.get(word, word) for word in _WORD.findall(message)]
    named = [name for name in named if name in CONFIG_FIELDS]
    if prefer in named:
        return prefer
    return named[0] if named else None


# ---- downloads ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Download:
    label: str
    file_name: str
    data: bytes
    mime: str = "application/json"


def config_downloads(cfg: ModelConfig) -> tuple[list[Download], str | None]:
    """The current config as our JSON and, for LLaMA-style configs, as a HF config.json; the
    second item says why the HF file is not offered."""
    ours = Download("Config (LLaMA Lab JSON)", "llama_lab_config.json",
                    json.dumps(cfg.to_dict(), indent=2).encode("utf-8"))
    try:
        hf = cfg.to_hf_config()
    except ConfigError as exc:
        return [ours], str(exc)
    return [ours, Download("HF config.json", "config.json",
                           json.dumps(hf, indent=2).encode("utf-8"))], None


# ---- state handling -----------------------------------------------------------------------------
def _state() -> Any:
    return st.session_state


def _init_state() -> None:
    """First run of a session: values from the URL. Later runs: put the builder's values back
    into the widget keys (a page switch drops them) and derive what follows from others."""
    state = _state()
    if KEY_BUILDER not in state:
        values, errors = values_from_query(dict(st.query_params.to_dict()))
        state[KEY_BUILDER] = values
        state[KEY_LINK_ERRORS] = errors
        state[KEY_UPLOAD_NOTES] = []
        state[KEY_UPLOAD_ERROR] = None
    store = state[KEY_BUILDER]
    for key in BUILDER_KEYS:
        state[key] = state[key] if key in state else store[key]
    _apply_derived(state)


def _apply_derived(state: Any) -> None:
    """The FFN width follows its rule; the sequence length stays within max_seq_len."""
    width = ffn_from_rule(state[KEY_FFN_RULE], state[field_key("d_model")],
                          state[KEY_FFN_MULTIPLE_OF], state[KEY_FFN_MULTIPLIER] or None)
    if width is not None:
        state[field_key("ffn_hidden")] = width
    state[KEY_SEQ_LEN] = max(1, min(state[KEY_SEQ_LEN], state[field_key("max_seq_len")]))


def _load_values(values: dict[str, Any]) -> None:
    """Replace every builder value (from a callback: before the widgets are drawn)."""
    state = _state()
    for key in BUILDER_KEYS:
        state[key] = values[key]
    state[KEY_BUILDER] = dict(values)


def _on_change(name: str | None = None) -> None:
    state = _state()
    state[KEY_LINK_ERRORS] = []
    if name is not None:
        state[KEY_LAST_CHANGED] = name


def _on_preset() -> None:
    state = _state()
    preset = state[KEY_PRESET]
    _load_values(values_for_config(preset, PRESETS[preset], batch=state[KEY_BATCH],
                                   dtype=state[KEY_DTYPE]))
    state[KEY_LINK_ERRORS], state[KEY_UPLOAD_NOTES], state[KEY_UPLOAD_ERROR] = [], [], None
    state[KEY_LAST_CHANGED] = None


def _on_upload() -> None:
    state = _state()
    uploaded = state.get(KEY_UPLOAD)
    if uploaded is None:
        return
    state[KEY_LINK_ERRORS] = []
    try:
        text = uploaded.getvalue().decode("utf-8")
        cfg, notes = parse_config_json(text, source=uploaded.name)
    except UnicodeDecodeError:
        state[KEY_UPLOAD_ERROR] = f"{uploaded.name} is not UTF-8 text"
        return
    except ConfigError as exc:
        state[KEY_UPLOAD_ERROR] = f"{uploaded.name}: {exc}"
        return
    _load_values(values_for_config(state[KEY_PRESET], cfg, seq_len=state[KEY_SEQ_LEN],
                                   batch=state[KEY_BATCH], dtype=state[KEY_DTYPE]))
    state[KEY_UPLOAD_NOTES] = [f"{uploaded.name}: {note}" for note in notes]
    state[KEY_UPLOAD_ERROR], state[KEY_LAST_CHANGED] = None, None


def _sync_query_params(query: dict[str, str]) -> None:
    """Mirror the view in the URL, touching only the keys the builder owns."""
    current = st.query_params.to_dict()
    for key in QUERY_KEYS:
        if key in query and current.get(key) != query[key]:
            st.query_params[key] = query[key]
        elif key not in query and key in current:
            del st.query_params[key]


# ---- the sidebar --------------------------------------------------------------------------------
def sidebar_config() -> Selection | None:
    """Draw the config builder in the sidebar; the valid selection, or None when the values
    break a rule (the rule is shown next to the widget, and by ``config_error()``)."""
    _init_state()
    state = _state()
    values = {key: state[key] for key in BUILDER_KEYS}
    try:
        cfg = config_from_values(values)
        error = None
    except ConfigError as exc:
        cfg, error = None, str(exc)
    state[KEY_CONFIG_ERROR] = error
    bad_field = error_field(error, state.get(KEY_LAST_CHANGED)) if error else None

    with st.sidebar:
        _draw_builder(values, error, bad_field)
        if cfg is not None:
            _draw_load_save(cfg)
        else:
            _draw_upload_only()
    state[KEY_BUILDER] = {key: state[key] for key in BUILDER_KEYS}
    if cfg is None:
        return None
    selection = Selection(cfg, state[KEY_SEQ_LEN], state[KEY_BATCH], state[KEY_DTYPE],
                          state[KEY_PRESET])
    _sync_query_params(selection.query())
    return selection


def config_error() -> str | None:
    return _state().get(KEY_CONFIG_ERROR)


def _draw_builder(values: dict[str, Any], error: str | None, bad_field: str | None) -> None:
    state = _state()
    st.header("🦙 Model")
    for message in state[KEY_LINK_ERRORS]:
        st.error(message)
    st.selectbox("Preset", list(PRESETS), key=KEY_PRESET, on_change=_on_preset,
                 help="Loads a published config; the fields below then edit it.")
    base = PRESETS[values[KEY_PRESET]]
    edited = [name for name in CONFIG_FIELDS if values[field_key(name)] != getattr(base, name)]
    if edited:
        st.caption(f"Edited from {values[KEY_PRESET]}: {', '.join(edited)}")
    for note in state[KEY_UPLOAD_NOTES]:
        st.warning(note)

    def after(name: str) -> None:
        if name == bad_field:
            st.error(error)
            st.caption(LINK_NOTE)

    shape_fields = {"vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_hidden",
                    "max_seq_len"}
    if error and bad_field is None:
        st.error(error)
        st.caption(LINK_NOTE)
    with st.expander("Shape", expanded=bad_field in shape_fields or bad_field is None):
        _int_input("d_model", "d_model (hidden size d)", step=64)
        after("d_model")
        _int_input("n_layers", "n_layers (blocks)")
        after("n_layers")
        _int_input("n_heads", "n_heads (query heads)",
                   help="Must divide d_model; head_dim = d_model / n_heads.")
        after("n_heads")
        n_heads = values[field_key("n_heads")]
        current_kv = values[field_key("n_kv_heads")]
        options = divisors(n_heads) if 1 <= n_heads <= LIMITS["n_heads"] else []
        if current_kv not in options:
            options = sorted(options + [current_kv])
        st.selectbox("n_kv_heads (key/value heads)", options, key=field_key("n_kv_heads"),
                     format_func=lambda kv: kv_label(n_heads, kv), on_change=_on_change,
                     args=("n_kv_heads",),
                     help="Only divisors of n_heads: each KV head serves n_heads/n_kv_heads "
                          "query heads. MHA = n_heads, MQA = 1, GQA in between.")
        after("n_kv_heads")
        st.radio("FFN width rule", list(FFN_RULES), key=KEY_FFN_RULE, format_func=FFN_RULES.get,
                 on_change=_on_change, args=("ffn_hidden",))
        rule = values[KEY_FFN_RULE]
        if rule in ("seed", "meta"):
            st.number_input("round to a multiple of", min_value=1, max_value=65536, step=1,
                            key=KEY_FFN_MULTIPLE_OF, on_change=_on_change,
                            args=("ffn_hidden",))
        if rule == "meta":
            st.number_input("ffn_dim_multiplier (0 = none)", min_value=0.0, max_value=8.0,
                            step=0.1, key=KEY_FFN_MULTIPLIER, on_change=_on_change,
                            args=("ffn_hidden",))
        _int_input("ffn_hidden", "ffn_hidden (FFN inner size)", disabled=rule != "manual",
                   minimum=0, help="Set by the rule above; choose 'manual' to type it.")
        after("ffn_hidden")
        _int_input("vocab_size", "vocab_size", minimum=2)
        after("vocab_size")
        _int_input("max_seq_len", "max_seq_len")
        after("max_seq_len")

    recipe_fields = set(CHOICES) | {"bias", "final_norm", "tie_embeddings", "rope_theta",
                                    "norm_eps"}
    with st.expander("Recipe (2017 ↔ LLaMA)", expanded=bad_field in recipe_fields):
        for name, label in (("norm_position", "norm position"), ("norm_type", "norm type"),
                            ("pos_encoding", "positions"), ("ffn_type", "FFN type"),
                            ("init", "init")):
            st.selectbox(label, CHOICES[name], key=field_key(name), on_change=_on_change,
                         args=(name,))
            after(name)
        for name, label in (("bias", "biases in linear layers"), ("final_norm", "final norm"),
                            ("tie_embeddings", "tie lm_head to the embedding")):
            st.toggle(label, key=field_key(name), on_change=_on_change, args=(name,))
            after(name)
        st.number_input("rope_theta (RoPE base)", min_value=0.0, step=10000.0, format="%.1f",
                        key=field_key("rope_theta"), on_change=_on_change,
                        args=("rope_theta",),
                        disabled=values[field_key("pos_encoding")] != "rope")
        after("rope_theta")
        st.number_input("norm_eps", min_value=0.0, max_value=1.0, step=1e-6, format="%.1e",
                        key=field_key("norm_eps"), on_change=_on_change, args=("norm_eps",))
        after("norm_eps")

    st.subheader("Workload")
    max_seq = max(1, values[field_key("max_seq_len")])
    st.number_input("sequence length T", min_value=1, max_value=max_seq, step=1,
                    key=KEY_SEQ_LEN, on_change=_on_change,
                    help="Tokens per sequence for FLOPs, KV cache and memory (≤ max_seq_len).")
    st.number_input("batch B", min_value=1, max_value=MAX_BATCH, step=1, key=KEY_BATCH,
                    on_change=_on_change)
    st.selectbox("dtype (weights, KV cache)", dtype_names(), key=KEY_DTYPE, on_change=_on_change)


def _int_input(name: str, label: str, *, step: int = 1, minimum: int = 1,
               disabled: bool = False, help: str | None = None) -> None:
    """No upper bound on the widget: ModelConfig refuses sizes beyond LIMITS with a message,
    shown next to the field, instead of the widget clamping silently."""
    st.number_input(label, min_value=minimum, step=step, key=field_key(name),
                    on_change=_on_change, args=(name,), disabled=disabled, help=help)


def _draw_upload_only() -> None:
    with st.expander("Load / save config", expanded=True):
        _draw_uploader()


def _draw_uploader() -> None:
    st.file_uploader("Upload a config.json (Hugging Face or LLaMA Lab)", type=["json"],
                     key=KEY_UPLOAD, on_change=_on_upload)
    upload_error = _state().get(KEY_UPLOAD_ERROR)
    if upload_error:
        st.error(upload_error)


def _draw_load_save(cfg: ModelConfig) -> None:
    with st.expander("Load / save config", expanded=bool(_state().get(KEY_UPLOAD_ERROR))):
        _draw_uploader()
        downloads, hf_refusal = config_downloads(cfg)
        for item in downloads:
            st.download_button(item.label, data=item.data, file_name=item.file_name,
                               mime=item.mime, on_click="ignore",
                               key=WIDGET_PREFIX + item.file_name)
        if hf_refusal:
            st.caption(f"No HF config.json: {hf_refusal}")


def setup_page(title: str, intro: str, *, needs_config: bool = True) -> Selection | None:
    """Page chrome + sidebar. When the config is invalid and the page needs it, show the rule
    broken and stop the page there (nothing that depends on the config is drawn)."""
    st.set_page_config(page_title=f"{title} · LLaMA Lab", page_icon="🦙", layout="wide")
    selection = sidebar_config()
    st.title(title)
    st.markdown(intro)
    if selection is None and needs_config:
        st.error(f"The configuration breaks a rule: {config_error()}. "
                 f"Fix it in the sidebar (the field is marked there).")
        st.caption(LINK_NOTE)
        st.stop()
    return selection


# ---- formatting ---------------------------------------------------------------------------------
# One implementation each, in llama_lab.plots (the report and the tables use them too).
human_count, human_params, human_bytes = plots.human_count, plots.human_params, plots.human_bytes


def show_table(frame: pd.DataFrame | Mapping[str, Any], **kwargs: Any) -> None:
    """st.dataframe without the index, of ``plots.display_frame(frame)``: counts beyond int64
    (FLOPs and bytes at the limits) would stop Arrow's conversion with a traceback."""
    st.dataframe(plots.display_frame(pd.DataFrame(frame)), hide_index=True, **kwargs)


sweep_lengths = plots.sweep_lengths


# ---- cached wrappers (keyed on the frozen config and plain arguments) ---------------------------
@st.cache_data(max_entries=256, show_spinner=False)
def param_count(cfg: ModelConfig) -> analysis.ParamCount:
    return analysis.count_params(cfg)


@st.cache_data(max_entries=256, show_spinner=False)
def flop_count(cfg: ModelConfig, seq_len: int, batch: int) -> analysis.FlopCount:
    return analysis.count_flops(cfg, seq_len, batch)


@st.cache_data(max_entries=64, show_spinner=False)
def flops_sweep(cfg: ModelConfig, seq_lens: tuple[int, ...], batch: int) -> list:
    return [analysis.count_flops(cfg, seq_len, batch) for seq_len in seq_lens]


@st.cache_data(max_entries=256, show_spinner=False)
def scores_crossover(cfg: ModelConfig) -> int | None:
    return analysis.scores_overtake_ffn_at(cfg)


@st.cache_data(max_entries=256, show_spinner=False)
def kv_report(cfg: ModelConfig, seq_len: int, batch: int, dtype: str) -> analysis.KVCacheReport:
    return analysis.kv_cache(cfg, seq_len, batch, dtype)


@st.cache_data(max_entries=128, show_spinner=False)
def kv_fit(cfg: ModelConfig, gpu: hardware.GPU, seq_len: int, batch: int,
           dtype: str) -> pd.DataFrame:
    return plots.kv_fit_frame(cfg, gpu, seq_len, batch, dtype)


@st.cache_data(max_entries=128, show_spinner=False)
def kv_memory_curve(cfg: ModelConfig, context_lens: tuple[int, ...], batch: int,
                    dtype: str) -> pd.DataFrame:
    return plots.kv_memory_curve_frame(cfg, context_lens, batch, dtype)


@st.cache_data(max_entries=128, show_spinner=False)
def roofline_points(cfg: ModelConfig, gpu: hardware.GPU, batches: tuple[int, ...],
                    context_len: int, dtype: str) -> pd.DataFrame:
    return plots.roofline_points(cfg, gpu, batches, context_len, dtype)


@st.cache_data(max_entries=64, show_spinner=False)
def fvcore_check(cfg: ModelConfig, seq_len: int, batch: int) -> flop_check.FvcoreCheck:
    return flop_check.fvcore_check(cfg, seq_len, batch, method="scaled")


def fvcore_or_error(cfg: ModelConfig, seq_len: int, batch: int) -> flop_check.FvcoreCheck | None:
    """``fvcore_check`` under a spinner; a size torch cannot trace — even on the meta device a
    tensor may not hold 2⁶³ elements, and B·H·T² scores reach that first — is shown with
    st.error (flop_check says why) and gives None."""
    try:
        with st.spinner("Tracing with torch.jit …"):
            return fvcore_check(cfg, seq_len, batch)
    except ConfigError as exc:
        st.error(str(exc))
        return None


@st.cache_data(max_entries=1, show_spinner=False)
def seed_claims() -> list:
    return claims.seed_claims()


@st.cache_data(max_entries=128, show_spinner=False)
def architecture(cfg: ModelConfig, seq_len: int, batch: int,
                 dtype: str) -> claims.ArchitectureComparison:
    return claims.architecture_comparison(cfg, seq_len, batch, dtype)


@contextmanager
def exclusive_run(what: str) -> Iterator[None]:
    """Hold this process's experiment slot (llama_lab.jobs) for the block, so sessions running
    at once take turns instead of oversubscribing the cores or the GPU. While another session's
    run holds it, the page shows a visible waiting state."""
    notice = st.empty()

    def on_wait(n_running: int) -> None:
        notice.info(f"⏳ Waiting: {n_running} other run(s) are using this machine; {what} starts "
                    f"as soon as they finish.")
    try:
        with jobs.LIMITER.slot(on_wait=on_wait):
            notice.empty()
            yield
    finally:
        notice.empty()


@st.cache_data(max_entries=16, show_spinner=False)
def ablation_runs(kind: str, train_cfg: ModelConfig, steps: int, lr: float, warmup_steps: int,
                  seq_len: int, batch: int, _progress: Callable[[float, str], None] | None = None
                  ) -> experiments.RunComparison:
    """Short training runs of one contrast of the seed's table (same data, seed and batches).
    ``_progress`` is not part of the cache key."""
    specs = experiments.ablation_specs(kind, train_cfg, lr, warmup_steps)
    return experiments.compare_runs(specs, steps, seq_len=seq_len, batch=batch, device="cpu",
                                    progress=_progress)


# ---- live experiments: size, guards, the run itself, where results are kept --------------------
CPU_FLOP_BUDGET = 3e12   # ≈ a minute on two busy cores at ~50 GFLOP/s: live runs stay interactive
STALE_NOTE = "These results are from earlier choices; run again to update them."
Result = TypeVar("Result")
Progress = Callable[[float, str], None]


def set_defaults(prefix: str, **values: Any) -> None:
    """A page's initial widget values, under ``prefix + name`` (kept once they are changed)."""
    for name, value in values.items():
        _state().setdefault(prefix + name, value)


def live_config(cfg: ModelConfig, n_layers: int, d_model: int = claims.TRAINING_SHAPE["d_model"],
                seq_len: int = 0) -> ModelConfig:
    """``cfg``'s recipe (norms, positions, FFN type, biases, init, KV sharing) at a size that
    runs live: claims.small_training_config at the given width (4 heads, byte-level vocabulary
    256, the recipe's FFN rule), then the given depth and room for ``seq_len`` tokens."""
    small = claims.small_training_config(cfg, d_model=d_model)
    return small.replace(n_layers=n_layers, max_seq_len=max(seq_len, small.max_seq_len))


def check_cpu_budget(flops: float, device: str, what: str, hint: str) -> None:
    """Refuse (ExperimentError) a run of more than CPU_FLOP_BUDGET FLOPs on the CPU."""
    if experiments.pick_device(device).type == "cpu" and flops > CPU_FLOP_BUDGET:
        raise experiments.ExperimentError(
            f"{what} needs about {flops / 1e12:.1f} TFLOP; live runs on the CPU are limited to "
            f"{CPU_FLOP_BUDGET / 1e12:.0f} TFLOP (about a minute); {hint}")


def guard(run_cfg: ModelConfig, seq_len: int, batch: int, device: str, *, passes: float,
          what: str, hint: str, dtype: str = "fp32") -> None:
    """experiments' memory guard (a training step of ``run_cfg`` at B × T in ``dtype``), then
    the CPU budget for ``passes`` training steps (3 × forward FLOPs each)."""
    experiments.check_memory(experiments.training_bytes_needed(run_cfg, seq_len, batch, dtype),
                             experiments.pick_device(device), what)
    check_cpu_budget(passes * analysis.count_flops(run_cfg, seq_len, batch).training_step,
                     device, what, hint)


def run_with_status(label: str, work: Callable[[Progress], Result],
                    what: str | None = None) -> Result | None:
    """Run ``work(progress)`` in this process's experiment slot (``exclusive_run``), inside
    st.status with a progress bar. A refusal — a guard, a bad input, no slot free — is shown
    with st.error and gives None."""
    with st.status(label, expanded=True) as status:
        bar = st.progress(0.0, text="starting …")

        def progress(fraction: float, text: str) -> None:
            bar.progress(min(1.0, max(0.0, fraction)), text=text)
        try:
            with exclusive_run(what or label):
                result = work(progress)
        except (experiments.ExperimentError, ConfigError, jobs.BusyError) as exc:
            status.update(label=f"{label}: refused", state="error")
            st.error(str(exc))
            return None
        status.update(label=f"{label}: done", state="complete", expanded=False)
    return result


def keep_experiment(kind: str, result: Any, config: ModelConfig, settings: Mapping[str, Any],
                    *also_under: str) -> report.ExperimentEntry:
    """Store a result where the Report page collects it (and under the keys ``also_under``)."""
    entry = report.ExperimentEntry(kind, result, config, dict(settings))
    for key in (EXPERIMENT_KEYS[kind], *also_under):
        _state()[key] = entry
    return entry


def session_experiments() -> dict[str, report.ExperimentEntry]:
    """This session's experiment results, kind → entry, in report.EXPERIMENT_TYPES order."""
    state = _state()
    return {kind: state[key] for kind, key in EXPERIMENT_KEYS.items() if key in state}


def is_stale(entry: report.ExperimentEntry, config: ModelConfig,
             settings: Mapping[str, Any]) -> bool:
    """Whether ``entry`` ran on another config, or with other values of ``settings``' keys."""
    return entry.config != config or any(entry.settings.get(name) != value
                                         for name, value in settings.items())


def show_experiment(key: str, config: ModelConfig, settings: Mapping[str, Any],
                    prefix: str) -> None:
    """Draw the result stored under ``key``, if any, after a note when it is stale for the
    current ``config`` and ``settings``; ``prefix`` starts the keys of its charts."""
    entry = _state().get(key)
    if entry is None:
        return
    if is_stale(entry, config, settings):
        st.caption(STALE_NOTE)
    _PANELS[entry.kind](entry, prefix)


# ---- result panels (one per experiment kind, drawn by show_experiment) -------------------------
def _gradnorms_panel(entry: report.ExperimentEntry, prefix: str) -> None:
    result = entry.result
    cols = st.columns(4)
    for col, arm in zip(cols[:2], (result.post, result.pre)):
        col.metric(f"{ep.NORM_LABELS[arm.norm_position]} loss", f"{arm.loss:.4f}")
    for col, arm in zip(cols[2:], (result.post, result.pre)):
        first, last = arm.residual_grad_norm[0], arm.residual_grad_norm[-1]
        col.metric(f"{ep.NORM_LABELS[arm.norm_position]} ‖∂L/∂x₀‖ ÷ ‖∂L/∂x_last‖",
                   f"{first / last:.3g}",
                   help="> 1: the gradient grows towards the input; < 1: it shrinks")
    st.plotly_chart(ep.gradnorm_profile(result), key=prefix + "chart_grad")
    st.markdown("**Per parameter group** (‖∇‖ of each group in each block)")
    show_table(ep.group_table(result), width="stretch")
    with st.expander("Per-block table and summary"):
        show_table(ep.gradnorm_summary(result), width="stretch")
        show_table(result.to_frame(), width="stretch")


def _depth_sweep_panel(entry: report.ExperimentEntry, prefix: str) -> None:
    result = entry.result
    cols = st.columns(2)
    cols[0].metric("Post-LN fitted slope", f"{result.post_slope:+.3f}", "theory 0",
                   delta_color="off")
    cols[1].metric("Pre-LN fitted slope", f"{result.pre_slope:+.3f}", "theory −0.5",
                   delta_color="off")
    st.plotly_chart(ep.depth_sweep_figure(result), key=prefix + "chart_sweep")
    show_table(result.to_frame())


def _training_panel(entry: report.ExperimentEntry, prefix: str) -> None:
    comparison = entry.result
    st.caption(f"Data: {entry.settings['data']}.")
    for run in comparison.runs.values():
        if run.diverged:
            st.warning(f"{run.label} diverged: {run.divergence_reason}. Hint: {run.hint}.")
    st.plotly_chart(ep.training_curves(comparison), key=prefix + "chart_loss")
    st.plotly_chart(ep.training_heatmaps(comparison), key=prefix + "chart_heat")
    show_table(comparison.summary_frame()[["label", "steps_run", "first_loss", "final_loss",
                                           "final_val_loss", "diverged", "wall_s",
                                           "tokens_per_s"]], width="stretch")
    st.markdown("**Logits after training**, on a validation batch, with and without the final "
                "norm (the seed's “forgot the final norm” bug):")
    show_table(ep.run_logits_table(comparison), width="stretch")


def _live_pass_panel(entry: report.ExperimentEntry, prefix: str) -> None:
    live = entry.result
    causal = ep.has_causal_mfu(live)
    cols = st.columns(4)
    cols[0].metric("Step", f"{live.step_ms:.1f} ms", help=f"median of {live.iters} timed steps")
    cols[1].metric("Tokens/s", f"{live.tokens_per_s:,.0f}")
    cols[2].metric("Achieved", human_count(live.achieved_tflops * 1e12, "FLOP/s"),
                   help=f"{live.training_flops:.3e} FLOPs per step (3 × forward, analysis)")
    # the causal-attention MFU rides under the full-T×T one, as its delta
    cols[3].metric("MFU", f"{live.mfu:.1%}",
                   f"causal scores: {live.mfu_causal:.1%}" if causal else None,
                   delta_color="off", delta_arrow="off",
                   help=f"peak {live.peak_flops / 1e12:.3g} TFLOP/s; attention scores over the "
                        f"full T×T" + ("; causal half only: " + human_count(
                            live.achieved_tflops_causal * 1e12, "FLOP/s") if causal else ""))
    st.caption(f"MFU is measured against {live.peak_flops / 1e12:.3g} TFLOP/s: "
               f"{live.peak_flops_source}. Warm-up step (excluded): {live.warmup_s:.2f} s."
               + (" " + ep.CAUSAL_MFU_NOTE if causal else ""))
    st.plotly_chart(ep.live_phase_figure(live), key=prefix + "chart_phases")

    measured_peak = ep.peak_memory_is_measured(live)
    cols = st.columns(4)
    cols[0].metric("Initial loss", f"{live.initial_loss:.4f}",
                   f"{live.initial_loss - live.ln_vocab:+.4f} vs ln V", delta_color="off")
    cols[1].metric("ln V", f"{live.ln_vocab:.4f}", help=f"V = {entry.config.vocab_size:,}")
    cols[2].metric("Peak memory" if measured_peak else "Peak memory (estimate)",
                   human_bytes(live.peak_memory_bytes), help=live.peak_memory_source)
    cols[3].metric("Activations measured / predicted", f"{live.activation_ratio:.3f}",
                   f"{human_bytes(live.activation_bytes_measured)} vs "
                   f"{human_bytes(live.activation_bytes_estimated)}", delta_color="off")
    peak_note = (f"Peak memory: {live.peak_memory_source}." if measured_peak else
                 f"Peak memory is an estimate, not a measurement: {live.peak_memory_source}, "
                 f"added up from the tensors (the process's resident memory is not read).")
    st.caption(f"{peak_note} Activations measured: the tensors autograd saves for backward, "
               f"each storage once; predicted: analysis.activation_bytes. The memory guard "
               f"checked {human_bytes(live.estimated_training_bytes)} "
               f"(analysis.training_memory).")
    show_table(ep.live_memory_table(live, entry.config), width="stretch")

    st.markdown("**Logits at the initial weights, with and without the final norm** — the "
                "seed's most common Pre-LN bug is forgetting the final norm: the last block's "
                "output reaches lm_head unnormalised.")
    show_table(ep.logits_table(live.logits, live.logits_without_final_norm, live.ln_vocab),
               width="stretch")
    growth = live.logits_without_final_norm.std / max(live.logits.std, 1e-30)
    st.caption(f"Without the final norm the logits' std is {growth:.3g}× the normed one"
               + ("" if entry.config.final_norm else " (this config has no final norm: both rows "
                                                     "are the same model)")
               + ". The final norm rescales the last hidden state to unit RMS whatever its "
                 "size: at initialisation the residual stream is small (embeddings ~N(0, 0.02)), "
                 "after training it grows with depth — the Gradient norms page shows both "
                 "after a training run.")


def _decode_panel(entry: report.ExperimentEntry, prefix: str) -> None:
    bench = entry.result
    frame = bench.to_frame()
    longest = frame[frame.context_len == frame.context_len.max()]
    cols = st.columns(len(longest))
    for col, row in zip(cols, longest.itertuples()):
        col.metric(f"{row.variant.upper()} · {row.n_kv_heads} KV head"
                   f"{'s' if row.n_kv_heads > 1 else ''}",
                   f"{row.ms_per_token:.2f} ms/token",
                   f"cache {human_bytes(row.cache_bytes_measured)}", delta_color="off")
    if bench.bytes_agree:
        st.success("Measured cache bytes equal the prediction 2·L·G·D·b·B·tokens for every row.")
    else:
        st.error("Measured cache bytes differ from analysis.kv_cache_bytes_per_token × B × "
                 "tokens; see the table.")
    st.plotly_chart(ep.decode_figure(bench), key=prefix + "chart_decode")
    show_table(frame, width="stretch")
    st.caption("On a GPU decoding one token is memory-bound: its time follows the bytes read "
               "(weights + cache), which is where fewer KV heads pay off at long context and "
               "large batch. At small sizes on a CPU, fixed per-call overheads dominate.")


_PANELS: dict[str, Callable[[report.ExperimentEntry, str], None]] = {
    "gradnorms": _gradnorms_panel, "depth_sweep": _depth_sweep_panel,
    "training": _training_panel, "ablation": _training_panel, "live_pass": _live_pass_panel,
    "decode": _decode_panel}
